package controller

import (
	"context"
	"fmt"
	"github.com/haleproject/hale/internal/failpoint"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/plural"
	"github.com/haleproject/hale/internal/provider"
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
	// slurmOK: the cluster's Slurm roles are known (nodes configure only then); sl is its Slurm
	// state when it is a Slurm cluster (see slurm.go).
	slurmOK bool
	sl      *store.SlurmState
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
	steps := []func() error{r.slurmPrepare, r.doActions, r.repairs, r.softwareUpdate, r.converge, r.slurmPrepare, r.drive, r.slurmSteps, r.aggregate}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// ---- events and persistence helpers ----

func (r *round) event(group, instanceID string, rt api.ClusterEventResourceType, level api.ClusterEventLevel, meta *api.EventMetadata, format string, args ...any) error {
	return r.tx.AppendEvent(&store.Event{
		ID: uuid.NewString(), ClusterID: r.cl.ID, ClusterName: r.cl.Name, ClusterARN: r.cl.ARN,
		GroupName: group, InstanceID: instanceID, ResourceType: rt, Level: level, Time: r.now,
		Description: fmt.Sprintf(format, args...), Metadata: meta,
	})
}

func (r *round) nodeEvent(n *store.Node, level api.ClusterEventLevel, format string, args ...any) error {
	return instanceEvent(r.tx, r.cl, n, r.now, level, format, args...)
}

// instanceEvent appends an Instance event about n, with its logical id and, for errors, its
// failure message in the metadata.
func instanceEvent(tx store.Tx, cl *store.Cluster, n *store.Node, at time.Time, level api.ClusterEventLevel, format string, args ...any) error {
	meta := &api.EventMetadata{Instance: &api.InstanceMetadata{NodeLogicalId: new(n.LogicalID)}}
	if level == api.ClusterEventLevelError && n.StatusMessage != "" {
		meta.Instance.FailureMessage = new(n.StatusMessage)
	}
	return tx.AppendEvent(&store.Event{ID: uuid.NewString(), ClusterID: cl.ID, ClusterName: cl.Name, ClusterARN: cl.ARN,
		GroupName: n.GroupName, InstanceID: n.InstanceID, ResourceType: api.ClusterEventResourceTypeInstance, Level: level,
		Time: at, Description: fmt.Sprintf(format, args...), Metadata: meta})
}

func (r *round) clusterEvent(level api.ClusterEventLevel, format string, args ...any) error {
	var meta *api.EventMetadata
	if r.cl.FailureMessage != "" && level == api.ClusterEventLevelError {
		meta = &api.EventMetadata{Cluster: &api.ClusterMetadata{FailureMessage: new(r.cl.FailureMessage)}}
	}
	return r.event("", "", api.ClusterEventResourceTypeCluster, level, meta, format, args...)
}

func (r *round) saveCluster() error {
	failpoint.Hit("cluster:" + string(r.cl.Status))
	r.cl.UpdatedAt = r.now
	return r.tx.UpdateCluster(r.cl)
}

// setPhase moves a node to a phase, with the status the API shows for it.
func (r *round) setPhase(n *store.Node, p store.NodePhase, msg string) error {
	enterPhase(n, p, r.now)
	n.StatusMessage = msg
	n.Status = statusOf(n)
	return r.tx.UpdateNode(n)
}

// enterPhase moves a node to a phase; every phase change passes here, so the robustness
// suite's failpoint "node:<phase>" is hit before the change is committed, whoever makes it.
func enterPhase(n *store.Node, p store.NodePhase, now time.Time) {
	failpoint.Hit("node:" + string(p))
	n.Details.Phase, n.Details.PhaseSince = p, now
}

// statusOf is the ClusterInstanceStatus of a node's phase.
func statusOf(n *store.Node) api.ClusterInstanceStatus {
	switch n.Details.Phase {
	case store.PhaseReady:
		switch {
		case n.Details.Unreachable:
			return api.ClusterInstanceStatusFailure
		case n.Details.DeepHealthCheck != "":
			return api.ClusterInstanceStatusDeepHealthCheckInProgress
		}
		return api.ClusterInstanceStatusRunning
	case store.PhaseFailed:
		return api.ClusterInstanceStatusFailure
	case store.PhaseTerminating:
		return api.ClusterInstanceStatusShuttingDown
	}
	return api.ClusterInstanceStatusPending
}

// live are the group's nodes that count towards its target (not shutting down).
func (r *round) live(group string) []*store.Node {
	var out []*store.Node
	for _, n := range r.nodes {
		if n.GroupName == group && n.Details.Phase != store.PhaseTerminating {
			out = append(out, n)
		}
	}
	return out
}

func isBringUp(p store.NodePhase) bool {
	switch p {
	case "", store.PhasePending, store.PhaseLaunching, store.PhaseBooting, store.PhaseConfiguring, store.PhaseJoining:
		return true
	}
	return false
}

// ---- teardown: Deleting, Failed and a failed creation's rollback ----

// teardown terminates every node; when none is left it finishes: a deleted cluster disappears,
// a rolled-back creation becomes Failed.
func (r *round) teardown(deleteCluster bool) error {
	why := "cluster deletion"
	if !deleteCluster {
		why = "rollback of the failed creation"
	}
	for _, n := range r.nodes {
		if err := r.terminate(n, why); err != nil {
			return err
		}
	}
	if len(r.nodes) > 0 {
		return nil
	}
	if deleteCluster {
		r.work = append(r.work, func() { r.c.cfg.Provider.ReleaseCluster(r.c.ctx, r.cl.ID) })
		r.c.log.Info("cluster deleted", "cluster", r.cl.Name, "cluster_arn", r.cl.ARN)
		return r.tx.DeleteCluster(r.cl.ID)
	}
	if r.cl.Status == api.ClusterStatusRollingBack {
		r.cl.Status = api.ClusterStatusFailed
		for _, g := range r.groups {
			g.State.Status = api.InstanceGroupStatusFailed
			g.State.Scaling = false
			if err := r.tx.PutGroup(g); err != nil {
				return err
			}
		}
		if err := r.saveCluster(); err != nil {
			return err
		}
		r.work = append(r.work, func() { r.c.cfg.Provider.ReleaseCluster(r.c.ctx, r.cl.ID) })
		return r.clusterEvent(api.ClusterEventLevelError, "Cluster %s is Failed: the rollback terminated every instance of the attempt. %s", r.cl.Name, r.cl.FailureMessage)
	}
	return nil
}

// terminate moves a node to ShuttingDown (once) and starts its termination; when the instance
// is gone the node record is removed.
func (r *round) terminate(n *store.Node, why string) error {
	var takeOut func(context.Context)
	if n.Details.Phase != store.PhaseTerminating {
		takeOut = r.slurmTakeOut(n, "removed ("+why+")")
		if err := r.setPhase(n, store.PhaseTerminating, "Shutting down: "+why); err != nil {
			return err
		}
		name := n.InstanceID
		if name == "" {
			name = n.LogicalID
		}
		if err := r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s of group %s is shutting down (%s).", name, n.GroupName, why); err != nil {
			return err
		}
	}
	ids := []string{n.InstanceID}
	if n.Details.OldInstanceID != "" {
		ids = append(ids, n.Details.OldInstanceID)
	}
	node := *n
	r.work = append(r.work, r.c.background(key(jobTerminate, n.LogicalID), r.cl.ID, func(ctx context.Context) {
		if takeOut != nil {
			takeOut(ctx)
		}
		for _, id := range ids {
			if id == "" {
				continue
			}
			r.c.cfg.Agents.Disconnect(id)
			if err := r.c.cfg.Provider.Terminate(ctx, id); err != nil {
				r.c.log.Error("terminate", "instance_id", id, "error", err)
				return
			}
		}
		r.c.afterTerminate(ctx, &node)
	}))
	return nil
}

// ---- actions recorded by the API ----

func (r *round) doActions() error {
	bySeq := map[int64]*store.Node{}
	for _, n := range r.nodes {
		bySeq[n.Seq] = n
	}
	for _, a := range r.actions {
		n := bySeq[a.NodeSeq]
		finish := func(state store.ActionState, msg string) error {
			a.State, a.Message, a.UpdatedAt = state, msg, r.now
			return r.tx.UpdateAction(a)
		}
		if n == nil || n.InstanceID != a.InstanceID && a.State == store.ActionPending {
			if err := finish(store.ActionFailed, "the node is gone"); err != nil {
				return err
			}
			continue
		}
		switch a.Kind {
		case store.ActionDelete:
			if a.State == store.ActionPending && !r.slurmCtlReturning(n) {
				if err := finish(store.ActionInProgress, ""); err != nil {
					return err
				}
				// The API already lowered the group's target; this node is the one that goes.
				if err := r.terminate(n, "BatchDeleteClusterNodes"); err != nil {
					return err
				}
			}
		case store.ActionReplace, store.ActionReboot:
			if a.State == store.ActionPending {
				// The same repair flow as a health finding's: drain, reboot or replace, checks,
				// resume (repair.go); an explicit request does not wait for the node's jobs.
				rp, err := r.requestRepair(n, string(a.Kind), "api", "Batch"+string(a.Kind)+"ClusterNodes")
				if err != nil {
					return err
				}
				if err := finish(store.ActionSucceeded, "repair "+rp.ID); err != nil {
					return err
				}
			}
		case store.ActionDeepHealthCheck:
			if err := r.deepHealthCheck(a, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// requestRepair opens a repair an operator asked for (the API, or an Action: reason in Slurm),
// or returns the node's open repair (made a Replace when that is asked and it has not started).
func (r *round) requestRepair(n *store.Node, action, source, why string) (*store.Repair, error) {
	return requestRepair(r.tx, r.cl, n, action, source, why, r.now)
}

func requestRepair(tx store.Tx, cl *store.Cluster, n *store.Node, action, source, why string, now time.Time) (*store.Repair, error) {
	open, err := tx.OpenRepairs(cl.ID)
	if err != nil {
		return nil, err
	}
	for _, rp := range open {
		if rp.LogicalID != n.LogicalID {
			continue
		}
		if rp.State == store.RepairHeld || (action == string(health.Replace) && rp.Action != action && beforeRepairing(rp.State)) {
			rp.Action, rp.Source, rp.State = action, source, store.RepairDraining
			rp.Timeline = append(rp.Timeline, store.RepairStep{At: now, What: why + " asks for a " + strings.ToLower(action)})
			rp.UpdatedAt = now
			return rp, tx.PutRepair(rp)
		}
		return rp, nil
	}
	fault := "api.repair_request"
	if source == "slurm" {
		fault = "slurm.repair_request"
	}
	rp, err := newRepair(tx, cl, n, action, fault, source, why, "", false, now)
	if err != nil {
		return nil, err
	}
	return rp, instanceEvent(tx, cl, n, now, api.ClusterEventLevelInfo, "Repair %s of node %s (instance %s) started: %s (%s).", rp.ID, n.LogicalID, n.InstanceID, strings.ToLower(action), why)
}

// replace retires the node's instance for a new one with the same address, hostname and logical
// id (HyperPod's replacement): the node goes back to Pending under a new instance id.
func (r *round) replace(n *store.Node, why string) error {
	if takeOut := r.slurmTakeOut(n, "replacing instance "+n.InstanceID+" ("+why+")"); takeOut != nil {
		r.work = append(r.work, r.c.background(key(jobSlurmOut, n.InstanceID), r.cl.ID, takeOut))
	}
	old := n.InstanceID
	if n.Details.OldInstanceID == "" {
		n.Details.OldInstanceID = old
	}
	n.InstanceID = provider.NewInstanceID()
	n.Details.CommandID, n.Details.NodeSecretHash, n.Details.AgentTokenHash = "", "", ""
	n.Details.Inventory, n.Details.Unreachable = nil, false
	n.Details.SlurmConf = "" // the new instance has none of the files yet
	n.Details.RepairRequest = ""
	if err := r.setPhase(n, store.PhasePending, fmt.Sprintf("Replacing %s (%s)", old, why)); err != nil {
		return err
	}
	return r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s of group %s is being replaced by %s (%s); the node keeps its address %s and logical id %s.",
		old, n.GroupName, n.InstanceID, why, n.Details.PrivateIP, n.LogicalID)
}

// reboot ends every process of the node and starts its agent again. The node is Pending until
// its agent registers; the lifecycle command it already ran is answered from the node's stored
// result, so the scripts do not run again.
func (r *round) reboot(n *store.Node, why string) error {
	takeOut := r.slurmTakeOut(n, "rebooting ("+why+")")
	if n.Details.RepairRequest == "Reboot" {
		n.Details.RepairRequest = "" // this reboot answers it
	}
	if err := r.setPhase(n, store.PhaseBooting, "Rebooting ("+why+")"); err != nil {
		return err
	}
	id, cl := n.InstanceID, r.cl.ID
	r.rebooting[n.Seq] = true
	r.work = append(r.work, r.c.background(key(jobReboot, id), cl, func(ctx context.Context) {
		if takeOut != nil {
			takeOut(ctx)
		}
		r.c.cfg.Agents.Disconnect(id)
		if err := r.c.cfg.Provider.Reboot(ctx, id); err != nil {
			r.c.log.Error("reboot", "instance_id", id, "error", err)
		}
	}))
	return r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s is rebooting.", id)
}

// ---- scaling ----

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
				if r.slurmCtlReturning(n) {
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
	g.State.NextLogicalOrdinal++
	ord := g.State.NextLogicalOrdinal
	g.State.Scaling = true
	if err := r.tx.PutGroup(g); err != nil {
		return err
	}
	n := &store.Node{ClusterID: r.cl.ID, InstanceID: provider.NewInstanceID(), LogicalID: fmt.Sprintf("%s-%d", g.Name, ord),
		GroupName: g.Name, InstanceType: instanceType(&g.Spec), LaunchTime: r.now}
	n.Details.Ordinal = ord
	n.Details.ImageID = g.State.DesiredImageID
	n.Details.ImageReleaseVersion = g.State.DesiredImageReleaseVersion
	n.Details.SoftwareGeneration = g.State.SoftwareGeneration
	n.Details.ThreadsPerCore = g.Spec.GetThreadsPerCore()
	enterPhase(n, store.PhasePending, r.now)
	n.Status = api.ClusterInstanceStatusPending
	if err := r.tx.InsertNode(n); err != nil {
		return err
	}
	r.nodes = append(r.nodes, n)
	return r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s added to group %s as node %s (target %d); launching it.",
		n.InstanceID, g.Name, n.LogicalID, g.Spec.GetInstanceCount())
}

func instanceType(g *api.ClusterInstanceGroupSpecification) string {
	if g.InstanceType != nil {
		return string(*g.InstanceType)
	}
	if g.InstanceRequirements != nil && len(g.InstanceRequirements.InstanceTypes) > 0 {
		return string(g.InstanceRequirements.InstanceTypes[0])
	}
	return ""
}

// mounts are the storage a group's nodes get (InstanceStorageConfigs): FSx file systems become
// directories shared by the cluster at their mount paths, a secondary EBS volume a directory of
// the node's own at /opt/sagemaker (research hyperpod-api-slurm.md §2.6).
func mounts(g *api.ClusterInstanceGroupSpecification) []provider.Mount {
	var out []provider.Mount
	for _, s := range g.InstanceStorageConfigs {
		switch {
		case s.FsxLustreConfig != nil:
			out = append(out, provider.Mount{Shared: true, Name: "fsx-lustre-" + s.FsxLustreConfig.GetDnsName(), Path: orDefault(s.FsxLustreConfig.GetMountPath(), "/fsx")})
		case s.FsxOpenZfsConfig != nil:
			out = append(out, provider.Mount{Shared: true, Name: "fsx-openzfs-" + s.FsxOpenZfsConfig.GetDnsName(), Path: orDefault(s.FsxOpenZfsConfig.GetMountPath(), "/home")})
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

// ---- node bring-up ----

// drive moves each node along its phases.
func (r *round) drive() error {
	if err := r.watchOutage(); err != nil {
		return err
	}
	anyUnaddressed := false
	for _, n := range r.nodes {
		if n.Details.Phase == store.PhasePending || n.Details.Phase == store.PhaseLaunching {
			anyUnaddressed = true
		}
	}
	for _, n := range r.nodes {
		switch n.Details.Phase {
		case store.PhasePending, store.PhaseLaunching:
			if err := r.launch(n); err != nil {
				return err
			}
		case store.PhaseBooting:
			switch {
			case r.c.cfg.Agents.Connected(n.InstanceID) && !anyUnaddressed && !r.rebooting[n.Seq] && !r.c.busy(key(jobReboot, n.InstanceID)) && r.slurmGate(n):
				// Every node of the cluster has its address now, so resource_config.json can
				// list them all, as HyperPod's does.
				if err := r.configure(n); err != nil {
					return err
				}
			case r.now.Sub(n.Details.PhaseSince) > r.c.cfg.BootTimeout:
				msg := fmt.Sprintf("The agent of instance %s (host %s, group %s) did not register within %s of its start.",
					n.InstanceID, n.Details.PrivateDNSHostname, n.GroupName, r.c.cfg.BootTimeout)
				if con, ok := r.c.cfg.Provider.(provider.Console); ok {
					if out := con.ConsoleOutput(n.InstanceID, 3); out != "" {
						msg += " Its last output: " + strings.ReplaceAll(out, "\n", " | ")
					}
				}
				if err := r.fail(n, msg); err != nil {
					return err
				}
			}
		case store.PhaseConfiguring:
			if r.now.Sub(n.Details.PhaseSince) > r.c.cfg.LifecycleTimeout+30*time.Second {
				if err := r.fail(n, fmt.Sprintf("Lifecycle scripts on host %s (instance %s, group %s) did not finish within %s.",
					n.Details.PrivateDNSHostname, n.InstanceID, n.GroupName, r.c.cfg.LifecycleTimeout)); err != nil {
					return err
				}
				continue
			}
			r.sendLifecycle(n)
		case store.PhaseJoining:
			if err := r.join(n); err != nil {
				return err
			}
		case store.PhaseReady:
			if err := r.watchReachability(n); err != nil {
				return err
			}
		case store.PhaseTerminating:
			// A termination that failed (or a server that stopped) is tried again.
			if err := r.terminate(n, ""); err != nil {
				return err
			}
		case store.PhaseFailed:
			if r.cl.Spec.GetNodeProvisioningMode() == api.ClusterNodeProvisioningModeContinuous && r.cl.Status != api.ClusterStatusRollingBack &&
				r.now.Sub(n.Details.PhaseSince) > ContinuousRetryDelay {
				// Continuous provisioning retries failed instances on its own.
				if err := r.replace(n, "retry of a failed launch (Continuous provisioning)"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// launch persists Launching with a fresh bootstrap token and starts the provider's launch.
func (r *round) launch(n *store.Node) error {
	k := key(jobLaunch, n.LogicalID)
	if r.c.busy(k) {
		return nil
	}
	token, tokenHash := agentserver.NewToken()
	n.Details.AgentTokenHash = tokenHash
	if err := r.setPhase(n, store.PhaseLaunching, n.StatusMessage); err != nil {
		return err
	}
	g := r.byGroup[n.GroupName]
	if g == nil {
		return r.fail(n, "its instance group is gone")
	}
	spec := provider.LaunchSpec{InstanceID: n.InstanceID, ClusterID: r.cl.ID, ClusterName: r.cl.Name, GroupName: n.GroupName,
		LogicalID: n.LogicalID, InstanceType: n.InstanceType, IP: n.Details.PrivateIP, Mounts: mounts(&g.Spec), AgentToken: token,
		DNSDomain: dnsDomain(r.cl.ARN)}
	old := n.Details.OldInstanceID
	r.work = append(r.work, r.c.background(k, r.cl.ID, func(ctx context.Context) {
		if old != "" {
			r.c.cfg.Agents.Disconnect(old)
			if err := r.c.cfg.Provider.Terminate(ctx, old); err != nil {
				r.c.launched(ctx, spec, nil, fmt.Errorf("terminating the instance it replaces, %s: %w", old, err))
				return
			}
		}
		inst, err := r.c.cfg.Provider.Launch(ctx, spec)
		r.c.launched(ctx, spec, inst, err)
	}))
	return nil
}

// configure moves a node whose agent registered to Configuring, with the id of the lifecycle
// command it is to run.
func (r *round) configure(n *store.Node) error {
	id := "lifecycle-" + n.InstanceID
	again := n.Details.CommandID == id // a reboot: the instance ran its scripts before
	n.Details.CommandID = id
	g := r.byGroup[n.GroupName]
	script := "no lifecycle scripts"
	if g != nil && g.Spec.LifeCycleConfig != nil {
		script = "lifecycle script " + entryPoint(g.Spec.LifeCycleConfig)
	}
	msg, event := "Running "+script, "Instance %s registered its agent; running %s."
	if again {
		msg, event = "Agent back; its "+script+" ran before", "Instance %s is back: its agent registered again (its %s ran before and does not run again)."
	}
	if err := r.setPhase(n, store.PhaseConfiguring, msg); err != nil {
		return err
	}
	if err := r.nodeEvent(n, api.ClusterEventLevelInfo, event, n.InstanceID, script); err != nil {
		return err
	}
	r.sendLifecycle(n)
	return nil
}

// fail moves a node to Failure with a message a person can act on.
func (r *round) fail(n *store.Node, msg string) error {
	if err := r.setPhase(n, store.PhaseFailed, msg); err != nil {
		return err
	}
	return r.nodeEvent(n, api.ClusterEventLevelError, "Instance %s failed: %s", n.InstanceID, msg)
}

// outageKey marks, in the cluster's State.Extra, a heartbeat outage under way (its start).
const outageKey = "heartbeat-outage"

// watchOutage tells a control-plane or network fault from dead nodes: when the heartbeats of
// more than half of the cluster's serving nodes (two at least) are missing at once, the cause
// is between them and the server (a server restart, a network partition), not many machines
// dying in the same moment. No node is judged unreachable while it lasts (r.outage); one Error
// event says so, and an Info event when the heartbeats are back.
func (r *round) watchOutage() error {
	serving, silent := 0, 0
	for _, n := range r.nodes {
		if n.Details.Phase != store.PhaseReady {
			continue
		}
		serving++
		if r.c.cfg.Agents.Silent(n.InstanceID) {
			silent++
		}
	}
	r.outage = silent >= 2 && 2*silent > serving
	since, was := r.cl.State.Extra[outageKey]
	switch {
	case r.outage && !was:
		if r.cl.State.Extra == nil {
			r.cl.State.Extra = map[string]string{}
		}
		r.cl.State.Extra[outageKey] = r.now.Format(time.RFC3339Nano)
		if err := r.saveCluster(); err != nil {
			return err
		}
		return r.clusterEvent(api.ClusterEventLevelError, "The heartbeats of %d of the cluster's %d serving nodes stopped at once: a control-plane or network fault, not %d dead nodes. hale repairs none of them while it lasts.", silent, serving, silent)
	case !r.outage && was:
		delete(r.cl.State.Extra, outageKey)
		if err := r.saveCluster(); err != nil {
			return err
		}
		start, _ := time.Parse(time.RFC3339Nano, since)
		return r.clusterEvent(api.ClusterEventLevelInfo, "The nodes' heartbeats are back after %s (%d of %d nodes still silent): hale judges each node again.", r.now.Sub(start).Round(time.Second), silent, serving)
	}
	return nil
}

// watchReachability marks a Running node Failure when its agent goes silent, and Running again
// when it speaks. During a heartbeat outage (watchOutage) a silent node is left as it is.
func (r *round) watchReachability(n *store.Node) error {
	agents := r.c.cfg.Agents
	switch {
	case !n.Details.Unreachable && agents.Silent(n.InstanceID) && r.outage:
		return nil
	case !n.Details.Unreachable && agents.Silent(n.InstanceID):
		n.Details.Unreachable = true
		why := fmt.Sprintf("no heartbeat from its agent for more than %s", agents.SilenceThreshold())
		if g := agents.Goodbye(n.InstanceID); g != "" {
			why = "its agent stopped cleanly (" + g + ") and has not come back"
		} else if !agents.Connected(n.InstanceID) {
			why = "its agent's connection is gone and has not come back"
		}
		if err := r.setPhase(n, store.PhaseReady, "Node unreachable: "+why+"."); err != nil {
			return err
		}
		if err := r.nodeEvent(n, api.ClusterEventLevelWarn, "Instance %s (%s) is unreachable: %s.", n.InstanceID, n.Details.PrivateDNSHostname, why); err != nil {
			return err
		}
		// A dead node is a health finding of the control plane's own: repaired at once.
		f := health.Default().FaultFinding("node.heartbeat_lost", "instance "+n.InstanceID+": "+why)
		return r.c.judge(r.tx, r.cl, n, n.InstanceID, f, "server", "heartbeat", r.now)
	case n.Details.Unreachable && agents.Reachable(n.InstanceID):
		n.Details.Unreachable = false
		if st := n.Details.SlurmState; joins(r.sl, n.GroupName) && (strings.HasPrefix(st, "DOWN") || strings.Contains(st, "NOT_RESPONDING")) {
			// Slurm lost it too: Running once its slurmd is back (join.go).
			if err := r.setPhase(n, store.PhaseJoining, waitingForSlurm+" (slurmctld has it "+strings.ToLower(st)+")"); err != nil {
				return err
			}
			return r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s is reachable again; waiting for Slurm to accept it (it has it %s).", n.InstanceID, strings.ToLower(st))
		}
		if err := r.setPhase(n, store.PhaseReady, ""); err != nil {
			return err
		}
		return r.nodeEvent(n, api.ClusterEventLevelInfo, "Instance %s is reachable again.", n.InstanceID)
	}
	return nil
}

// ---- software updates: a rolling re-image ----

// softwareUpdate re-images the nodes of groups with an update under way, in batches: each node
// is replaced by a new instance on the desired image (its root volume is new, as HyperPod's is)
// and runs the lifecycle scripts again.
func (r *round) softwareUpdate() error {
	for _, g := range r.groups {
		st := &g.State
		if st.SoftwareUpdateStatus != api.SoftwareUpdateStatusPending && st.SoftwareUpdateStatus != api.SoftwareUpdateStatusInProgress {
			continue
		}
		if st.SoftwareUpdateStatus == api.SoftwareUpdateStatusPending {
			failpoint.Hit("software:InProgress")
			st.SoftwareUpdateStatus = api.SoftwareUpdateStatusInProgress
			if err := r.tx.PutGroup(g); err != nil {
				return err
			}
			if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil,
				"Software update of group %s started: nodes are replaced on image %s in batches of %d.", g.Name, st.DesiredImageID, batchSize(g)); err != nil {
				return err
			}
		}
		var outdated []*store.Node
		inFlight := 0
		for _, n := range r.live(g.Name) {
			if isBringUp(n.Details.Phase) {
				inFlight++
			} else if n.Details.SoftwareGeneration < st.SoftwareGeneration {
				outdated = append(outdated, n)
			}
		}
		for i := 0; i < len(outdated) && inFlight < batchSize(g); i++ {
			n := outdated[i]
			if r.slurmCtlReturning(n) {
				break
			}
			n.Details.ImageID, n.Details.ImageReleaseVersion = st.DesiredImageID, st.DesiredImageReleaseVersion
			n.Details.SoftwareGeneration = st.SoftwareGeneration
			t := r.now
			n.Details.LastSoftwareUpdateTime = &t
			if err := r.replace(n, "UpdateClusterSoftware"); err != nil {
				return err
			}
			inFlight++
		}
		if len(outdated) == 0 && inFlight == 0 {
			failpoint.Hit("software:Succeeded")
			st.SoftwareUpdateStatus = api.SoftwareUpdateStatusSucceeded
			st.CurrentImageID, st.CurrentImageReleaseVersion = st.DesiredImageID, st.DesiredImageReleaseVersion
			st.ActiveSoftwareUpdateConfig = nil
			st.Status = api.InstanceGroupStatusInService
			if err := r.tx.PutGroup(g); err != nil {
				return err
			}
			if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil,
				"Software update of group %s succeeded: every node runs image %s.", g.Name, st.DesiredImageID); err != nil {
				return err
			}
		}
	}
	return nil
}

// batchSize is the rolling policy's MaximumBatchSize (INSTANCE_COUNT, or CAPACITY_PERCENTAGE of
// the group's target); without a policy the whole group goes at once.
func batchSize(g *store.Group) int {
	target := max(1, int(g.Spec.GetInstanceCount()))
	cfg := g.State.ActiveSoftwareUpdateConfig
	if cfg == nil || cfg.RollingUpdatePolicy == nil || cfg.RollingUpdatePolicy.MaximumBatchSize == nil {
		return target
	}
	b := cfg.RollingUpdatePolicy.MaximumBatchSize
	if b.GetType() == api.NodeUnavailabilityTypeCapacityPercentage {
		return max(1, target*int(b.GetValue())/100)
	}
	return max(1, int(b.GetValue()))
}

// ---- statuses ----

// aggregate derives the groups' and the cluster's statuses from their nodes.
func (r *round) aggregate() error {
	converged, healthy := true, true
	var failed *store.Node
	for _, g := range r.groups {
		live := r.live(g.Name)
		ready, failures, bringUp := 0, 0, 0
		for _, n := range live {
			switch {
			case n.Details.Phase == store.PhaseReady && !n.Details.Unreachable:
				ready++
			case n.Details.Phase == store.PhaseFailed || n.Details.Unreachable:
				failures++
				if n.Details.Phase == store.PhaseFailed && failed == nil {
					failed = n
				}
			default:
				bringUp++
			}
		}
		target := int(g.Spec.GetInstanceCount())
		shuttingDown := len(r.nodesOf(g.Name)) - len(live)
		if g.State.Status == api.InstanceGroupStatusDeleting {
			if len(r.nodesOf(g.Name)) == 0 {
				if err := r.tx.DeleteGroup(r.cl.ID, g.Name); err != nil {
					return err
				}
				if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, api.ClusterEventLevelInfo, nil, "Instance group %s deleted.", g.Name); err != nil {
					return err
				}
			} else {
				converged = false
			}
			continue
		}
		groupDone := len(live) == target && bringUp == 0 && shuttingDown == 0
		if !groupDone {
			converged = false
		}
		if failures > 0 {
			healthy = false
		}
		next := g.State.Status
		switch {
		case g.State.SoftwareUpdateStatus == api.SoftwareUpdateStatusInProgress:
			next = api.InstanceGroupStatusSystemUpdating
		case groupDone && failures == 0:
			next = api.InstanceGroupStatusInService
		case failures > 0 && (g.State.Status == api.InstanceGroupStatusInService || g.State.Status == api.InstanceGroupStatusDegraded):
			next = api.InstanceGroupStatusDegraded
		}
		scaling := len(live) != target || bringUp > 0 || shuttingDown > 0
		if next != g.State.Status || scaling != g.State.Scaling {
			failpoint.Hit("group:" + string(next))
			prev := g.State.Status
			g.State.Status, g.State.Scaling = next, scaling
			if !scaling {
				g.State.Previous, g.State.AddedByUpdate = nil, false
			}
			if err := r.tx.PutGroup(g); err != nil {
				return err
			}
			if next != prev {
				level := api.ClusterEventLevelInfo
				if next == api.InstanceGroupStatusDegraded {
					level = api.ClusterEventLevelWarn
				}
				if err := r.event(g.Name, "", api.ClusterEventResourceTypeInstanceGroup, level, nil,
					"Instance group %s is %s: %d of %s Running.", g.Name, next, ready, plural.Count(target, "instance", "instances")); err != nil {
					return err
				}
			}
		}
	}
	return r.clusterStatus(converged, healthy, failed)
}

func (r *round) nodesOf(group string) []*store.Node {
	var out []*store.Node
	for _, n := range r.nodes {
		if n.GroupName == group {
			out = append(out, n)
		}
	}
	return out
}

func (r *round) running() int {
	n := 0
	for _, x := range r.nodes {
		if x.Status == api.ClusterInstanceStatusRunning {
			n++
		}
	}
	return n
}

// clusterStatus moves the cluster: converged means every group has its target number of nodes
// with none coming up or going; healthy that none of them failed.
func (r *round) clusterStatus(converged, healthy bool, failed *store.Node) error {
	legacy := r.cl.Spec.GetNodeProvisioningMode() != api.ClusterNodeProvisioningModeContinuous
	switch r.cl.Status {
	case api.ClusterStatusCreating:
		switch {
		case failed != nil && legacy:
			// All-or-nothing: one node that cannot be provisioned fails the creation.
			r.cl.FailureMessage = fmt.Sprintf("Instance %s failed to provision: %s", failed.InstanceID, failed.StatusMessage)
			r.cl.Status = api.ClusterStatusRollingBack
			r.cl.State.RollbackReason = r.cl.FailureMessage
			if err := r.saveCluster(); err != nil {
				return err
			}
			return r.clusterEvent(api.ClusterEventLevelError, "Cluster %s creation failed; rolling back every instance of the attempt. %s", r.cl.Name, r.cl.FailureMessage)
		case converged && healthy || (!legacy && r.headNodesReady()):
			r.cl.Status = api.ClusterStatusInService
			r.cl.FailureMessage = ""
			if err := r.saveCluster(); err != nil {
				return err
			}
			return r.clusterEvent(api.ClusterEventLevelInfo, "Cluster %s is InService: %s Running.", r.cl.Name, plural.Count(r.running(), "instance", "instances"))
		}
	case api.ClusterStatusUpdating, api.ClusterStatusSystemUpdating:
		switch {
		case failed != nil && legacy && r.cl.Status == api.ClusterStatusUpdating && r.updateFailed(failed):
			return r.rollbackUpdate(failed)
		case converged:
			r.cl.Status = api.ClusterStatusInService
			if err := r.saveCluster(); err != nil {
				return err
			}
			return r.clusterEvent(api.ClusterEventLevelInfo, "Cluster %s is InService: %s Running.", r.cl.Name, plural.Count(r.running(), "instance", "instances"))
		}
	case api.ClusterStatusRollingBack: // of an update: back in service once the old shape is restored
		if converged {
			r.cl.Status = api.ClusterStatusInService
			delete(r.cl.State.Extra, "RollbackOf")
			if err := r.saveCluster(); err != nil {
				return err
			}
			return r.clusterEvent(api.ClusterEventLevelWarn, "Cluster %s is InService again after rolling back the update. %s", r.cl.Name, r.cl.FailureMessage)
		}
	}
	return nil
}

// headNodesReady: a Continuous provisioning cluster is InService once its Controller (and
// Login, if any) groups are up; workers keep coming (research §5.2).
func (r *round) headNodesReady() bool {
	heads := 0
	for _, g := range r.groups {
		sc := g.Spec.SlurmConfig
		if sc == nil || sc.GetNodeType() == api.ClusterSlurmNodeTypeCompute {
			continue
		}
		heads++
		ready := 0
		for _, n := range r.live(g.Name) {
			if n.Details.Phase == store.PhaseReady {
				ready++
			}
		}
		if ready < int(g.Spec.GetInstanceCount()) {
			return false
		}
	}
	return heads > 0
}

// updateFailed reports whether a failed node belongs to what the update in progress brought:
// a group the update added, or a group whose target it raised.
func (r *round) updateFailed(n *store.Node) bool {
	g := r.byGroup[n.GroupName]
	return g != nil && (g.State.AddedByUpdate || g.State.Previous != nil)
}

// rollbackUpdate restores the groups the update changed; the usual convergence then removes
// what the update added (failed nodes first).
func (r *round) rollbackUpdate(failed *store.Node) error {
	r.cl.FailureMessage = fmt.Sprintf("The update was rolled back: instance %s failed to provision: %s", failed.InstanceID, failed.StatusMessage)
	r.cl.Status = api.ClusterStatusRollingBack
	if r.cl.State.Extra == nil {
		r.cl.State.Extra = map[string]string{}
	}
	r.cl.State.Extra["RollbackOf"] = "update"
	for _, g := range r.groups {
		switch {
		case g.State.AddedByUpdate:
			g.State.Status = api.InstanceGroupStatusDeleting
			g.Spec.InstanceCount = new(int32(0))
		case g.State.Previous != nil:
			g.Spec = *g.State.Previous
			g.State.Status = api.InstanceGroupStatusUpdating
		default:
			continue
		}
		g.State.Previous, g.State.AddedByUpdate = nil, false
		if err := r.tx.PutGroup(g); err != nil {
			return err
		}
	}
	if err := r.saveCluster(); err != nil {
		return err
	}
	return r.clusterEvent(api.ClusterEventLevelError, "Cluster %s update failed; rolling back. %s", r.cl.Name, r.cl.FailureMessage)
}

// errorLines shortens command output to its last lines for a message.
func errorLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
