package slurmconf

import (
	"encoding/json"
	"fmt"

	"github.com/haleproject/hale/api"
)

// DefaultPartition is the partition every compute node is in besides its group's own, Slurm's
// default partition, as on HyperPod (research hyperpod-api-slurm.md, the Slurm layout).
const DefaultPartition = "dev"

// Roles says which instance group plays which Slurm role.
type Roles struct {
	Controller string            `json:"controller"`
	Login      string            `json:"login,omitempty"`
	Workers    map[string]string `json:"workers"` // compute group -> its partition
	Source     string            `json:"source"`  // "SlurmConfig" or "provisioning_parameters.json"
}

// Role is a group's role: "controller", "login", "compute" or "" (not in Slurm).
func (r *Roles) Role(group string) string {
	switch {
	case group == r.Controller:
		return "controller"
	case group == r.Login:
		return "login"
	}
	if _, ok := r.Workers[group]; ok {
		return "compute"
	}
	return ""
}

// RolesFromAPI reads the roles from the groups' SlurmConfig (API-driven configuration); ok is
// false when no group has one.
func RolesFromAPI(groups []api.ClusterInstanceGroupSpecification) (*Roles, bool) {
	r := &Roles{Workers: map[string]string{}, Source: "SlurmConfig"}
	found := false
	for _, g := range groups {
		sc := g.SlurmConfig
		if sc == nil {
			continue
		}
		found = true
		switch sc.GetNodeType() {
		case api.ClusterSlurmNodeTypeController:
			r.Controller = g.GetInstanceGroupName()
		case api.ClusterSlurmNodeTypeLogin:
			r.Login = g.GetInstanceGroupName()
		case api.ClusterSlurmNodeTypeCompute:
			part := g.GetInstanceGroupName()
			if len(sc.PartitionNames) > 0 {
				part = sc.PartitionNames[0]
			}
			r.Workers[g.GetInstanceGroupName()] = part
		}
	}
	return r, found
}

// RolesFromProvisioningParameters reads the legacy provisioning_parameters.json of a
// lifecycle bundle (controller_group, login_group, worker_groups with partition_name).
func RolesFromProvisioningParameters(doc []byte) (*Roles, error) {
	var pp struct {
		WorkloadManager string `json:"workload_manager"`
		ControllerGroup string `json:"controller_group"`
		LoginGroup      string `json:"login_group"`
		WorkerGroups    []struct {
			InstanceGroupName string `json:"instance_group_name"`
			PartitionName     string `json:"partition_name"`
		} `json:"worker_groups"`
	}
	if err := json.Unmarshal(doc, &pp); err != nil {
		return nil, fmt.Errorf("provisioning_parameters.json: %w", err)
	}
	if pp.WorkloadManager != "" && pp.WorkloadManager != "slurm" {
		return nil, fmt.Errorf("provisioning_parameters.json: workload_manager %q is not slurm", pp.WorkloadManager)
	}
	if pp.ControllerGroup == "" {
		return nil, fmt.Errorf("provisioning_parameters.json: controller_group is missing")
	}
	r := &Roles{Controller: pp.ControllerGroup, Login: pp.LoginGroup, Workers: map[string]string{}, Source: "provisioning_parameters.json"}
	for _, w := range pp.WorkerGroups {
		part := w.PartitionName
		if part == "" {
			part = w.InstanceGroupName
		}
		r.Workers[w.InstanceGroupName] = part
	}
	return r, nil
}
