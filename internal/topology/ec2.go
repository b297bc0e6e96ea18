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

// Answer is a DescribeInstanceTopology answer as the AWS CLI prints it: the instances, and the
// NextToken of its last page. A NextToken means EC2 had more instances than the file holds: the
// file is one page of several (written with --no-paginate, --max-items or --next-token).
type Answer struct {
	Instances []InstanceTopology
	NextToken string // the last page's; "" when the answer is complete
}

// ReadAnswer reads a DescribeInstanceTopology answer ({"Instances": [...]}), or several
// concatenated (one per page, as `aws ... --no-paginate` pages print them). A document without
// "Instances" is refused: it is not such an answer.
func ReadAnswer(r io.Reader) (*Answer, error) {
	dec := json.NewDecoder(r)
	a := &Answer{}
	pages := 0
	for {
		var page struct {
			Instances *[]InstanceTopology `json:"Instances"`
			NextToken *string             `json:"NextToken"`
		}
		err := dec.Decode(&page)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not DescribeInstanceTopology JSON: %w", err)
		}
		if page.Instances == nil {
			return nil, fmt.Errorf("no \"Instances\" list: not the output of aws ec2 describe-instance-topology")
		}
		pages++
		a.Instances = append(a.Instances, *page.Instances...)
		a.NextToken = ""
		if page.NextToken != nil {
			a.NextToken = strings.TrimSpace(*page.NextToken)
		}
	}
	if pages == 0 {
		return nil, fmt.Errorf("empty: not the output of aws ec2 describe-instance-topology")
	}
	return a, nil
}

// ParseInstanceTopology reads a DescribeInstanceTopology answer like ReadAnswer and returns its
// instances.
func ParseInstanceTopology(r io.Reader) ([]InstanceTopology, error) {
	a, err := ReadAnswer(r)
	if err != nil {
		return nil, err
	}
	return a.Instances, nil
}

// ClusterInstance is one instance of the cluster: its id, Slurm node name, type, group and
// the partitions it is in.
type ClusterInstance struct {
	ID, Name, Type, Group string
	Partitions            []string
}

// ResourceConfigInstances reads a HyperPod resource_config.json: every instance with its
// Slurm node name (ip-a-b-c-d from CustomerIpAddress), type and group.
func ResourceConfigInstances(r io.Reader) ([]ClusterInstance, error) {
	var rc struct {
		InstanceGroups *[]struct {
			Name         string
			InstanceType string
			Instances    []struct {
				InstanceId, CustomerIpAddress string
			}
		}
	}
	if err := json.NewDecoder(r).Decode(&rc); err != nil {
		return nil, fmt.Errorf("not a resource_config.json: %w", err)
	}
	if rc.InstanceGroups == nil {
		return nil, fmt.Errorf("no \"InstanceGroups\": not a HyperPod resource_config.json")
	}
	var out []ClusterInstance
	for _, g := range *rc.InstanceGroups {
		for _, in := range g.Instances {
			if in.InstanceId == "" || in.CustomerIpAddress == "" {
				continue
			}
			out = append(out, ClusterInstance{ID: in.InstanceId, Name: "ip-" + strings.ReplaceAll(in.CustomerIpAddress, ".", "-"),
				Type: g.InstanceType, Group: g.Name})
		}
	}
	return out, nil
}

// NodesFrom joins the topology answer with the cluster's compute instances: every one becomes
// a node, with its network nodes when EC2 reported them (missing lists those it has no data for
// yet; they go under the root's "unplaced" leaf). Instances of the answer that are not the
// cluster's compute instances are returned as ignored.
func NodesFrom(insts []InstanceTopology, cluster []ClusterInstance) (nodes []Node, missing, ignored []string) {
	mine := map[string]bool{}
	for _, c := range cluster {
		mine[c.ID] = true
	}
	byID := map[string]InstanceTopology{}
	for _, in := range insts {
		if !mine[in.InstanceID] {
			ignored = append(ignored, in.InstanceID)
			continue
		}
		byID[in.InstanceID] = in
	}
	sorted := append([]ClusterInstance(nil), cluster...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	for _, c := range sorted {
		n := Node{Name: c.Name, InstanceType: c.Type, Partitions: c.Partitions}
		if in, ok := byID[c.ID]; ok {
			n.NetworkNodes, n.CapacityBlockID = in.NetworkNodes, in.CapacityBlockID
			if n.InstanceType == "" {
				n.InstanceType = in.InstanceType
			}
		} else {
			missing = append(missing, c.ID)
		}
		nodes = append(nodes, n)
	}
	sort.Strings(ignored)
	return nodes, missing, ignored
}
