package controller

import (
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
	// outage: the heartbeats of most nodes are missing at once (watchOutage).
	outage bool
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
	r.or, r.orName = none{}, "its orchestrator"
	if o := c.orchestratorOf(cl); o != nil {
		r.orName, r.orKind = o.Display(), o.Name() // before Begin, which may start jobs
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
		if r.cl.State.Extra["RollbackOf"] != "update" {
			return r.teardown(false)
		}
	}
	if r.cl.Status == api.ClusterStatusCreating && r.cl.State.CreateLogStream == "" {
		r.cl.State.CreateLogStream = r.cl.Name + "-" + r.now.Format("20060102T150405Z")
		if err := r.saveCluster(); err != nil {
			return err
		}
	}
	// The orchestrator prepares its membership first, and again once this round changed the
	// nodes, so bring-up sees it current; its own work starts once the nodes were driven. A
	// heartbeat outage is judged before anything acts on a silent node: the repairs' steps
	// hold for it as the reachability verdicts do.
	steps := []func() error{r.or.Prepare, r.watchOutage, r.doActions, r.repairs, r.softwareUpdate, r.converge, r.or.Prepare, r.drive, r.or.Steps, r.aggregate}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}
