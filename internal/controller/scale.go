package controller

import (
	"fmt"
	"sort"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
)

// Scaling: a group converges to its InstanceCount.

// converge gives every group its target number of live nodes: new node records for missing
// ones, ShuttingDown for extra ones (see victims for which go).
func (r *round) converge() error {
	for _, g := range r.groups {
		target := int(g.Spec.GetInstanceCount())
		if g.State.Status == api.InstanceGroupStatusDeleting {
			target = 0
		}
		live := r.live(g.Name)
		for i := len(live); i < target; i++ {
			if err := r.addNode(g); err != nil {
				return err
			}
		}
		if len(live) > target {
			for _, n := range victims(live, len(live)-target) {
				if r.or.TakeOutWaits(n) {
					continue
				}
				why := fmt.Sprintf("scale-down of group %s to %d", g.Name, target)
				if g.State.Status == api.InstanceGroupStatusDeleting {
					why = "instance group " + g.Name + " deleted"
				}
				if err := r.terminate(n, why); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// victims chooses which nodes a scale-down removes: failed nodes first, then nodes still
// coming up, then the most recently launched, so the longest-serving healthy nodes (and the
// jobs on them) stay. This is hale's documented choice; HyperPod does not publish its own.
func victims(live []*store.Node, k int) []*store.Node {
	rank := func(n *store.Node) int {
		switch {
		case n.Details.Phase == store.PhaseFailed || n.Details.Unreachable:
			return 0
		case isBringUp(n.Details.Phase):
			return 1
		}
		return 2
	}
	sorted := append([]*store.Node(nil), live...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if rank(a) != rank(b) {
			return rank(a) < rank(b)
		}
		if !a.LaunchTime.Equal(b.LaunchTime) {
			return a.LaunchTime.After(b.LaunchTime)
		}
		return a.Seq > b.Seq
	})
	return sorted[:k]
}

// addNode records a new node of the group, Pending, with its instance id chosen now.
func (r *round) addNode(g *store.Group) error {
	n := g.NewNode(r.cl.ID, provider.NewInstanceID(), r.now)
	if err := r.tx.PutGroup(g); err != nil {
		return err
	}
	enterPhase(n, store.PhasePending, r.now)
	if err := r.tx.InsertNode(n); err != nil {
		return err
	}
	r.nodes = append(r.nodes, n)
	return r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s added to group %s as node %s (target %d); launching it.",
		n.InstanceID, g.Name, n.LogicalID, g.Spec.GetInstanceCount())
}

// mounts are the storage a group's nodes get (InstanceStorageConfigs): FSx file systems become
// directories shared by the cluster at their mount paths, a secondary EBS volume a directory of
// the node's own at /opt/sagemaker (research: the HyperPod API notes, §2.6).
func mounts(g *api.ClusterInstanceGroupSpecification) []provider.Mount {
	var out []provider.Mount
	for _, s := range g.InstanceStorageConfigs {
		switch {
		case s.FsxLustreConfig != nil:
			out = append(out, provider.Mount{Shared: true, Name: "fsx-lustre-" + s.FsxLustreConfig.GetDnsName(), Path: orDefault(s.FsxLustreConfig.GetMountPath(), api.DefaultFsxLustreMountPath)})
		case s.FsxOpenZfsConfig != nil:
			out = append(out, provider.Mount{Shared: true, Name: "fsx-openzfs-" + s.FsxOpenZfsConfig.GetDnsName(), Path: orDefault(s.FsxOpenZfsConfig.GetMountPath(), api.DefaultFsxOpenZfsMountPath)})
		case s.EbsVolumeConfig != nil && !s.EbsVolumeConfig.GetRootVolume():
			out = append(out, provider.Mount{Path: "/opt/sagemaker"})
		}
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
