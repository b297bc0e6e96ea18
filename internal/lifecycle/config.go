package lifecycle

import (
	"encoding/json"
	"sort"
	"strconv"

	"github.com/haleproject/hale/api"
	slurm "github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
)

// ResourceConfig is /opt/ml/config/resource_config.json, in HyperPod's exact shape.
type ResourceConfig struct {
	ClusterConfig  ClusterConfig         `json:"ClusterConfig"`
	InstanceGroups []ResourceConfigGroup `json:"InstanceGroups"`
}

// ClusterConfig names the cluster.
type ClusterConfig struct {
	ClusterArn  string `json:"ClusterArn"`
	ClusterName string `json:"ClusterName"`
}

// ResourceConfigGroup is one instance group and its instances.
type ResourceConfigGroup struct {
	Name         string                   `json:"Name"`
	InstanceType string                   `json:"InstanceType"`
	Instances    []ResourceConfigInstance `json:"Instances"`
}

// ResourceConfigInstance is one node. InstanceName is <group>-<n>, 1-based. AgentIpAddress is,
// on HyperPod, the address of a second, service-side interface; hale nodes have one interface,
// so it equals CustomerIpAddress.
type ResourceConfigInstance struct {
	InstanceName      string `json:"InstanceName"`
	InstanceId        string `json:"InstanceId"`
	CustomerIpAddress string `json:"CustomerIpAddress"`
	AgentIpAddress    string `json:"AgentIpAddress"`
}

// Member is a node as the resource configuration needs it.
type Member struct {
	Group, InstanceID, IP string
	Ordinal               int // the node's place in its group, from 1
}

// BuildResourceConfig lists every group (in order) with its nodes (by ordinal).
func BuildResourceConfig(arn, name string, groups []api.ClusterInstanceGroupSpecification, members []Member) []byte {
	rc := ResourceConfig{ClusterConfig: ClusterConfig{ClusterArn: arn, ClusterName: name}, InstanceGroups: []ResourceConfigGroup{}}
	byGroup := map[string][]Member{}
	for _, m := range members {
		byGroup[m.Group] = append(byGroup[m.Group], m)
	}
	for _, g := range groups {
		rg := ResourceConfigGroup{Name: g.GetInstanceGroupName(), InstanceType: string(g.GetInstanceType()), Instances: []ResourceConfigInstance{}}
		if rg.InstanceType == "" && g.InstanceRequirements != nil && len(g.InstanceRequirements.InstanceTypes) > 0 {
			rg.InstanceType = string(g.InstanceRequirements.InstanceTypes[0])
		}
		ms := byGroup[rg.Name]
		sort.Slice(ms, func(i, j int) bool { return ms[i].Ordinal < ms[j].Ordinal })
		for _, m := range ms {
			rg.Instances = append(rg.Instances, ResourceConfigInstance{InstanceName: rg.Name + "-" + strconv.Itoa(m.Ordinal),
				InstanceId: m.InstanceID, CustomerIpAddress: m.IP, AgentIpAddress: m.IP})
		}
		rc.InstanceGroups = append(rc.InstanceGroups, rg)
	}
	b, _ := json.MarshalIndent(rc, "", "    ")
	return append(b, '\n')
}

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
	roles, ok := slurm.RolesFromAPI(groups)
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
