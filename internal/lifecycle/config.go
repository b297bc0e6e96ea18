package lifecycle

import (
	"encoding/json"
	"sort"
	"strconv"

	"github.com/haleproject/hale/api"
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
