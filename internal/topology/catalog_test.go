package topology

import (
	"testing"

	"github.com/haleproject/hale/api"
)

// TestCatalogCoversTheEnum: every ClusterInstanceType of the model has an entry, and no entry
// names a type the model does not have.
func TestCatalogCoversTheEnum(t *testing.T) {
	enum := api.ClusterInstanceType("").Values()
	if len(enum) != len(catalog) {
		t.Errorf("catalog has %d types, the model %d", len(catalog), len(enum))
	}
	for _, v := range enum {
		it, ok := Lookup(string(v))
		if !ok {
			t.Errorf("%s missing from instance_types.json", v)
			continue
		}
		if it.VCPUs <= 0 || it.MemoryMiB <= 0 {
			t.Errorf("%s: %d vCPUs, %d MiB", v, it.VCPUs, it.MemoryMiB)
		}
	}
	if p5, _ := Lookup("ml.p5.48xlarge"); p5.Accelerators == nil || p5.Accelerators.Count != 8 || p5.Topology == nil || p5.Topology.NetworkNodeLayers != 3 {
		t.Errorf("ml.p5.48xlarge: %+v", p5)
	}
	if gb, _ := Lookup("ml.p6e-gb200.36xlarge"); gb.Topology == nil || gb.Topology.UltraServer == nil || gb.Topology.UltraServer.BlockSize != 18 {
		t.Errorf("ml.p6e-gb200.36xlarge: %+v", gb)
	}
}

// TestCatalogTopologyFollowsEC2Docs: the types that get network nodes, and how many, are those of the EC2
// User Guide's list of supported instance types ("Prerequisites for Amazon EC2 topology",
// https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html),
// restricted to the ml.* types of the catalog. Every other type has no topology.
func TestCatalogTopologyFollowsEC2Docs(t *testing.T) {
	layers := map[string]int{}
	for _, n := range []string{"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6e-gb200.36xlarge",
		"trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge",
		"g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge", "g6e.8xlarge", "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge", "g6e.48xlarge",
		"g7e.2xlarge", "g7e.4xlarge", "g7e.8xlarge", "g7e.12xlarge", "g7e.24xlarge", "g7e.48xlarge"} {
		layers["ml."+n] = 3
	}
	layers["ml.p6-b200.48xlarge"], layers["ml.p6-b300.48xlarge"] = 4, 4
	for _, name := range Names() {
		it, _ := Lookup(name)
		got := 0
		if it.Topology != nil {
			got = it.Topology.NetworkNodeLayers
		}
		if got != layers[name] {
			t.Errorf("%s: %d network-node layers, EC2's docs say %d", name, got, layers[name])
		}
		if HasTopology(name) != (layers[name] > 0) || HasTopology(name[len("ml."):]) != (layers[name] > 0) {
			t.Errorf("HasTopology(%s) = %t", name, HasTopology(name))
		}
	}
	for name := range layers {
		if _, ok := Lookup(name); !ok {
			t.Errorf("%s is not in the catalog", name)
		}
	}
	if UltraServerOf("p6e-gb200.36xlarge") == nil || UltraServerOf("ml.p6-b200.48xlarge") != nil {
		t.Error("UltraServerOf: only p6e-gb200 comes in UltraServers")
	}
}
