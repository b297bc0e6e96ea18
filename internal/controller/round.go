package controller

import (
	"fmt"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// round is one reconcile of one cluster: a snapshot read in the write transaction, the
// decisions made on it (persisted through tx as they are made), and the background work to
// start once they are committed.
type round struct {
	c       *Controller
	tx      store.Tx
	cl      *store.Cluster
	groups  []*store.Group
	byGroup map[string]*store.Group
	nodes   []*store.Node
	actions []*store.Action
	now     time.Time
	work    []func()
	// facts are read once, before any step runs (facts.go).
	facts
	// rebooting are nodes this round started rebooting: their agent is still connected until
	// the reboot runs, and must not be taken for a newly registered one.
	rebooting map[int64]bool
	// or is the cluster's orchestrator's part of the round (none when it has no orchestrator),
	// orName its name in sentences, orKind its short name (its jobs' prefix).
	or             orchestrator.Round
	orName, orKind string
	// open are the cluster's open repairs, as repairs() drives them (the cap counts them).
	open []*store.Repair
}

func (c *Controller) newRound(tx store.Tx, cl *store.Cluster) (*round, error) {
	r := &round{c: c, tx: tx, cl: cl, now: c.now(), byGroup: map[string]*store.Group{}, rebooting: map[int64]bool{}}
	var err error
	if r.groups, err = tx.Groups(cl.ID); err != nil {
		return nil, err
	}
	for _, g := range r.groups {
		r.byGroup[g.Name] = g
	}
	if r.nodes, err = tx.NodesOf(cl.ID); err != nil {
		return nil, err
	}
	if r.actions, err = tx.OpenActions(cl.ID); err != nil {
		return nil, err
	}
	r.facts = c.readFacts(r.nodes)
	r.or, r.orName = none{}, "its orchestrator"
	if o := c.orchestratorOf(cl); o != nil {
		r.orName, r.orKind = o.Display(), string(o.Name()) // before Begin, which may start jobs
		if r.or, err = o.Begin(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *round) run() error {
	switch r.cl.Status {
	case api.ClusterStatusDeleting:
		return r.teardown(true)
	case api.ClusterStatusFailed:
		return r.teardown(false)
	case api.ClusterStatusRollingBack:
		if !r.cl.State.RollingBackUpdate {
			return r.teardown(false)
		}
	}
	if r.cl.Status == api.ClusterStatusCreating && r.cl.State.CreateLogStream == "" {
		r.cl.State.CreateLogStream = r.cl.Name + "-" + r.now.Format("20060102T150405Z")
		if err := r.saveCluster(); err != nil {
			return err
		}
	}
	for _, s := range r.steps() {
		if err := s.run(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// roundState is a part of a round's state that one step sets and later steps read, beyond the
// node and repair records every step may change; the facts (facts.go) are set before the first
// step and are not among them.
type roundState string

// The round's states.
const (
	// stMembership: the orchestrator's view of who is in the cluster (Round.Prepare).
	stMembership roundState = "membership"
	// stRebooting: r.rebooting, the nodes this round started rebooting.
	stRebooting roundState = "rebooting"
	// stOpenRepairs: r.open, the cluster's open repairs as the repair step drove them.
	stOpenRepairs roundState = "open repairs"
)

// roundStep is one step of a round, with what it reads and sets of the round's state: every state a
// step reads is set by an earlier step (TestRoundStepsReadWhatEarlierStepsSet), so no step acts
// on a value a later step has yet to compute.
type roundStep struct {
	name        string
	reads, sets []roundState
	run         func() error
}

// steps are a round's steps in order. The orchestrator prepares its membership first, and
// again once this round changed the nodes, so bring-up sees it current; its own work starts
// once the nodes were driven. A heartbeat outage was judged before any step (facts), so the
// repairs hold for it as the reachability verdicts do.
func (r *round) steps() []roundStep {
	return []roundStep{
		{name: "membership", sets: []roundState{stMembership}, run: r.or.Prepare},
		{name: "outage", run: r.recordOutage},
		{name: "node actions", reads: []roundState{stMembership}, sets: []roundState{stRebooting}, run: r.doActions},
		{name: "repairs", reads: []roundState{stMembership}, sets: []roundState{stOpenRepairs, stRebooting}, run: r.repairs},
		{name: "scheduled updates", run: r.scheduledUpdates},
		{name: "auto-patches", run: r.autoPatches},
		{name: "software update", reads: []roundState{stOpenRepairs}, sets: []roundState{stRebooting}, run: r.softwareUpdate},
		{name: "scale", run: r.converge},
		{name: "membership again", sets: []roundState{stMembership}, run: r.or.Prepare},
		{name: "bring-up", reads: []roundState{stMembership, stRebooting}, run: r.drive},
		{name: "orchestrator", reads: []roundState{stMembership}, run: r.or.Steps},
		{name: "status", run: r.aggregate},
	}
}
