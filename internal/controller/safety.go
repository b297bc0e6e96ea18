package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/plural"
	"github.com/haleproject/hale/internal/store"
)

// Repair on a real fleet (docs/health.md, "Repair on a real fleet"). Two brakes keep automatic
// repair from taking a healthy fleet apart when the fault is not the nodes' (a driver or
// firmware rollout that raised the same Xid on 704 healthy nodes: NVIDIA
// open-gpu-kernel-modules#1370; NVSentinel caps its remediation at half the cluster):
//
//   - the cap: at most RepairMaxShare of a cluster's nodes (one at least) are in repair at
//     once; an automatic repair beyond it drains its node and waits (RepairWaiting) until one
//     finishes;
//   - the burst pause: the same fault on BurstNodes nodes, and BurstShare of the cluster,
//     within BurstWindow pauses every automatic repair of the cluster (the pause is stored
//     in the cluster's state, so it outlives a restart) until an operator resumes them
//     (`hale repairs resume`, ResumeRepairs).
//
// What an operator asks for (BatchRebootClusterNodes, BatchReplaceClusterNodes, an Action:
// reason in Slurm) is neither capped nor paused: it counts against the cap, but never waits.

// Defaults of the brakes (Config.RepairMaxShare, BurstNodes, BurstShare, BurstWindow); the
// reasoning is in docs/health.md.
const (
	// DefaultRepairMaxShare: a quarter of the nodes in repair at once. NVSentinel allows half;
	// a quarter keeps three quarters of a training job's nodes serving while a bad batch of
	// findings is still being understood, and lets a 4-node cluster repair one at a time.
	DefaultRepairMaxShare = 0.25
	// DefaultBurstNodes, DefaultBurstShare, DefaultBurstWindow: the same fault on 3 nodes and
	// 2 % of the cluster within 10 minutes. Hardware faults are independent and rare (Llama 3:
	// 419 unexpected interruptions in 54 days on 16,384 GPUs, about 0.05 per 10 minutes on
	// 2,048 nodes, every fault type together), so three of one kind in 10 minutes is a common
	// cause; the share keeps a fleet of many thousand nodes from pausing on chance.
	DefaultBurstNodes  = 3
	DefaultBurstShare  = 0.02
	DefaultBurstWindow = 10 * time.Minute
	// DefaultBurstHold: 2 s between a health finding's drain and the first thing done to its
	// node. Findings of one cause on many nodes come within a second or two of each other
	// (a driver's Xid on each node's kernel log, reported as it is read); without the hold the
	// first node would be replaced before the pause could count the others.
	DefaultBurstHold = 2 * time.Second
)

// automatic reports whether hale started the repair itself (a health finding, a node that
// stopped answering), as opposed to an operator.
func automatic(rp *store.Repair) bool {
	return rp.Source.Automatic()
}

// repairCap is how many of the cluster's nodes may be in repair at once.
func (c *Controller) repairCap(nodes int) int {
	return max(1, int(math.Floor(c.cfg.RepairMaxShare*float64(nodes)+1e-9)))
}

// inRepair counts the repairs that hold a place under the cap.
func inRepair(open []*store.Repair) int {
	n := 0
	for _, rp := range open {
		if rp.State.Admitted() {
			n++
		}
	}
	return n
}

// repairTurn says whether an automatic repair may go past its drain now, and if not why.
func (r *round) repairTurn() (bool, string) {
	if p := r.cl.State.RepairPause; p != nil {
		return false, fmt.Sprintf("automatic repairs of the cluster are paused since %s: %s came on %s at once (%s); resume them with hale repairs resume --cluster-name %s once the cause is known",
			p.Since.Format(time.RFC3339), p.Fault, plural.Count(len(p.Nodes), "node", "nodes"), strings.Join(p.Nodes, ", "), r.cl.Name)
	}
	cap, busy := r.c.repairCap(len(r.nodes)), inRepair(r.open)
	if busy >= cap {
		return false, fmt.Sprintf("%d of the cluster's %d nodes are in repair, at most %d at once (%.0f %%); it starts when one finishes",
			busy, len(r.nodes), cap, 100*r.c.cfg.RepairMaxShare)
	}
	return true, ""
}

// burstHeld says whether an automatic repair for a health finding is still within its hold
// (Config.BurstHold), and asks for a round when the hold ends.
func (r *round) burstHeld(rp *store.Repair) bool {
	if rp.Source != store.SourceHealth {
		return false
	}
	wait := r.c.cfg.BurstHold - r.now.Sub(rp.CreatedAt)
	if wait <= 0 {
		return false
	}
	id := r.cl.ID
	time.AfterFunc(wait, func() { r.c.Enqueue(id) })
	return true
}

// repairWait puts an automatic repair whose turn has not come in Waiting, its node drained,
// with one event.
func (r *round) repairWait(rp *store.Repair, n *store.Node, drained, why string) error {
	rp.Message = why
	if err := r.repairTo(rp, n, store.RepairWaiting, drained+"; waiting: "+why); err != nil {
		return err
	}
	return r.nodeEvent(n, api.ClusterEventLevelInfo, "Repair %s of node %s (%s for %s) waits, the node drained: %s.",
		rp.ID, n.LogicalID, strings.ToLower(string(rp.Action)), rp.Fault, why)
}

// burstKey is what counts as the same fault across nodes: its fault type, and its Xid when it
// has one ("gpu.bus_lost (Xid 79)").
func burstKey(fault string, xid int) string {
	if xid != 0 {
		return fmt.Sprintf("%s (Xid %d)", fault, xid)
	}
	return fault
}

// watchBurst pauses the cluster's automatic repairs when finding f, which asks node n for an
// action, makes the same fault come on BurstNodes nodes and BurstShare of the cluster within
// BurstWindow (after the last resume: what an operator let through is not counted again).
// While a pause lasts, a node with the same fault is added to its list. The round announces a
// new pause (announcePause). It changes cl, and stores it.
func (c *Controller) watchBurst(tx store.Tx, cl *store.Cluster, n *store.Node, f health.Finding, now time.Time) error {
	k := burstKey(f.Fault, f.Xid)
	if p := cl.State.RepairPause; p != nil {
		if p.Fault != k || slices.Contains(p.Nodes, n.LogicalID) {
			return nil
		}
		p.Nodes = append(p.Nodes, n.LogicalID)
		return tx.UpdateCluster(cl)
	}
	since := now.Add(-burstWindow(f.Fault, c.cfg.BurstWindow))
	if cl.State.RepairsResumedAt.After(since) {
		since = cl.State.RepairsResumedAt
	}
	nodes, err := tx.NodesOf(cl.ID)
	if err != nil {
		return err
	}
	var hit []string
	for _, m := range nodes {
		if m.LogicalID == n.LogicalID {
			hit = append(hit, m.LogicalID)
			continue
		}
		if f.Fault == heartbeatFault && !m.Details.Unreachable {
			// Silences count together only while they last: a node that died on its own,
			// was replaced and answers again (or answers again by itself) was not cut with
			// this one (the robustness suite's seed 1796381796697267849: two agents killed
			// 21 s apart, the first already replaced, were taken for a partition).
			continue
		}
		fs, err := tx.FindingsOf(cl.ID, m.LogicalID, since)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(fs, func(p *store.Finding) bool {
			return burstKey(p.Fault, p.Xid) == k && health.Action(p.Action) != health.Ignore && (f.Fault != heartbeatFault || p.InstanceID == m.InstanceID)
		}) {
			hit = append(hit, m.LogicalID)
		}
	}
	least := c.cfg.BurstNodes
	if f.Fault == heartbeatFault {
		least = min(least, heartbeatBurstNodes)
	}
	if len(hit) < least || float64(len(hit)) < c.cfg.BurstShare*float64(len(nodes)) {
		return nil
	}
	cl.State.RepairPause = &store.RepairPause{Fault: k, Nodes: hit, Since: now}
	cl.UpdatedAt = now
	return tx.UpdateCluster(cl)
}

// heartbeatFault is the control plane's finding for a node that stopped answering. Silences
// that come together are a network fault (a switch, a link, a partition of part of the fleet)
// far more often than machines dying in the same minutes: they count toward the burst pause as
// any fault does, and the pause they make is told as a partition and ends by itself once the
// nodes answer again (the rest of the fleet judged the fault the nodes').
const heartbeatFault = "node.heartbeat_lost"

// heartbeatBurstWindow is how close together silences must start to count as one: a cut takes
// its nodes' heartbeats at the same moment (their verdicts come within the silence threshold
// of each other), while machines that die on their own do so minutes or days apart.
const heartbeatBurstWindow = 30 * time.Second

// heartbeatBurstNodes is how many silences within heartbeatBurstWindow are a partition (with
// BurstShare of the cluster): two machines dying on their own within the same half minute is
// far rarer than one cut taking two (the robustness suite's partition of two of four nodes
// had one of them replaced for the link it saw go down). The pause such silences make ends by
// itself when the nodes answer; in a fleet of more than 100 nodes the share asks for more.
const heartbeatBurstNodes = 2

// burstWindow is the window within which findings of fault count together toward the pause.
func burstWindow(fault string, window time.Duration) time.Duration {
	if fault == heartbeatFault {
		return heartbeatBurstWindow
	}
	return window
}

// announcePause writes the one Error event of a new pause, naming the fault and its nodes, and
// ends a partition's pause whose nodes all answer again.
func (r *round) announcePause() error {
	p := r.cl.State.RepairPause
	if p == nil {
		return nil
	}
	if p.Fault == heartbeatFault && p.Announced {
		return r.endPartition(p)
	}
	if p.Announced {
		return nil
	}
	p.Announced = true
	if err := r.saveCluster(); err != nil {
		return err
	}
	if p.Fault == heartbeatFault {
		return r.clusterEvent(api.ClusterEventLevelError, "Automatic repair paused: the heartbeats of %s of the cluster's %d stopped within %s (%s), which share %s: a network fault (a partition), not %s. hale drains them and replaces, reboots or quarantines none of them, nor any other node, while it lasts; the pause ends by itself when they all answer again, or an operator ends it: hale repairs resume --cluster-name %s.",
			plural.Count(len(p.Nodes), "node", "nodes"), len(r.nodes), heartbeatBurstWindow, strings.Join(p.Nodes, ", "), r.shared(p.Nodes), plural.Count(len(p.Nodes), "dead machine", "dead machines"), r.cl.Name)
	}
	return r.clusterEvent(api.ClusterEventLevelError, "Automatic repair paused: %s came on %s of the cluster's %d within %s (%s). The same fault on many nodes at once is more likely a driver, firmware or software change than broken hardware, so hale drains those nodes and repairs none of them, nor any other node, until an operator resumes: hale repairs resume --cluster-name %s. Repairs an operator asks for (BatchRebootClusterNodes, BatchReplaceClusterNodes) still run.",
		p.Fault, plural.Count(len(p.Nodes), "node", "nodes"), len(r.nodes), health.Span(r.c.cfg.BurstWindow), strings.Join(p.Nodes, ", "), r.cl.Name)
}

// endPartition lifts a pause of silent nodes once every one of them answers again, with an Info
// event, and keeps the partition (State.LastPartition): what the cut made the nodes themselves report
// (their link down, sent when they are back) is judged part of it, not a fault of theirs.
func (r *round) endPartition(p *store.RepairPause) error {
	byLogical := map[string]*store.Node{}
	for _, n := range r.nodes {
		byLogical[n.LogicalID] = n
	}
	for _, l := range p.Nodes {
		n := byLogical[l]
		if n != nil && (n.Details.Unreachable || !r.agent(n.InstanceID).reachable) {
			return nil
		}
	}
	r.cl.State.RepairPause, r.cl.State.RepairsResumedAt = nil, r.now
	r.cl.State.LastPartition = &store.Partition{Nodes: p.Nodes, Since: p.Since, Ended: r.now}
	if err := r.saveCluster(); err != nil {
		return err
	}
	return r.clusterEvent(api.ClusterEventLevelInfo, "The heartbeats of %s are back after %s: the network fault ended without a repair, and automatic repairs run again.",
		strings.Join(p.Nodes, ", "), r.now.Sub(p.Since).Round(time.Second))
}

// partitionOf says which network fault cut node logical when it observed something at observed
// ("nodes A, B, C at 10:00:03Z" of the pause under way or the last that ended), "" for none. A
// node's report of the cut starts within the burst window before the pause (the first silence)
// and comes before its end.
func partitionOf(cl *store.Cluster, logical string, observed, now time.Time) string {
	var p store.Partition
	switch rp := cl.State.RepairPause; {
	case rp != nil && rp.Fault == heartbeatFault:
		p = store.Partition{Nodes: rp.Nodes, Since: rp.Since, Ended: now}
	case cl.State.LastPartition != nil:
		p = *cl.State.LastPartition
	default:
		return ""
	}
	if !slices.Contains(p.Nodes, logical) || observed.Before(p.Since.Add(-heartbeatBurstWindow)) || observed.After(p.Ended) {
		return ""
	}
	return fmt.Sprintf("nodes %s at %s", strings.Join(p.Nodes, ", "), p.Since.UTC().Format(time.RFC3339))
}

// networkFault reports whether a fault is one a network cut causes: the node's silence, or its
// own report of a link or network down.
func networkFault(fault string) bool {
	return fault == heartbeatFault || strings.HasPrefix(fault, "network.")
}

// shared says what the nodes (logical ids) have in common that a network fault would cut: their
// instance group, and the deepest network node of the topology above all of them.
func (r *round) shared(logical []string) string {
	var groups []string
	var common []string
	first := true
	for _, n := range r.nodes {
		if !slices.Contains(logical, n.LogicalID) {
			continue
		}
		if !slices.Contains(groups, n.GroupName) {
			groups = append(groups, n.GroupName)
		}
		if first {
			common, first = slices.Clone(n.Details.NetworkNodes), false
			continue
		}
		i := 0
		for i < len(common) && i < len(n.Details.NetworkNodes) && common[i] == n.Details.NetworkNodes[i] {
			i++
		}
		common = common[:i]
	}
	what := "instance group " + strings.Join(groups, ", ")
	if len(groups) > 1 {
		what = "instance groups " + strings.Join(groups, ", ")
	}
	if len(common) > 0 {
		what += " and network node " + common[len(common)-1]
	} else {
		what += " and no network node of the topology"
	}
	return what
}

// RepairsStatus is what `hale repairs status` and `hale repairs resume` show of a cluster's
// automatic repairs.
type RepairsStatus struct {
	ClusterName string
	// Paused is the pause under way (nil when none): the fault, its nodes, since when.
	Paused *store.RepairPause `json:",omitempty"`
	// Resumed: this call lifted a pause.
	Resumed bool `json:",omitempty"`
	// MaxInRepair is the cap (nodes in repair at once), InRepair how many are now, Waiting the
	// nodes (logical ids) drained and waiting for their turn.
	MaxInRepair int
	InRepair    int
	Waiting     []string `json:",omitempty"`
}

// ErrNotPaused is ResumeRepairs' answer for a cluster whose repairs are not paused.
var ErrNotPaused = errors.New("the cluster's automatic repairs are not paused")

// RepairsStatusOf reads the state of a cluster's automatic repairs (by name or ARN).
func (c *Controller) RepairsStatusOf(ctx context.Context, cluster string) (*RepairsStatus, error) {
	var out *RepairsStatus
	err := c.st.Read(ctx, func(tx store.Tx) error {
		cl, err := store.ClusterOrNotFound(tx, cluster)
		if err != nil {
			return err
		}
		out, err = c.repairsStatus(tx, cl)
		return err
	})
	return out, err
}

// ResumeRepairs lifts a cluster's repair pause (ErrNotPaused when there is none) with an Info
// event; its waiting repairs then start, within the cap.
func (c *Controller) ResumeRepairs(ctx context.Context, cluster string) (*RepairsStatus, error) {
	var out *RepairsStatus
	var id string
	err := c.st.Write(ctx, func(tx store.Tx) error {
		cl, err := store.ClusterOrNotFound(tx, cluster)
		if err != nil {
			return err
		}
		p := cl.State.RepairPause
		if p == nil {
			return ErrNotPaused
		}
		now := c.now()
		cl.State.RepairPause, cl.State.RepairsResumedAt, cl.UpdatedAt = nil, now, now
		if err := tx.UpdateCluster(cl); err != nil {
			return err
		}
		if out, err = c.repairsStatus(tx, cl); err != nil {
			return err
		}
		out.Paused, out.Resumed, id = p, true, cl.ID
		return clusterEventTx(tx, cl, now, api.ClusterEventLevelInfo, "Automatic repair resumed by an operator (paused %s for %s on %s): %s waiting start, at most %d nodes in repair at once.",
			now.Sub(p.Since).Round(time.Second), p.Fault, plural.Count(len(p.Nodes), "node", "nodes"), plural.Count(len(out.Waiting), "repair", "repairs"), out.MaxInRepair)
	})
	if err != nil {
		return nil, err
	}
	c.Enqueue(id)
	return out, nil
}

func (c *Controller) repairsStatus(tx store.Tx, cl *store.Cluster) (*RepairsStatus, error) {
	nodes, err := tx.NodesOf(cl.ID)
	if err != nil {
		return nil, err
	}
	open, err := tx.OpenRepairs(cl.ID)
	if err != nil {
		return nil, err
	}
	out := &RepairsStatus{ClusterName: cl.Name, Paused: cl.State.RepairPause, MaxInRepair: c.repairCap(len(nodes)), InRepair: inRepair(open)}
	for _, rp := range open {
		if rp.State == store.RepairWaiting {
			out.Waiting = append(out.Waiting, rp.LogicalID)
		}
	}
	return out, nil
}
