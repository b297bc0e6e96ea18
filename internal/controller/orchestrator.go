package controller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/lifecycle"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
)

// The controller's side of the orchestrator boundary (internal/orchestrator): which
// orchestrator a cluster has, the round as an orchestrator sees it (orchestrator.RoundHost),
// the services it may use outside rounds (orchestrator.Host), and the behaviour of a cluster
// that has no orchestrator (none).

// orchestratorOf is the orchestrator of the cluster, nil when none of Config.Orchestrators
// manages it.
func (c *Controller) orchestratorOf(cl *store.Cluster) orchestrator.Orchestrator {
	for _, o := range c.cfg.Orchestrators {
		if o.Manages(&cl.Spec) {
			return o
		}
	}
	return nil
}

// Drift asks the cluster's orchestrator how its configuration on the nodes differs from what
// hale last wrote (orchestrator.Orchestrator.Drift); nothing for a cluster without one.
func (c *Controller) Drift(ctx context.Context, clusterID string) ([]string, error) {
	o, err := c.orchestratorByID(ctx, clusterID)
	if o == nil || err != nil {
		return nil, err
	}
	return o.Drift(ctx, clusterID)
}

// AutoResume passes a node's AutoResume call to its cluster's orchestrator; a cluster without
// one has no job steps to resume. A "resumed" report is the controller's own (resumed.go): it
// is about the repairs, whatever the orchestrator.
func (c *Controller) AutoResume(ctx context.Context, clusterID string, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error) {
	if req.Kind == KindResumed {
		return c.jobResumed(ctx, clusterID, req)
	}
	o, err := c.orchestratorByID(ctx, clusterID)
	if err != nil {
		return nil, err
	}
	if o == nil {
		return nil, fmt.Errorf("auto-resume: cluster %s has no orchestrator", clusterID)
	}
	return o.AutoResume(ctx, clusterID, req)
}

func (c *Controller) orchestratorByID(ctx context.Context, clusterID string) (orchestrator.Orchestrator, error) {
	var o orchestrator.Orchestrator
	err := c.st.Read(ctx, func(tx store.Tx) error {
		cl, err := tx.ClusterByID(clusterID)
		if err != nil {
			return err
		}
		o = c.orchestratorOf(cl)
		return nil
	})
	return o, err
}

// The round is what an orchestrator sees of a reconcile.
var _ orchestrator.RoundHost = (*round)(nil)

func (r *round) Tx() store.Tx                         { return r.tx }
func (r *round) Cluster() *store.Cluster              { return r.cl }
func (r *round) Groups() []*store.Group               { return r.groups }
func (r *round) Nodes() []*store.Node                 { return r.nodes }
func (r *round) Now() time.Time                       { return r.now }
func (r *round) Fail(n *store.Node, msg string) error { return r.fail(n, msg) }

func (r *round) Event(n *store.Node, level api.ClusterEventLevel, format string, args ...any) error {
	if n == nil {
		return r.clusterEvent(level, format, args...)
	}
	return r.nodeEvent(n, level, format, args...)
}

// Go starts an orchestrator's job after the commit; its kind is prefixed with the
// orchestrator's name, so two orchestrators' kinds never meet.
func (r *round) Go(kind, id string, fn func(ctx context.Context)) {
	k := key(jobKind(r.orKind+":"+kind), id)
	r.work = append(r.work, r.c.background(k, r.cl.ID, fn))
}

// host is the controller as an orchestrator's host.
// host is the controller as orchestrator kind sees it (orchestrator.Host).
type host struct {
	c    *Controller
	kind orchestrator.Kind
}

var _ orchestrator.Host = host{}

func (h host) Store() store.Store                         { return h.c.st }
func (h host) Now() time.Time                             { return h.c.now() }
func (h host) Sleep(ctx context.Context, d time.Duration) { h.c.sleep(ctx, d) }
func (h host) Logger() *slog.Logger                       { return h.c.log }
func (h host) Enqueue(clusterID string)                   { h.c.Enqueue(clusterID) }
func (h host) Lifecycle() lifecycle.Source                { return h.c.cfg.Lifecycle }

func (h host) PodRoutes() provider.PodRoutes {
	pr, _ := h.c.cfg.Provider.(provider.PodRoutes)
	return pr
}
func (h host) Connected(instanceID string) bool { return h.c.cfg.Agents.Connected(instanceID) }
func (h host) Silent(instanceID string) bool    { return h.c.cfg.Agents.Silent(instanceID) }

func (h host) Do(ctx context.Context, instanceID string, cmd *agentproto.Command, timeout time.Duration) (*agentproto.CommandResult, error) {
	return h.c.do(ctx, instanceID, cmd, timeout)
}

func (h host) Run(ctx context.Context, instanceID string, argv []string, timeout time.Duration) (string, error) {
	return h.c.runOn(ctx, instanceID, argv, timeout)
}

func (h host) NodeTx(ctx context.Context, clusterID, logicalID string, fn func(tx store.Tx, cl *store.Cluster, n *store.Node) error) {
	h.c.nodeTx(ctx, clusterID, logicalID, fn)
}

func (h host) Event(tx store.Tx, cl *store.Cluster, n *store.Node, level api.ClusterEventLevel, format string, args ...any) error {
	if n == nil {
		return clusterEventTx(tx, cl, h.c.now(), level, format, args...)
	}
	return instanceEvent(tx, cl, n, h.c.now(), level, format, args...)
}

func (h host) Admit(tx store.Tx, cl *store.Cluster, n *store.Node, why string) error {
	if err := setReady(tx, n, h.c.now()); err != nil {
		return err
	}
	return instanceEvent(tx, cl, n, h.c.now(), api.ClusterEventLevelInfo, "Instance %s is Running: %s.", n.InstanceID, why)
}

// JobResumed implements orchestrator.Host (resumed.go).
func (h host) Finding(tx store.Tx, cl *store.Cluster, n *store.Node, fault, evidence string) error {
	f := health.Default().FaultFinding(fault, evidence)
	if err := h.c.judge(tx, cl, n, n.InstanceID, f, "scheduler", "health", h.c.now()); err != nil {
		return err
	}
	if fault == clockSkewFault {
		// As for the heartbeats' finding (health.go); its event waits for this transaction.
		h.c.resyncClock(cl.ID, n.InstanceID)
	}
	return nil
}

func (h host) JobResumed(ctx context.Context, clusterID, job string) error {
	_, err := h.c.jobResumed(ctx, clusterID, &agentproto.AutoResumeRequest{Kind: KindResumed, JobId: job})
	return err
}

func (h host) RequestRepair(tx store.Tx, cl *store.Cluster, n *store.Node, action store.RepairAction, why string) error {
	_, err := requestRepair(tx, cl, n, action, store.RepairSource(h.kind), why, h.c.now())
	return err
}

// none is the part of a cluster without an orchestrator: no membership to keep, nothing to
// wait for, nothing to drain.
type none struct{}

var _ orchestrator.Round = none{}

func (none) Prepare() error                                                        { return nil }
func (none) MayStart(*store.Node) bool                                             { return true }
func (none) BringUp(*store.Node) orchestrator.BringUp                              { return orchestrator.BringUp{} }
func (none) Join(*store.Node) (bool, error)                                        { return true, nil }
func (none) Lost(*store.Node) (string, string)                                     { return "", "" }
func (none) Steps() error                                                          { return nil }
func (none) Head(*store.Group) bool                                                { return false }
func (none) TakeOutWaits(*store.Node) bool                                         { return false }
func (none) KeepsState(*store.Node) string                                         { return "" }
func (none) Leave(*store.Node, orchestrator.Leaving, string) func(context.Context) { return nil }
func (none) Reserve(*store.Node) (func(context.Context) string, func(context.Context, bool)) {
	return nil, nil
}
func (none) Drain(*store.Repair, *store.Node) (bool, string, error) {
	return false, "no orchestrator: nothing to drain", nil
}
func (none) Released(*store.Repair, *store.Node) (bool, string) { return false, "" }
func (none) JobsLeft(*store.Repair, *store.Node) (bool, string) {
	return true, "no orchestrator: no jobs to wait for"
}
func (none) Resume(*store.Repair, *store.Node) (bool, string) {
	return false, "back in service, Running"
}
func (none) Undrain(*store.Repair, *store.Node) {}

// clusterEventTx appends a Cluster event outside a round.
func clusterEventTx(tx store.Tx, cl *store.Cluster, at time.Time, level api.ClusterEventLevel, format string, args ...any) error {
	return tx.AppendEvent(&store.Event{ID: uuid.NewString(), ClusterID: cl.ID, ClusterName: cl.Name, ClusterARN: cl.ARN,
		ResourceType: api.ClusterEventResourceTypeCluster, Level: level, Time: at, Description: fmt.Sprintf(format, args...)})
}
