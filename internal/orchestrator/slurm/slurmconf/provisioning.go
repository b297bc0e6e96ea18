package slurmconf

import (
	"encoding/json"

	"github.com/haleproject/hale/api"
)

// ProvisioningParameters is the legacy provisioning_parameters.json, which HyperPod's sample
// lifecycle scripts read to learn the Slurm roles.
type ProvisioningParameters struct {
	Version         string        `json:"version"`
	WorkloadManager string        `json:"workload_manager"`
	ControllerGroup string        `json:"controller_group"`
	LoginGroup      string        `json:"login_group,omitempty"`
	WorkerGroups    []WorkerGroup `json:"worker_groups"`
	FsxDNSName      string        `json:"fsx_dns_name,omitempty"`
	FsxMountName    string        `json:"fsx_mountname,omitempty"`
	FsxOpenZfsDNS   string        `json:"fsx_openzfs_dns_name,omitempty"`
}

// WorkerGroup maps a compute group to its partition.
type WorkerGroup struct {
	InstanceGroupName string `json:"instance_group_name"`
	PartitionName     string `json:"partition_name"`
}

// BuildProvisioningParameters derives provisioning_parameters.json from API-driven SlurmConfig,
// so scripts written for the legacy file work on clusters that declare roles in the API.
// It returns nil when the groups carry no SlurmConfig.
func BuildProvisioningParameters(groups []api.ClusterInstanceGroupSpecification) []byte {
	roles, ok := RolesFromAPI(groups)
	if !ok {
		return nil
	}
	pp := ProvisioningParameters{Version: "1.0.0", WorkloadManager: "slurm", WorkerGroups: []WorkerGroup{},
		ControllerGroup: roles.Controller, LoginGroup: roles.Login}
	for _, g := range groups {
		if g.SlurmConfig == nil {
			continue
		}
		if part, ok := roles.Workers[g.GetInstanceGroupName()]; ok { // in the groups' order
			pp.WorkerGroups = append(pp.WorkerGroups, WorkerGroup{InstanceGroupName: g.GetInstanceGroupName(), PartitionName: part})
		}
		for _, s := range g.InstanceStorageConfigs {
			if f := s.FsxLustreConfig; f != nil && pp.FsxDNSName == "" {
				pp.FsxDNSName, pp.FsxMountName = f.GetDnsName(), f.GetMountName()
			}
			if f := s.FsxOpenZfsConfig; f != nil && pp.FsxOpenZfsDNS == "" {
				pp.FsxOpenZfsDNS = f.GetDnsName()
			}
		}
	}
	b, _ := json.MarshalIndent(pp, "", "    ")
	return append(b, '\n')
}
