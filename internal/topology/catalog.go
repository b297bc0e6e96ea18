// Package topology holds what hale knows about instance types and the network topology built
// from them (EC2's DescribeInstanceTopology: trees of network nodes, UltraServer blocks) with
// the rules a topology follows; Slurm's files are rendered from it by the Slurm orchestrator
// (slurmconf). The catalog is data (instance_types.json), not code: one entry per ml.* type of
// the SageMaker ClusterInstanceType enum.
package topology

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
)

// InstanceType describes one ml.* instance type.
type InstanceType struct {
	Name         string        `json:"InstanceType"` // e.g. ml.p5.48xlarge
	VCPUs        int           `json:"VCPUs"`
	MemoryMiB    int64         `json:"MemoryMiB"`
	Accelerators *Accelerators `json:"Accelerators,omitempty"`
	Topology     *TypeTopology `json:"Topology,omitempty"`
}

// Accelerators are an instance type's GPUs or Neuron devices.
type Accelerators struct {
	Kind      string `json:"Kind"`  // "gpu" or "neuron"
	Model     string `json:"Model"` // e.g. "NVIDIA H100 80GB HBM3"
	Count     int    `json:"Count"`
	MemoryMiB int64  `json:"MemoryMiB"` // per device
}

// TypeTopology says what EC2 DescribeInstanceTopology reports for the type: how many network
// node layers, and for UltraServer types the NVLink block they come in.
type TypeTopology struct {
	NetworkNodeLayers int          `json:"NetworkNodeLayers"`
	UltraServer       *UltraServer `json:"UltraServer,omitempty"`
}

// UltraServer is an NVLink domain: BlockSize instances of the type share one block.
type UltraServer struct {
	Type      string `json:"Type"`
	BlockSize int    `json:"BlockSize"`
}

// catalogJSON is the catalog. Its Topology entries follow the instance types and network-node
// counts of the EC2 User Guide, "Prerequisites for Amazon EC2 topology", section Instance types:
// https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html#inst-net-topology-prereqs-instance-types
// (how the layers fit together: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html).
// Checked in this form: 3 network nodes for g6e (all sizes), g7e, p4d, p4de, p5.48xlarge, p5e,
// p5en, p6e-gb200.36xlarge, trn1, trn1n, trn2.48xlarge; 4 for p6-b200 and p6-b300. EC2 does not
// list p5.4xlarge, trn2.3xlarge, g6, c6i, m6i, r6i, c7g or m7g, so they have none here.
// TestCatalogTopologyFollowsEC2Docs holds the catalog to that list.
//
//go:embed instance_types.json
var catalogJSON []byte

var catalog = func() map[string]*InstanceType {
	var doc struct {
		InstanceTypes []*InstanceType
	}
	if err := json.Unmarshal(catalogJSON, &doc); err != nil {
		panic(fmt.Sprintf("topology: instance_types.json: %v", err))
	}
	m := make(map[string]*InstanceType, len(doc.InstanceTypes))
	for _, t := range doc.InstanceTypes {
		m[t.Name] = t
	}
	return m
}()

// Lookup returns the catalog entry of an ml.* instance type, or false.
func Lookup(name string) (*InstanceType, bool) {
	t, ok := catalog[name]
	return t, ok
}

// Names returns every instance type of the catalog, sorted.
func Names() []string {
	out := make([]string, 0, len(catalog))
	for n := range catalog {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
