package local

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/haleproject/hale/internal/topology"
)

// The local provider's simulated network fabric, so that topology is live on local clusters:
// instances of types for which EC2 reports topology get network nodes (top layer first, as
// DescribeInstanceTopology lists them): one core, spines of FabricLeavesPerSpine leaves, and
// leaves of FabricLeafSize instances (4-layer types get one more aggregation layer).
// UltraServer types also get a capacity block per UltraServer of the catalog's block size.
// Leaves are small so that even a 3-node test cluster spans two of them.
const (
	FabricLeafSize       = 2
	FabricLeavesPerSpine = 2
)

// fabric remembers, per cluster, which leaf each address last sat under, so a replacement (a new
// machine at the same address) lands under a different leaf, as a real one may.
type fabric struct {
	LastLeaf map[string]int `json:"LastLeaf"` // address -> leaf index
}

func (p *Provider) fabricPath(clusterID string) string {
	return filepath.Join(p.cfg.Root, "clusters", clusterID, "fabric.json")
}

// place gives r its network nodes and capacity block, if its type has topology.
func (p *Provider) place(r *record) error {
	it, ok := topology.Lookup(r.InstanceType)
	if !ok || it.Topology == nil || it.Topology.NetworkNodeLayers == 0 {
		return nil
	}
	var f fabric
	if b, err := os.ReadFile(p.fabricPath(r.ClusterID)); err == nil {
		json.Unmarshal(b, &f)
	}
	if f.LastLeaf == nil {
		f.LastLeaf = map[string]int{}
	}
	used := map[int]int{}
	rs, err := p.records()
	if err != nil {
		return err
	}
	for _, o := range rs {
		if o.ClusterID == r.ClusterID && o.ID != r.ID && o.Leaf >= 0 && len(o.NetworkNodes) > 0 {
			used[o.Leaf]++
		}
	}
	last, replaced := f.LastLeaf[r.IP]
	leaf := 0
	for used[leaf] >= FabricLeafSize || (replaced && leaf == last) {
		leaf++
	}
	r.Leaf = leaf
	spine := leaf / FabricLeavesPerSpine
	id := func(kind string, n int) string {
		h := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", r.ClusterID, kind, n))
		return "nn-" + hex.EncodeToString(h[:])[:17]
	}
	r.NetworkNodes = []string{id("core", 0)}
	if it.Topology.NetworkNodeLayers >= 4 {
		r.NetworkNodes = append(r.NetworkNodes, id("agg", spine/FabricLeavesPerSpine))
	}
	r.NetworkNodes = append(r.NetworkNodes, id("spine", spine), id("leaf", leaf))
	if us := it.Topology.UltraServer; us != nil {
		h := sha256.Sum256(fmt.Appendf(nil, "%s/block/%d", r.ClusterID, leaf*FabricLeafSize/us.BlockSize))
		r.CapacityBlockID = "cr-" + hex.EncodeToString(h[:])[:17]
	}
	f.LastLeaf[r.IP] = leaf
	if err := os.MkdirAll(filepath.Dir(p.fabricPath(r.ClusterID)), 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(f)
	return os.WriteFile(p.fabricPath(r.ClusterID), b, 0o600)
}
