package topology

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// InstanceTopology is one instance of EC2 DescribeInstanceTopology's answer (the AWS CLI's
// JSON: `aws ec2 describe-instance-topology`; research §4.2).
type InstanceTopology struct {
	InstanceID      string   `json:"InstanceId"`
	InstanceType    string   `json:"InstanceType"`
	NetworkNodes    []string `json:"NetworkNodes"`
	CapacityBlockID string   `json:"CapacityBlockId"`
	GroupName       string   `json:"GroupName"`
}

// ParseInstanceTopology reads a DescribeInstanceTopology answer ({"Instances": [...]}), or
// several concatenated (one per page, as `aws ... --no-paginate` pages print them).
func ParseInstanceTopology(r io.Reader) ([]InstanceTopology, error) {
	dec := json.NewDecoder(r)
	var out []InstanceTopology
	for {
		var page struct {
			Instances []InstanceTopology `json:"Instances"`
		}
		err := dec.Decode(&page)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("instance topology: %w", err)
		}
		out = append(out, page.Instances...)
	}
	return out, nil
}

// ResourceConfigNames maps instance ids to Slurm node names (ip-a-b-c-d from
// CustomerIpAddress) from a HyperPod resource_config.json, with each instance's type.
func ResourceConfigNames(r io.Reader) (names, types map[string]string, err error) {
	var rc struct {
		InstanceGroups []struct {
			InstanceType string
			Instances    []struct {
				InstanceId, CustomerIpAddress string
			}
		}
	}
	if err := json.NewDecoder(r).Decode(&rc); err != nil {
		return nil, nil, fmt.Errorf("resource config: %w", err)
	}
	names, types = map[string]string{}, map[string]string{}
	for _, g := range rc.InstanceGroups {
		for _, in := range g.Instances {
			if in.InstanceId == "" || in.CustomerIpAddress == "" {
				continue
			}
			names[in.InstanceId] = "ip-" + strings.ReplaceAll(in.CustomerIpAddress, ".", "-")
			types[in.InstanceId] = g.InstanceType
		}
	}
	return names, types, nil
}

// NodesFrom joins the topology answer with the cluster's instances (id -> Slurm name, id ->
// type): every instance of the cluster becomes a node, with its network nodes when EC2 reported
// them (an instance EC2 has no data for yet stays without). Instances of the answer that are not
// the cluster's are returned as ignored.
func NodesFrom(insts []InstanceTopology, names, types map[string]string) (nodes []Node, ignored []string) {
	byID := map[string]InstanceTopology{}
	for _, in := range insts {
		if _, ok := names[in.InstanceID]; !ok {
			ignored = append(ignored, in.InstanceID)
			continue
		}
		byID[in.InstanceID] = in
	}
	ids := make([]string, 0, len(names))
	for id := range names {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		n := Node{Name: names[id], InstanceType: types[id]}
		if in, ok := byID[id]; ok {
			n.NetworkNodes, n.CapacityBlockID = in.NetworkNodes, in.CapacityBlockID
			if n.InstanceType == "" {
				n.InstanceType = in.InstanceType
			}
		}
		nodes = append(nodes, n)
	}
	sort.Strings(ignored)
	return nodes, ignored
}
