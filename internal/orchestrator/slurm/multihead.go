package slurm

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
)

// Multi-head (docs/slurm.md, "Multi-head"): a Controller group of two or more instances runs a
// slurmctld on each, the lowest ordinal the primary and the others its backups in ordinal order
// (one SlurmctldHost line each), as HyperPod's multi-head clusters do. Every slurmctld keeps
// its state in one directory on the cluster's shared file system (the controller group's FSx,
// which the API requires of such a group), so a backup that takes over has every running and
// pending job with its id, and a replaced controller finds them again. The accounting database
// lives there too, served by the primary's MariaDB and slurmdbd: replacing the primary does not
// erase it.

// MultiHeadCtldTimeout is the SlurmctldTimeout hale sets in a multi-head cluster: how many
// seconds a backup waits for an unanswering primary before it takes over. Slurm's default is
// 120; hale's nodes answer within a second when alive (SlurmdTimeout is 10 in hale's defaults
// too), and two minutes without a controller is two minutes of sbatch and squeue failing.
const MultiHeadCtldTimeout = 10

// headDir is the directory a multi-head cluster keeps on its shared file system
// (<mount>/.hale/slurm/<cluster id>: one file system may serve several clusters), "" for a
// cluster with one controller or whose controller group has no FSx.
func (r *round) headDir() string {
	for _, g := range r.groups {
		if g.Name != r.sl.Controller || g.Spec.InstanceCount == nil || *g.Spec.InstanceCount < 2 {
			continue
		}
		if mount := api.SharedMountPath(&g.Spec); mount != "" {
			return mount + "/.hale/slurm/" + r.cl.ID
		}
	}
	return ""
}

// Head is one controller of a multi-head cluster as slurm.conf lists it.
type Head struct {
	LogicalID string
	slurmconf.Controller
}

// heads are the controllers of a multi-head cluster in the order slurm.conf lists them (by
// ordinal: the first is the primary). A controller being replaced keeps its place with the
// address it had until its new instance has one, so a replacement does not reorder the
// controllers (which would restart every slurmctld with another primary).
func (r *round) heads(prev []Head) []Head {
	had := map[string]Head{}
	for _, h := range prev {
		had[h.LogicalID] = h
	}
	var ctls []*store.Node
	for _, n := range r.nodes {
		if n.GroupName == r.sl.Controller && n.Details.Phase != store.PhaseFailed {
			ctls = append(ctls, n)
		}
	}
	slices.SortFunc(ctls, func(a, b *store.Node) int { return cmp.Compare(a.Details.Ordinal, b.Details.Ordinal) })
	var out []Head
	for _, n := range ctls {
		h := Head{LogicalID: n.LogicalID, Controller: slurmconf.Controller{Name: orchestrator.NodeName(n), Addr: n.Details.PrivateIP}}
		if h.Addr == "" || h.Name == "" {
			var ok bool
			if h, ok = had[n.LogicalID]; !ok {
				continue
			}
		}
		out = append(out, h)
	}
	return out
}

// accountingHost says whether node n runs a cluster's MariaDB and slurmdbd (any controller of a
// single-controller cluster; the primary of a multi-head one) and where MariaDB keeps its data.
func accountingHost(st *State, n *store.Node) (run bool, dataDir string) {
	if roleIn(st, n.GroupName) != "controller" {
		return false, ""
	}
	if st.HeadDir == "" {
		return true, slurmconf.MariaDBDir
	}
	return len(st.Heads) > 0 && st.Heads[0].LogicalID == n.LogicalID, st.HeadDir + "/mysql"
}

// accountingNode is the node whose slurmdbd hale watches: the running controller ctl, or in a
// multi-head cluster the primary, nil while it is not in service with its agent connected.
func (r *round) accountingNode(ctl *store.Node) *store.Node {
	if r.sl.HeadDir == "" {
		return ctl
	}
	for _, n := range r.nodes {
		if len(r.sl.Heads) > 0 && n.LogicalID == r.sl.Heads[0].LogicalID && n.Details.Phase == store.PhaseReady &&
			!n.Details.Unreachable && r.s.h.Connected(n.InstanceID) {
			return n
		}
	}
	return nil
}

// makeHeadDir makes a multi-head cluster's state directory on the shared file system, from a
// controller node, before its slurmctld starts (slurmctld does not make StateSaveLocation).
func (s *Slurm) makeHeadDir(ctx context.Context, n *store.Node) error {
	var dir string
	err := s.h.Store().Read(ctx, func(tx store.Tx) error {
		st, err := loadState(tx, n.ClusterID)
		if err != nil || st == nil || roleIn(st, n.GroupName) != "controller" {
			return err
		}
		dir = st.HeadDir
		return nil
	})
	if err != nil {
		return s.setupErr(n, "reading the cluster", err)
	}
	if dir == "" {
		return nil
	}
	if _, err := s.h.Run(ctx, n.InstanceID, []string{"mkdir", "-p", dir + "/statesave"}, 10*time.Second); err != nil {
		return s.setupErr(n, "making the controllers' shared state directory "+dir+"/statesave", err)
	}
	return nil
}
