// Package controller holds hale's reconcilers: level-triggered loops that drive each cluster's
// actual state towards the desired state the API recorded, through a provider (machines) and
// the agent server (what runs on them).
//
// Work is keyed by cluster id in one queue, so a cluster is never reconciled twice at once.
// A reconcile is one store transaction that reads the cluster, decides every transition, and
// persists it with its events; only after the commit does it start the slow work (launch,
// terminate, reboot, run the lifecycle scripts) in the background, and that work reports back
// through another transaction and a new reconcile. Because each transition is stored before it
// is acted on, and every action is idempotent (instance ids are chosen before launch, command
// ids are remembered by the agent), a restarted server resumes where it stopped and does
// nothing twice. Every cluster is reconciled at start and every ResyncInterval.
//
// The state machines are HyperPod's (research: the HyperPod API notes, §5.5): ClusterStatus
// Creating -> InService | RollingBack -> Failed (legacy all-or-nothing provisioning), InService
// -> Updating -> InService (RollingBack on a failed update), SystemUpdating, Deleting -> gone;
// InstanceGroupStatus adds Degraded; ClusterInstanceStatus Pending -> Running | Failure, and
// ShuttingDown -> gone. A node's finer bring-up phase (store.NodePhase) drives its status.
package controller

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/haleproject/hale/internal/alarms"

	"github.com/haleproject/hale/internal/failpoint"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/lifecycle"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
)

// Defaults for Config.
const (
	DefaultBootTimeout      = 60 * time.Second
	DefaultLifecycleTimeout = 30 * time.Minute
	DefaultResyncInterval   = 2 * time.Second
	// ContinuousRetryDelay is how long a failed node of a Continuous provisioning cluster waits
	// before a new instance is launched for it.
	ContinuousRetryDelay = 10 * time.Second
)

// Config configures the reconcilers.
type Config struct {
	Store store.Store
	// Provider launches machines; nil means none is configured, and clusters then wait in
	// Creating (a Deleting one is removed at once: none of its nodes has a machine).
	Provider  provider.Provider
	Agents    Agents
	Lifecycle lifecycle.Source
	// Orchestrators are the orchestrators clusters may have (internal/orchestrator); a
	// cluster's is the first that manages its specification, and a cluster that none manages
	// runs without one (its nodes are Running once set up).
	Orchestrators []orchestrator.Orchestrator
	Logger        *slog.Logger
	// BootTimeout is how long a launched instance's agent has to register; LifecycleTimeout
	// how long its lifecycle scripts may run; JoinTimeout how long a set-up node may wait for
	// its orchestrator to accept work on it (join.go). Any of them passing fails the node.
	BootTimeout time.Duration
	// RebootTimeout is how long a rebooted instance's agent has to come back; 0: its instance
	// type's (TypeRebootTimeout). Never less than twice the node's own last reboot
	// (bootbudget.go).
	RebootTimeout    time.Duration
	LifecycleTimeout time.Duration
	JoinTimeout      time.Duration
	ResyncInterval   time.Duration
	// DeepHealthCheckDuration is how long InstanceStress loads a node (HyperPod's take hours);
	// ConnectivityMBps the bandwidth (MB/s) InstanceConnectivity must reach (dhc.go).
	DeepHealthCheckDuration time.Duration
	ConnectivityMBps        float64
	// PatchWindow is how long an auto-patch waits for its nodes to be idle
	// (DefaultPatchWindow; patch.go).
	PatchWindow time.Duration
	// RepairMaxShare is the share of a cluster's nodes (0 to 1) that may be in repair at once,
	// one node at least: an automatic repair beyond it drains its node and waits. BurstNodes,
	// BurstShare and BurstWindow: the same fault on that many nodes, and that share of the
	// cluster, within that window pauses the cluster's automatic repairs (safety.go). Zero
	// means the default; a BurstNodes below zero turns the pause off.
	RepairMaxShare float64
	BurstNodes     int
	BurstShare     float64
	BurstWindow    time.Duration
	// BurstHold is how long an automatic repair for a health finding waits, its node
	// drained, before anything is done to the node: the findings of a burst arrive over a
	// moment, and the pause must see them all before the first node is replaced. Zero means
	// DefaultBurstHold; below zero, no hold.
	BurstHold time.Duration
	// Now is the clock the records are stamped with (phases, events, repairs); time.Now when
	// nil. Sleep is how background work waits before its next try (a poll, a retry), ending
	// early when ctx is done; a real sleep when nil. Tests run rounds on a clock they move.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration)
	// Observer, when set, is told how repairs go (the server's metrics).
	Observer Observer
	// AgentServer and AgentCA go into every LaunchSpec: where the instance's agent connects
	// and the CA certificate (PEM) it verifies the server with (docs/security.md).
	AgentServer string
	AgentCA     []byte
	// ImageRoot is the root file system of a node image (an instance group's ImageId;
	// "default" for groups with none), for LaunchSpec.ImageRoot; "" or a nil ImageRoot launches
	// on the provider's own root. An error fails the launch (the image was deleted or broke
	// since it was validated), except image.ErrNoDefault for "default": that node runs on the
	// provider's own root, with a Warn event saying so.
	ImageRoot func(id string) (string, error)
	// Revoke is told each instance the reconcilers terminate (replaced, removed, or owned by
	// no node) before it goes: its agent's client certificates are revoked (agentca.CA.Revoke).
	// Nil: nothing to revoke.
	Revoke func(instanceID, reason string)
	// Alarms, when set, is read while a software update whose AutoRollbackConfiguration names
	// alarms runs, every AlarmInterval (DefaultAlarmInterval when zero): an alarm in ALARM rolls
	// the update back (software.go). Nil: such alarms are not watched, and the update's start
	// event says so.
	Alarms        alarms.Source
	AlarmInterval time.Duration
}

// terminate revokes an instance's agent certificates and ends the instance through the
// provider. The revocation comes first: the instance is meant to be gone either way, and a
// termination that fails and is retried must not leave its agent a way back in.
func (c *Controller) terminate(ctx context.Context, id, reason string) error {
	if c.cfg.Revoke != nil {
		c.cfg.Revoke(id, reason)
	}
	return c.cfg.Provider.Terminate(ctx, id)
}

// sleep waits d on the controller's clock (Config.Sleep) before a background job's next try.
func (c *Controller) sleep(ctx context.Context, d time.Duration) { c.cfg.Sleep(ctx, d) }

// now is the time to stamp records with, to the millisecond (what the store keeps).
func (c *Controller) now() time.Time {
	return c.cfg.Now().UTC().Truncate(time.Millisecond)
}

// Agents is what the reconcilers need of the agent server (agentserver.Server), declared here
// so a test can run them against agents it scripts.
type Agents interface {
	// Connected: the node's agent has a session; Reachable: it has spoken within the silence
	// threshold; Silent: it has not, or has no session once agents had time to reconnect.
	Connected(instanceID string) bool
	Reachable(instanceID string) bool
	Silent(instanceID string) bool
	SilenceThreshold() time.Duration
	// Send sends a command to the node's agent; its result arrives on the channel, which is
	// closed without one when the session the command went out on ends first
	// (agentserver.ErrNotConnected when the agent has no session).
	Send(instanceID string, cmd *agentproto.Command) (<-chan *agentproto.CommandResult, error)
	// Disconnect ends the node's session (its instance is going away).
	Disconnect(instanceID string)
	// Goodbye is the reason the node's agent gave when it last stopped cleanly, "" when it did
	// not say goodbye (or has connected since).
	Goodbye(instanceID string) string
}

// Controller runs the reconcilers.
type Controller struct {
	cfg   Config
	st    store.Store
	log   *slog.Logger
	queue *queue
	// RetryDelay is how long a cluster whose reconcile failed waits before the next try.
	RetryDelay time.Duration

	mu       sync.Mutex
	inflight map[jobKey]bool         // background work running now, by kind and subject (jobs.go)
	firing   map[string]alarmReading // the last reading of each update's alarms (software.go)
	resynced map[string]time.Time    // when each instance's clock was last resynced (clock.go)
	cordoned map[string]time.Time    // when each node was cordoned for the patch under way (patch.go)
	// predrains are the outcomes of nodes' pre-drains for the update under way ("" drained,
	// else why not), taken by the next round (software.go).
	predrains map[string]string
	wg        sync.WaitGroup
	ctx       context.Context
}

// New returns a Controller; call Run to start it.
func New(cfg Config) *Controller {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = func(ctx context.Context, d time.Duration) {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
	}
	if cfg.BootTimeout <= 0 {
		cfg.BootTimeout = DefaultBootTimeout
	}
	if cfg.LifecycleTimeout <= 0 {
		cfg.LifecycleTimeout = DefaultLifecycleTimeout
	}
	if cfg.JoinTimeout <= 0 {
		cfg.JoinTimeout = DefaultJoinTimeout
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = DefaultResyncInterval
	}
	if cfg.DeepHealthCheckDuration <= 0 {
		cfg.DeepHealthCheckDuration = DefaultDeepHealthCheckDuration
	}
	if cfg.ConnectivityMBps <= 0 {
		cfg.ConnectivityMBps = DefaultConnectivityMBps
	}
	if cfg.RepairMaxShare <= 0 || cfg.RepairMaxShare > 1 {
		cfg.RepairMaxShare = DefaultRepairMaxShare
	}
	switch {
	case cfg.BurstNodes == 0:
		cfg.BurstNodes = DefaultBurstNodes
	case cfg.BurstNodes < 0:
		cfg.BurstNodes = math.MaxInt // never
	}
	if cfg.BurstShare <= 0 {
		cfg.BurstShare = DefaultBurstShare
	}
	if cfg.BurstWindow <= 0 {
		cfg.BurstWindow = DefaultBurstWindow
	}
	if cfg.PatchWindow <= 0 {
		cfg.PatchWindow = DefaultPatchWindow
	}
	if cfg.AlarmInterval <= 0 {
		cfg.AlarmInterval = DefaultAlarmInterval
	}
	if cfg.BurstHold == 0 {
		cfg.BurstHold = DefaultBurstHold
	}
	c := &Controller{cfg: cfg, st: cfg.Store, log: cfg.Logger, queue: newQueue(), RetryDelay: 2 * time.Second,
		inflight: map[jobKey]bool{}, firing: map[string]alarmReading{}, resynced: map[string]time.Time{}, cordoned: map[string]time.Time{}, predrains: map[string]string{}, ctx: context.Background()}
	for _, o := range cfg.Orchestrators {
		o.Bind(host{c: c, kind: o.Name()})
	}
	return c
}

// Enqueue asks for the cluster to be reconciled. It never blocks.
func (c *Controller) Enqueue(clusterID string) { c.queue.Add(clusterID) }

// Run adopts or reaps what a previous server left on the provider, then reconciles every
// cluster and whatever is enqueued until ctx ends; it waits for its background work to stop.
func (c *Controller) Run(ctx context.Context) error {
	c.ctx = ctx
	go func() {
		<-ctx.Done()
		c.queue.Close()
	}()
	if c.cfg.Provider != nil {
		if err := c.adopt(ctx); err != nil {
			c.log.Error("adopting instances", "error", err)
		}
	}
	if err := c.resync(ctx); err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(c.cfg.ResyncInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.resync(ctx)
			}
		}
	}()
	for {
		id, ok := c.queue.Get()
		if !ok {
			c.wg.Wait()
			return nil
		}
		if err := c.reconcile(ctx, id); err != nil && ctx.Err() == nil {
			c.log.Error("reconcile failed; will retry", "cluster_id", id, "error", err)
			time.AfterFunc(c.RetryDelay, func() { c.queue.Add(id) })
		}
		c.queue.Done(id)
	}
}

// Reconcile reconciles the cluster once, now, and waits until the background work it started has
// ended: a step of a test or a tool (Run reconciles by itself).
func (c *Controller) Reconcile(ctx context.Context, clusterID string) error {
	err := c.reconcile(ctx, clusterID)
	c.wg.Wait()
	return err
}

// Step reconciles the cluster once, now, as Run does with each cluster it takes off its queue:
// it returns once the round's decisions are committed and its background work has started,
// which goes on (Busy says whether any does; Wait waits for it). A harness that reconciles
// again while work runs, as a server does, steps rather than Reconciles.
func (c *Controller) Step(ctx context.Context, clusterID string) error {
	return c.reconcile(ctx, clusterID)
}

// Busy reports whether background work runs. Work is no longer busy once it has done what it
// does: only its return remains, which Wait waits for.
func (c *Controller) Busy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inflight) > 0
}

// Wait waits until the controller's background work has ended.
func (c *Controller) Wait() { c.wg.Wait() }

// Adopt matches the provider's instances with the store's nodes and terminates those no node
// knows, as Run does first; a harness that drives rounds itself calls it in place of Run.
func (c *Controller) Adopt(ctx context.Context) error { return c.adopt(ctx) }

// resync enqueues every cluster.
func (c *Controller) resync(ctx context.Context) error {
	var ids []string
	err := c.st.Read(ctx, func(tx store.Tx) error {
		q := store.ClusterQuery{Limit: 1000}
		for {
			page, err := tx.ListClusters(q)
			if err != nil {
				return err
			}
			for _, cl := range page {
				ids = append(ids, cl.ID)
			}
			if len(page) < q.Limit {
				return nil
			}
			last := page[len(page)-1]
			q.After = &store.ClusterCursor{CreatedAt: last.CreatedAt, Seq: last.Seq}
		}
	})
	for _, id := range ids {
		c.queue.Add(id)
	}
	return err
}

// adopt matches the provider's instances with the store's nodes: an instance a node knows is
// kept (its agent reconnects by itself), one no node knows was left by a crash between launch
// and record, or by a deletion the crash interrupted, and is terminated.
func (c *Controller) adopt(ctx context.Context) error {
	insts, err := c.cfg.Provider.List(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	err = c.st.Read(ctx, func(tx store.Tx) error {
		for _, in := range insts {
			n, err := tx.NodeByAnyInstanceID(in.ID)
			if err == nil && n.ClusterID == in.ClusterID {
				known[in.ID] = true
				continue
			}
			if !errors.Is(err, store.ErrNotFound) && err != nil {
				return err
			}
			// A replacement retires its old instance first: that one is known too.
			nodes, err := tx.NodesOf(in.ClusterID)
			if err != nil {
				return err
			}
			for _, n := range nodes {
				if n.Details.OldInstanceID == in.ID {
					known[in.ID] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, in := range insts {
		if known[in.ID] {
			c.log.Info("adopted instance", "instance_id", in.ID, "state", in.State)
			continue
		}
		c.log.Warn("reaping an instance no node owns", "instance_id", in.ID, "cluster_id", in.ClusterID)
		if err := c.terminate(ctx, in.ID, "instance owned by no node"); err != nil {
			c.log.Error("reap", "instance_id", in.ID, "error", err)
		}
	}
	return nil
}

// Observer is told, after each round's commit, of each repair's drain and end, with the time
// since its finding (or request); and, after the commit that records it, of each job the
// repair's fault interrupted running again (JobResumed; auto-resume's report, see resumed.go).
type Observer interface {
	RepairDrained(action string, sinceFault time.Duration)
	RepairEnded(action, outcome string, sinceFault time.Duration)
	JobResumed(action string, sinceFault time.Duration)
}

// reconcile moves one cluster a step towards its desired state.
func (c *Controller) reconcile(ctx context.Context, id string) error {
	if c.cfg.Provider == nil {
		return c.reconcileWithoutProvider(ctx, id)
	}
	var work []func()
	err := c.st.Write(ctx, func(tx store.Tx) error {
		work = nil
		cl, err := tx.ClusterByID(id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		r, err := c.newRound(tx, cl)
		if err != nil {
			return err
		}
		if err := r.run(); err != nil {
			return err
		}
		work = r.work
		return nil
	})
	if err != nil {
		return err
	}
	if len(work) > 0 {
		failpoint.Hit("committed")
	}
	for _, w := range work {
		w()
	}
	return nil
}

// reconcileWithoutProvider: no node has a machine, so removing the records is a Deleting
// cluster's whole deletion; anything else waits.
func (c *Controller) reconcileWithoutProvider(ctx context.Context, id string) error {
	return c.st.Write(ctx, func(tx store.Tx) error {
		cl, err := tx.ClusterByID(id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if cl.Status == api.ClusterStatusDeleting {
			if err := tx.DeleteCluster(cl.ID); err != nil {
				return err
			}
			c.log.Info("cluster deleted", "cluster", cl.Name, "cluster_arn", cl.ARN)
		}
		return nil
	})
}

// background runs fn once per key at a time, outside the reconcile, and enqueues the cluster
// when it ends.
func (c *Controller) background(key jobKey, clusterID string, fn func(ctx context.Context)) func() {
	return func() {
		c.mu.Lock()
		if c.inflight[key] {
			c.mu.Unlock()
			return
		}
		c.inflight[key] = true
		c.mu.Unlock()
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer func() {
				c.mu.Lock()
				delete(c.inflight, key)
				c.mu.Unlock()
				c.Enqueue(clusterID)
			}()
			fn(c.ctx)
		}()
	}
}

func (c *Controller) busy(key jobKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight[key]
}
