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
