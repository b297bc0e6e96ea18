package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/plural"
	"github.com/haleproject/hale/internal/slurm"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/topology"
)

// Slurm on hale clusters (DESIGN.md §8; research hyperpod-api-slurm.md §2.4 and §3.5,
// slurm-local-cluster.md). Every round keeps the cluster's slurm.conf and gres.conf rendered
// from its nodes (SlurmState.Hash names the rendering); brings each Slurm node's files up to
// that rendering (syncSlurmFiles); and once every node holds it, has Slurm read it again
// (applySlurm: slurmctld restarts when the rendering changed since it started, as 22.05 needs
// for a new node set, then `scontrol reconfigure`). A node configuring runs munged before its
// lifecycle scripts and slurmctld or slurmd after them; a compute node's slurmd starts only
// once slurmctld knows it. slurmctld's view of the nodes is read back every second
// (pollSlurm) for DescribeClusterNode and events, and for operators' Action:Replace and
// Action:Reboot requests.

// slurmPollInterval is how often slurmctld's view of the nodes is read.
const slurmPollInterval = time.Second

// slurmPrepare resolves the cluster's Slurm roles and renders its configuration. It sets
// r.slurmOK once the roles are known (nodes do not configure before), and r.sl for a Slurm
// cluster.
func (r *round) slurmPrepare() error {
	st := r.cl.State.Slurm
	if st == nil {
		st = &store.SlurmState{}
	}
	before := *st
	specs := make([]api.ClusterInstanceGroupSpecification, len(r.groups))
	for i, g := range r.groups {
		specs[i] = g.Spec
	}
	switch roles, fromAPI := slurm.RolesFromAPI(specs); {
	case r.cl.Spec.Orchestrator != nil && r.cl.Spec.Orchestrator.Eks != nil:
		st.Resolved = true // an EKS cluster: no Slurm
	case fromAPI:
		st.Resolved, st.Source, st.RolesError = true, roles.Source, ""
		st.Controller, st.Login, st.Workers = roles.Controller, roles.Login, roles.Workers
	case !st.Resolved:
		r.resolveLegacyRoles()
		return nil
	}
	if !reflect.DeepEqual(before, *st) || r.cl.State.Slurm == nil {
		r.cl.State.Slurm = st
		if err := r.saveCluster(); err != nil {
			return err
		}
		if st.Controller != "" && before.Controller == "" {
			if err := r.clusterEvent(api.ClusterEventLevelInfo, "Slurm roles (from %s): %s.", st.Source, describeRoles(st)); err != nil {
				return err
			}
		}
	}
	r.slurmOK = true
	if st.Controller == "" {
		return nil
	}
	r.sl = st
	return r.slurmRender()
}

func describeRoles(st *store.SlurmState) string {
	parts := []string{"controller group " + st.Controller}
	if st.Login != "" {
		parts = append(parts, "login group "+st.Login)
	}
	var workers []string
	for g, p := range st.Workers {
		workers = append(workers, fmt.Sprintf("%s (partition %s)", g, p))
	}
	sort.Strings(workers)
	if len(workers) > 0 {
		parts = append(parts, "compute groups "+strings.Join(workers, ", "))
	}
	return strings.Join(parts, "; ")
}

// resolveLegacyRoles reads the roles of a cluster without SlurmConfig from the
// provisioning_parameters.json of its lifecycle bundles (controller_group, login_group,
// worker_groups), as HyperPod's older configurations declare them.
func (r *round) resolveLegacyRoles() {
	var uris []string
	for _, g := range r.groups {
		if lc := g.Spec.LifeCycleConfig; lc != nil && lc.SourceS3Uri != nil && !contains(uris, *lc.SourceS3Uri) {
			uris = append(uris, *lc.SourceS3Uri)
		}
	}
	c, clusterID := r.c, r.cl.ID
	if c.cfg.Lifecycle == nil {
		uris = nil
	}
	r.work = append(r.work, c.background(key(jobSlurmRoles, clusterID), clusterID, func(ctx context.Context) {
		var roles *slurm.Roles
		var problem string
		for _, u := range uris {
			files, err := c.cfg.Lifecycle.Fetch(ctx, u)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				problem = fmt.Sprintf("the lifecycle scripts at %s could not be fetched: %v", u, err)
				continue
			}
			pp, ok := files["provisioning_parameters.json"]
			if !ok {
				continue
			}
			if roles, err = slurm.RolesFromProvisioningParameters(pp); err != nil {
				problem = fmt.Sprintf("%s in %s", err, u)
				roles = nil
				continue
			}
			break
		}
		err := c.st.Write(ctx, func(tx store.Tx) error {
			cl, err := tx.ClusterByID(clusterID)
			if err != nil {
				return err
			}
			if cl.State.Slurm != nil && cl.State.Slurm.Resolved {
				return nil
			}
			st := &store.SlurmState{Resolved: true, RolesError: problem}
			if roles != nil {
				st.Controller, st.Login, st.Workers, st.Source, st.RolesError = roles.Controller, roles.Login, roles.Workers, roles.Source, ""
			}
			cl.State.Slurm = st
			cl.UpdatedAt = c.now()
			if err := tx.UpdateCluster(cl); err != nil {
				return err
			}
			if st.Controller != "" {
				return clusterEventTx(tx, cl, api.ClusterEventLevelInfo, "Slurm roles (from %s): %s.", st.Source, describeRoles(st))
			}
			if problem != "" {
				return clusterEventTx(tx, cl, api.ClusterEventLevelWarn, "No Slurm on this cluster: %s.", problem)
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			c.log.Error("recording Slurm roles", "cluster_id", clusterID, "error", err)
		}
	}))
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// slurmRole is the node's Slurm role: "controller", "login", "compute" or "".
func (r *round) slurmRole(n *store.Node) string {
	if r.sl == nil {
		return ""
	}
	return roleIn(r.sl, n.GroupName)
}

func roleIn(st *store.SlurmState, group string) string {
	switch {
	case group == st.Controller:
		return "controller"
	case group == st.Login:
		return "login"
	}
	if _, ok := st.Workers[group]; ok {
		return "compute"
	}
	return ""
}

// slurmName is the node's Slurm name: the one recorded at its first launch (its host name then,
// ip-a-b-c-d), which replacements keep; nodes recorded before hale kept it derive it from the
// host name.
func slurmName(n *store.Node) string {
	if n.Details.OrchestratorName != "" {
		return n.Details.OrchestratorName
	}
	h, _, _ := strings.Cut(n.Details.PrivateDNSHostname, ".")
	return h
}

// slurmController is the node that runs slurmctld: the controller group's first live node
// with an address.
func (r *round) slurmController() *store.Node {
	var best *store.Node
	for _, n := range r.nodes {
		if n.GroupName != r.sl.Controller || n.Details.PrivateIP == "" || n.Details.Phase == store.PhaseTerminating || n.Details.Phase == store.PhaseFailed {
			continue
		}
		if best == nil || n.Details.Ordinal < best.Details.Ordinal {
			best = n
		}
	}
	return best
}

// slurmRender renders slurm.conf and gres.conf from the nodes and records a new rendering.
// A compute node is listed once it has an address and an inventory (or, being replaced, the
// entry it had), until it fails or shuts down.
func (r *round) slurmRender() error {
	st := r.sl
	if len(st.MungeKey) == 0 {
		st.MungeKey = make([]byte, 1024) // mungekey's default size
		rand.Read(st.MungeKey)
	}
	ctl := r.slurmController()
	if ctl == nil {
		return nil
	}
	prev := map[string]store.SlurmNode{}
	for _, sn := range st.Nodes {
		prev[sn.Name] = sn
	}
	if err := r.decideAccounting(st); err != nil {
		return err
	}
	cfg := slurm.Config{ClusterName: strings.ToLower(r.cl.Name), ControllerName: slurmName(ctl), ControllerAddr: ctl.Details.PrivateIP,
		Accounting: st.Accounting}
	var listed []store.SlurmNode
	var topo []topology.Node
	for _, n := range r.nodes {
		part, ok := st.Workers[n.GroupName]
		if !ok || n.Details.PrivateIP == "" || n.Details.Phase == store.PhaseFailed || n.Details.Phase == store.PhaseTerminating {
			continue
		}
		sn, ok := prev[slurmName(n)]
		if n.Details.Inventory != nil {
			sn, ok = slurmNodeOf(n, part), true
		}
		if !ok || sn.Group != n.GroupName {
			continue
		}
		listed = append(listed, sn)
		cfg.Nodes = append(cfg.Nodes, slurm.Node{Name: sn.Name, Addr: sn.Addr, CPUs: sn.CPUs, RealMemory: sn.RealMemory, GPUs: sn.GPUs, Group: sn.Group, Partition: sn.Partition})
		topo = append(topo, topology.Node{Name: sn.Name, InstanceType: n.InstanceType, NetworkNodes: n.Details.NetworkNodes,
			CapacityBlockID: n.Details.CapacityBlockID, Partitions: []string{slurm.DefaultPartition, sn.Partition}})
	}
	topoErr, topoAnnounced := st.TopologyError, st.TopologyAnnounced
	if err := r.slurmTopology(st, topo); err != nil {
		return err
	}
	if st.Topology != "" {
		cfg.TopologyPlugin, cfg.TopologyHash, cfg.PartitionTopology = st.TopologyPlugin, slurm.Hash(st.Topology), st.PartitionTopology
	}
	operator := ""
	if st.Conf != "" {
		operator = slurm.OperatorPart(st.Conf)
	}
	conf, gres := slurm.Conf(operator, &cfg), cfg.Gres()
	hash := slurmHash(conf, gres, st)
	if hash == st.Hash {
		if st.TopologyError != topoErr || st.TopologyAnnounced != topoAnnounced { // so events are not repeated
			r.cl.State.Slurm = st
			return r.saveCluster()
		}
		return nil
	}
	sort.Slice(listed, func(i, j int) bool { return listed[i].Name < listed[j].Name })
	st.Conf, st.Gres, st.Hash, st.Nodes = conf, gres, hash, listed
	r.cl.State.Slurm = st
	return r.saveCluster()
}

// slurmTopology renders the topology of the compute nodes for the installed Slurm (research
// hyperpod-api-slurm.md §4): on every membership change, since a replacement may sit under
// another leaf. A topology that does not validate is refused with an error event, once per
// reason, and the previous one stays: slurmctld never reads an empty, partial or broken file.
func (r *round) slurmTopology(st *store.SlurmState, nodes []topology.Node) error {
	if len(nodes) == 0 {
		return nil // an empty cluster keeps what it had (hale never writes an empty topology)
	}
	plan, err := topology.Generate(nodes, slurmVersion(st))
	if err != nil {
		if st.TopologyError == err.Error() {
			return nil
		}
		st.TopologyError = err.Error()
		return r.clusterEvent(api.ClusterEventLevelError, "The Slurm topology of the cluster's nodes is not valid, so hale keeps the previous one: %v.", err)
	}
	file := plan.Conf
	if plan.YAML != "" {
		file = plan.YAML
	}
	// While the cluster is created its nodes report one by one: the event says what it ended
	// with, once it is created.
	if h := slurm.Hash(file); file != "" && h != st.TopologyAnnounced && r.cl.Status != api.ClusterStatusCreating {
		kind := plan.Plugin
		if kind == "" {
			kind = "topology.yaml"
		}
		if err := r.clusterEvent(api.ClusterEventLevelInfo, "Slurm topology (%s, Slurm %s) rendered for %d node(s): %s.", kind, slurmVersion(st),
			len(nodes), topologySummary(plan.Topologies)); err != nil {
			return err
		}
		st.TopologyAnnounced = h
	}
	st.Topology, st.TopologyPlugin, st.TopologyError = file, plan.Plugin, ""
	st.TopologyYAML, st.PartitionTopology = plan.YAML != "", plan.Partitions
	return nil
}

func topologySummary(ts []*topology.Topology) string {
	var parts []string
	for _, t := range ts {
		switch t.Kind {
		case topology.Tree:
			leaves := 0
			for _, s := range t.Switches {
				if len(s.Nodes) > 0 {
					leaves++
				}
			}
			leafWord := "leaves"
			if leaves == 1 {
				leafWord = "a leaf"
			}
			parts = append(parts, fmt.Sprintf("%s, %d of them %s", plural.Count(len(t.Switches), "switch", "switches"), leaves, leafWord))
		case topology.Block:
			parts = append(parts, fmt.Sprintf("%s of size %v", plural.Count(len(t.Blocks), "block", "blocks"), t.BlockSizes))
		}
	}
	return strings.Join(parts, "; ")
}

// slurmVersion is the cluster's Slurm version, as its controller node reported it
// (SlurmState.Version): hale only configures a topology plugin that Slurm has (22.05 has
// topology/tree but not block). Until the controller has answered, Debian 12's 22.05, the
// oldest hale supports.
func slurmVersion(st *store.SlurmState) topology.Version {
	if v, err := topology.ParseVersion(st.Version); err == nil {
		return v
	}
	return topology.Version{Major: 22, Minor: 5}
}

// slurmNodeOf is a compute node's slurm.conf entry from what its agent reported, capped at its
// instance type's size (on the local provider every node sees the host's CPUs and memory).
// RealMemory keeps a tenth back for the operating system, as HyperPod's sample configuration
// does, so slurmd never registers with less than slurm.conf promises.
func slurmNodeOf(n *store.Node, partition string) store.SlurmNode {
	inv := n.Details.Inventory
	cpus, mem := int(inv.CPUs), inv.MemoryMiB
	if it, ok := topology.Lookup(n.InstanceType); ok {
		cpus, mem = min(cpus, it.VCPUs), min(mem, it.MemoryMiB)
	}
	sn := store.SlurmNode{Name: slurmName(n), Addr: n.Details.PrivateIP, CPUs: max(cpus, 1), RealMemory: max(mem*9/10, 1),
		Group: n.GroupName, Partition: partition}
	accs := append([]store.Accelerator(nil), inv.Accelerators...)
	sort.Slice(accs, func(i, j int) bool { return accs[i].Index < accs[j].Index })
	for _, a := range accs {
		if a.Kind == "gpu" && a.DevicePath != "" {
			sn.GPUs = append(sn.GPUs, a.DevicePath)
		}
	}
	return sn
}

// slurmGate reports whether a node whose agent registered may start configuring: the roles
// are known, and for a Slurm node the configuration is rendered and lists every compute node
// coming up (each has reported its inventory), so the first slurm.conf is the whole cluster's.
func (r *round) slurmGate(n *store.Node) bool {
	if !r.slurmOK {
		return false
	}
	if r.slurmRole(n) == "" {
		return true
	}
	if r.sl.Hash == "" {
		return false
	}
	for _, m := range r.nodes {
		if r.slurmRole(m) == "compute" && m.Details.Phase == store.PhaseBooting && m.Details.Inventory == nil && m.Details.PrivateIP != "" {
			return false
		}
	}
	return true
}

// slurmSteps starts the Slurm work of the round: file syncs, the apply, the poll.
func (r *round) slurmSteps() error {
	if r.sl == nil || r.sl.Hash == "" {
		return nil
	}
	st, agents := r.sl, r.c.cfg.Agents
	var ctl *store.Node
	synced := true
	for _, n := range r.nodes {
		role := r.slurmRole(n)
		if role == "" || (n.Details.Phase != store.PhaseConfiguring && n.Details.Phase != store.PhaseJoining && n.Details.Phase != store.PhaseReady) || !agents.Connected(n.InstanceID) {
			continue
		}
		if role == "controller" && n.Details.Phase == store.PhaseReady && !n.Details.Unreachable && ctl == nil {
			ctl = n
		}
		if n.Details.SlurmConf != st.Hash {
			synced = false
			clusterID, logicalID := r.cl.ID, n.LogicalID
			r.work = append(r.work, r.c.background(key(jobSlurmFiles, n.InstanceID), clusterID, func(ctx context.Context) {
				if err := r.c.syncSlurmFiles(ctx, clusterID, logicalID); err != nil && ctx.Err() == nil {
					r.c.log.Warn("writing Slurm files", "cluster_id", clusterID, "node", logicalID, "error", err)
				}
			}))
		}
	}
	if ctl == nil {
		return nil
	}
	if synced && st.Applied != st.Hash {
		var names []string
		for _, sn := range st.Nodes {
			names = append(names, sn.Name)
		}
		// slurmctld restarts only when its node set or partitions (hale's block) changed: other
		// settings are read by scontrol reconfigure.
		clusterID, inst, hash, restart := r.cl.ID, ctl.InstanceID, st.Hash, st.CtldHash != blockHash(st.Conf)
		r.work = append(r.work, r.c.background(key(jobSlurmApply, clusterID), clusterID, func(ctx context.Context) {
			r.c.applySlurm(ctx, clusterID, inst, hash, restart, names)
		}))
	}
	if !st.Accounting && st.AccountingOff != "" && accountingMissing() == "" {
		clusterID, inst := r.cl.ID, ctl.InstanceID
		r.work = append(r.work, r.c.background(key(jobSlurmAcct, clusterID), clusterID, func(ctx context.Context) {
			r.c.accountingBack(ctx, clusterID, inst)
		}))
	}
	if r.c.slurmPollDue(r.cl.ID, r.now) {
		clusterID, inst := r.cl.ID, ctl.InstanceID
		r.work = append(r.work, r.c.background(key(jobSlurmPoll, clusterID), clusterID, func(ctx context.Context) {
			r.c.pollSlurm(ctx, clusterID, inst)
		}))
	}
	return nil
}

// blockHash names hale's block of a slurm.conf: the node set and partitions slurmctld reads
// only when it starts.
func blockHash(conf string) string { return slurm.Hash(slurm.BlockOf(conf)) }

// slurmHash names a rendering of the cluster's Slurm files: slurm.conf and gres.conf as given,
// with the state's topology, munge key and generation. Every rendering is named by it (a merge
// of the operator's edits too), so an unchanged rendering is never written again.
func slurmHash(conf, gres string, st *store.SlurmState) string {
	return slurm.Hash(conf, gres, st.Topology, string(st.MungeKey), fmt.Sprint(st.Generation))
}

// slurmPollDue rate-limits polls of one cluster to one per slurmPollInterval.
func (c *Controller) slurmPollDue(clusterID string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.polled[clusterID]) < slurmPollInterval {
		return false
	}
	c.polled[clusterID] = now
	return true
}

// nodeLock serialises the Slurm file writes to one instance, so the last write is the newest.
func (c *Controller) nodeLock(instanceID string) func() {
	c.mu.Lock()
	l := c.fileLocks[instanceID]
	if l == nil {
		l = make(chan struct{}, 1)
		c.fileLocks[instanceID] = l
	}
	c.mu.Unlock()
	l <- struct{}{}
	return func() { <-l }
}

// do sends a command to an instance's agent and waits for its result, for at most timeout.
func (c *Controller) do(ctx context.Context, instanceID string, cmd *agentproto.Command, timeout time.Duration) (*agentproto.CommandResult, error) {
	res, err := c.cfg.Agents.Send(instanceID, cmd)
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r := <-res:
			return r, nil
		case <-tick.C:
			if !c.cfg.Agents.Connected(instanceID) {
				return nil, fmt.Errorf("the agent of %s disconnected", instanceID)
			}
		case <-deadline.C:
			return nil, fmt.Errorf("no answer from the agent of %s within %s", instanceID, timeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// runOn runs argv on an instance (an ephemeral command: it runs each time) and returns its
// output; a non-zero exit is an error carrying the output.
func (c *Controller) runOn(ctx context.Context, instanceID string, argv []string, timeout time.Duration) (string, error) {
	r, err := c.do(ctx, instanceID, &agentproto.Command{Id: fmt.Sprintf("q-%s-%d", argv[0], time.Now().UnixNano()), Ephemeral: true,
		Kind: &agentproto.Command_Run{Run: &agentproto.RunCommand{Argv: argv, TimeoutSeconds: uint32(timeout / time.Second)}}}, timeout+5*time.Second)
	if err != nil {
		return "", err
	}
	if r.Error != "" || r.ExitCode != 0 || r.TimedOut {
		return string(r.StdoutTail), fmt.Errorf("%s: exit code %d %s%s", strings.Join(argv, " "), r.ExitCode, r.Error, strings.TrimSpace(" "+errorLines(r.OutputTail, 3)))
	}
	return string(r.StdoutTail), nil
}

// readConf reads slurm.conf on an instance. A command's result carries only the last lines of
// its output (the agent's tail), so the file comes as one line of base64: read with cat, a
// slurm.conf of more than 40 lines lost its head, which then looked like drift.
func (c *Controller) readConf(ctx context.Context, instanceID string) (string, error) {
	out, err := c.runOn(ctx, instanceID, slurm.ReadConf(), 10*time.Second)
	if err != nil {
		return "", err
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", slurm.ConfPath, err)
	}
	return string(b), nil
}

// syncSlurmFiles writes the cluster's current munge key, slurm.conf and gres.conf to a node
// (atomically, by its agent) and records the rendering the node now holds. On the controller,
// an operator's edits to slurm.conf since hale last wrote it are first merged (strategy
// Merge) or discarded with a warning event (Managed, Overwrite).
func (c *Controller) syncSlurmFiles(ctx context.Context, clusterID, logicalID string) error {
	var cl *store.Cluster
	var n *store.Node
	read := func() error {
		return c.st.Read(ctx, func(tx store.Tx) error {
			var err error
			if cl, err = tx.ClusterByID(clusterID); err != nil {
				return err
			}
			n, err = tx.NodeByLogicalID(clusterID, logicalID)
			return err
		})
	}
	if err := read(); err != nil {
		return err
	}
	unlock := c.nodeLock(n.InstanceID)
	defer unlock()
	if err := read(); err != nil { // what it is now that this write is the only one
		return err
	}
	st := cl.State.Slurm
	if st == nil || st.Hash == "" {
		return nil
	}
	if roleIn(st, n.GroupName) == "controller" && n.Details.SlurmConf != "" {
		live, err := c.readConf(ctx, n.InstanceID)
		if err != nil {
			return err
		}
		if drift := slurm.OperatorDrift(st.Conf, live); len(drift) > 0 {
			merged, err := c.operatorEdits(ctx, clusterID, st.Hash, live, drift)
			if err != nil || merged {
				return err // a merge made a new rendering: the next round writes it
			}
		}
	}
	files := []*agentproto.File{
		{Path: slurm.MungeKey, Content: st.MungeKey, Mode: 0o400},
		{Path: slurm.ConfPath, Content: []byte(st.Conf), Mode: 0o644},
		{Path: slurm.GresPath, Content: []byte(st.Gres), Mode: 0o644},
	}
	if roleIn(st, n.GroupName) == "controller" {
		// slurmdbd's: only the controller runs it (and it reads it only with mode 0600).
		files = append(files, &agentproto.File{Path: slurm.DbdConfPath, Content: []byte(slurm.DbdConf), Mode: 0o600})
	}
	switch {
	case st.Topology != "" && st.TopologyYAML:
		files = append(files, &agentproto.File{Path: slurm.TopologyYAMLPath, Content: []byte(st.Topology), Mode: 0o644})
	case st.Topology != "":
		files = append(files, &agentproto.File{Path: slurm.TopologyPath, Content: []byte(st.Topology), Mode: 0o644})
	}
	r, err := c.do(ctx, n.InstanceID, &agentproto.Command{Id: fmt.Sprintf("slurm-files-%s-%d", st.Hash, time.Now().UnixNano()), Ephemeral: true,
		Kind: &agentproto.Command_WriteFiles{WriteFiles: &agentproto.WriteFiles{Files: files}}}, 15*time.Second)
	if err != nil {
		return err
	}
	if r.Error != "" {
		return fmt.Errorf("writing the Slurm files: %s", r.Error)
	}
	hash := st.Hash
	var txErr error
	c.nodeTx(ctx, clusterID, logicalID, func(tx store.Tx, cl *store.Cluster, n *store.Node) error {
		had := n.Details.SlurmConf
		n.Details.SlurmConf = hash
		if err := tx.UpdateNode(n); err != nil {
			return err
		}
		if had != "" && had != hash && (n.Details.Phase == store.PhaseReady || n.Details.Phase == store.PhaseJoining) && cl.State.Slurm != nil {
			// Running daemons read the new files only when told to.
			cl.State.Slurm.Applied = ""
			txErr = tx.UpdateCluster(cl)
		}
		return txErr
	})
	return nil
}

// operatorEdits handles edits an operator made to slurm.conf on the controller: Merge keeps
// them (a new rendering; merged is true), Managed and Overwrite write over them, with a Warn
// event naming the lines.
func (c *Controller) operatorEdits(ctx context.Context, clusterID, hash, live string, drift []string) (merged bool, err error) {
	err = c.st.Write(ctx, func(tx store.Tx) error {
		cl, err := tx.ClusterByID(clusterID)
		if err != nil {
			return err
		}
		st := cl.State.Slurm
		if st == nil || st.Hash != hash {
			return nil
		}
		strategy := SlurmStrategy(&cl.Spec)
		if strategy == api.ClusterSlurmConfigStrategyMerge {
			st.Conf = strings.TrimRight(slurm.Merged(live), "\n") + "\n" + slurm.BlockOf(st.Conf)
			st.Hash = slurmHash(st.Conf, st.Gres, st)
			merged = true
			cl.UpdatedAt = c.now()
			if err := tx.UpdateCluster(cl); err != nil {
				return err
			}
			return clusterEventTx(tx, cl, api.ClusterEventLevelInfo, "slurm.conf: the operator's changes on the controller were merged (SlurmConfigStrategy Merge): %s.", strings.Join(drift, "; "))
		}
		return clusterEventTx(tx, cl, api.ClusterEventLevelWarn, "slurm.conf: changes made on the controller outside hale were overwritten (SlurmConfigStrategy %s): %s.", strategy, strings.Join(drift, "; "))
	})
	return merged, err
}

// applySlurm has Slurm read the rendering every node now holds: slurmctld restarts first when
// it started with another one (22.05 reads a new node set only at start), then `scontrol
// reconfigure` makes slurmctld and every slurmd read the files again.
func (c *Controller) applySlurm(ctx context.Context, clusterID, ctlInstance, hash string, restart bool, names []string) {
	start := time.Now()
	err := func() error {
		if restart {
			r, err := c.do(ctx, ctlInstance, &agentproto.Command{Id: fmt.Sprintf("slurmctld-restart-%s-%d", hash, time.Now().UnixNano()), Ephemeral: true,
				Kind: &agentproto.Command_RestartDaemon{RestartDaemon: &agentproto.RestartDaemon{Name: "slurmctld"}}}, 30*time.Second)
			if err != nil {
				return err
			}
			if r.Error != "" {
				return fmt.Errorf("restarting slurmctld: %s", r.Error)
			}
		}
		if _, err := c.runOn(ctx, ctlInstance, slurm.WaitUp(), 20*time.Second); err != nil {
			return err
		}
		// Just after a restart slurmctld may answer a ping yet drop the reconfigure request
		// ("Zero Bytes were transmitted or received"): try a few times.
		var err error
		for try := 0; try < 5; try++ {
			if _, err = c.runOn(ctx, ctlInstance, slurm.Reconfigure(), 20*time.Second); err == nil || ctx.Err() != nil {
				break
			}
			c.sleep(ctx, 300*time.Millisecond)
		}
		return err
	}()
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("applying the Slurm configuration; will retry", "cluster_id", clusterID, "error", err)
			c.slurmApplyFailed(ctx, clusterID, hash, err)
			c.sleep(ctx, time.Second) // the round that follows tries again
		}
		return
	}
	took := time.Since(start)
	err = c.st.Write(ctx, func(tx store.Tx) error {
		cl, err := tx.ClusterByID(clusterID)
		if err != nil {
			return err
		}
		st := cl.State.Slurm
		if st == nil || st.Hash != hash {
			return nil // a newer rendering: it is applied next
		}
		if restart {
			st.CtldHash = blockHash(st.Conf)
		}
		prev := st.AppliedNodes
		st.Applied, st.AppliedNodes, st.ApplyError = hash, names, ""
		cl.UpdatedAt = c.now()
		if err := tx.UpdateCluster(cl); err != nil {
			return err
		}
		how := "scontrol reconfigure"
		if restart {
			how = "slurmctld restarted, scontrol reconfigure"
		}
		added, removed := setDiff(names, prev), setDiff(prev, names)
		change := ""
		if len(added) > 0 {
			change += "; joined: " + slurm.Hostlist(added)
		}
		if len(removed) > 0 {
			change += "; left: " + slurm.Hostlist(removed)
		}
		return clusterEventTx(tx, cl, api.ClusterEventLevelInfo, "Slurm configuration applied (%s, %.2fs): %s %s%s.",
			how, took.Seconds(), plural.Count(len(names), "compute node", "compute nodes"), slurm.Hostlist(names), change)
	})
	if err != nil && ctx.Err() == nil {
		c.log.Error("recording the Slurm configuration", "cluster_id", clusterID, "error", err)
	}
}

// slurmApplyFailed records why a rendering could not be applied, with a Warn event the first
// time each reason is seen (hale retries every round).
func (c *Controller) slurmApplyFailed(ctx context.Context, clusterID, hash string, cause error) {
	err := c.st.Write(ctx, func(tx store.Tx) error {
		cl, err := tx.ClusterByID(clusterID)
		if err != nil {
			return err
		}
		st := cl.State.Slurm
		if st == nil || st.Hash != hash || st.ApplyError == cause.Error() {
			return nil
		}
		st.ApplyError = cause.Error()
		if err := tx.UpdateCluster(cl); err != nil {
			return err
		}
		return clusterEventTx(tx, cl, api.ClusterEventLevelWarn, "Slurm configuration not applied yet (hale retries): %v.", cause)
	})
	if err != nil && ctx.Err() == nil {
		c.log.Error("recording a Slurm apply failure", "cluster_id", clusterID, "error", err)
	}
}

// setDiff is a's names that are not in b.
func setDiff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// pollSlurm reads slurmctld's view of the nodes and records each node's state and reason,
// with an event when a node leaves or returns to service. A compute node an operator set to
// fail, down or drain with the reason Action:Replace or Action:Reboot (HyperPod's convention,
// exact and case-sensitive) gets the request recorded for the repair flow and is drained;
// a node hale itself took down (reason "hale: ...") is resumed once it is Running again.
func (c *Controller) pollSlurm(ctx context.Context, clusterID, ctlInstance string) {
	out, err := c.runOn(ctx, ctlInstance, slurm.ShowNodes(), 10*time.Second)
	if err != nil {
		return
	}
	states := slurm.ParseShowNodes(out)
	type act struct{ argv []string }
	var acts []act
	err = c.st.Write(ctx, func(tx store.Tx) error {
		acts = nil
		cl, err := tx.ClusterByID(clusterID)
		if err != nil {
			return err
		}
		st := cl.State.Slurm
		if st == nil {
			return nil
		}
		nodes, err := tx.NodesOf(clusterID)
		if err != nil {
			return err
		}
		now := c.now()
		for _, n := range nodes {
			if roleIn(st, n.GroupName) != "compute" || n.Details.Phase == store.PhaseTerminating {
				continue
			}
			name := slurmName(n)
			s, ok := states[name]
			if !ok {
				continue
			}
			changed := s.State != n.Details.SlurmState || s.Reason != n.Details.SlurmReason
			wasOut, isOut := outOfService(n.Details.SlurmState), outOfService(s.State)
			prevReason := n.Details.SlurmReason
			n.Details.SlurmState, n.Details.SlurmReason = s.State, s.Reason
			var events []func() error
			if changed && (wasOut != isOut || isOut && prevReason != s.Reason) {
				level, what := api.ClusterEventLevelInfo, "is back in service"
				if isOut {
					level, what = api.ClusterEventLevelWarn, "is out of service"
				}
				desc := fmt.Sprintf("Slurm node %s (instance %s, group %s) %s: %s", name, n.InstanceID, n.GroupName, what, strings.ToLower(s.State))
				if s.Reason != "" {
					desc += ", reason: " + s.Reason
				}
				events = append(events, func() error { return instanceEvent(tx, cl, n, now, level, "%s.", desc) })
			}
			req := s.RepairRequest()
			haleDrain := n.Details.HaleDrain != "" && s.Reason == n.Details.HaleDrain
			if n.Details.HaleDrain != "" && !haleDrain && s.State != "" {
				changed = true
				n.Details.HaleDrain = "" // Slurm no longer shows hale's drain
			}
			switch {
			case req != "" && haleDrain:
				// hale's own drain of a repair, under way, ended or cancelled: not an
				// operator's request.
			case req != "" && n.Details.RepairRequest != req && n.Details.RepairStatus != "":
				// hale's own drain of a repair under way, not an operator's request.
				changed = true
				n.Details.RepairRequest = req
			case req != "" && n.Details.RepairRequest != req && n.Details.Phase == store.PhaseReady:
				changed = true
				n.Details.RepairRequest = req
				events = append(events, func() error {
					if err := instanceEvent(tx, cl, n, now, api.ClusterEventLevelWarn,
						"Slurm node %s (instance %s) is marked Action:%s by an operator (state %s): hale drains it and starts the %s.",
						name, n.InstanceID, req, strings.ToLower(s.State), strings.ToLower(req)); err != nil {
						return err
					}
					_, err := requestRepair(tx, cl, n, req, "slurm", "Slurm reason Action:"+req, now)
					return err
				})
			case req == "" && n.Details.RepairRequest != "" && !strings.HasPrefix(s.Reason, "Action:"):
				changed = true
				old := n.Details.RepairRequest
				n.Details.RepairRequest = ""
				events = append(events, func() error {
					return instanceEvent(tx, cl, n, now, api.ClusterEventLevelInfo, "Slurm node %s: the Action:%s request was withdrawn (state %s).", name, old, strings.ToLower(s.State))
				})
			}
			if n.Details.Phase == store.PhaseReady && !n.Details.Unreachable && (strings.HasPrefix(s.Reason, slurm.HaleReason) || haleDrain && n.Details.RepairStatus == "") &&
				isOut && !s.Has("NOT_RESPONDING") && c.cfg.Agents.Connected(n.InstanceID) {
				// hale's own reason with no repair left to need it (a cancelled repair's
				// drain): back in service, retried until Slurm shows it.
				acts = append(acts, act{slurm.Resume(name)})
			}
			if changed {
				if err := tx.UpdateNode(n); err != nil {
					return err
				}
			}
			for _, e := range events {
				if err := e(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error("recording Slurm node states", "cluster_id", clusterID, "error", err)
		}
		return
	}
	for _, a := range acts {
		if _, err := c.runOn(ctx, ctlInstance, a.argv, 10*time.Second); err != nil && ctx.Err() == nil {
			c.log.Warn("scontrol", "cluster_id", clusterID, "error", err)
		}
	}
}

// outOfService: the node takes no new jobs (down, drained or draining, failed).
func outOfService(state string) bool {
	s := slurm.NodeState{State: state}
	switch s.Base() {
	case "down", "drain", "draining", "fail":
		return true
	}
	return s.Has("DRAIN") || s.Has("FAIL")
}

// slurmCtlReturning reports whether taking node n out of Slurm must wait: n is a compute node
// Slurm knows, and the cluster's controller node is in service but its agent has no session
// yet and is not silent either (the server has just started and the agents are reconnecting).
// slurmTakeOut needs that agent; a replacement, reboot or removal started without it would
// leave Slurm running the old node's jobs on an instance that is going away, with no requeue.
// The step waits for the agent's reconnection (which enqueues the cluster) or its silence.
func (r *round) slurmCtlReturning(n *store.Node) bool {
	return r.slurmRole(n) == "compute" && n.Details.SlurmState != "" && r.ctlReconnecting()
}

// ctlReconnecting reports whether the cluster's controller node is in service and its agent is
// expected back: no session yet, not silent either.
func (r *round) ctlReconnecting() bool {
	agents := r.c.cfg.Agents
	for _, m := range r.controllerNodes() {
		if !agents.Connected(m.InstanceID) && !agents.Silent(m.InstanceID) {
			return true
		}
	}
	return false
}

// controllerNodes are the cluster's nodes of Slurm's controller role that are set up (Ready),
// whatever their agents' state.
func (r *round) controllerNodes() []*store.Node {
	var out []*store.Node
	for _, m := range r.nodes {
		if r.slurmRole(m) == "controller" && m.Details.Phase == store.PhaseReady {
			out = append(out, m)
		}
	}
	return out
}

// slurmTakeOut returns work that takes a Running compute node out of Slurm at once (state
// down, so its jobs requeue now rather than after SlurmdTimeout) before hale reboots,
// replaces or removes its instance; nil when the node is not in Slurm or no controller runs.
func (r *round) slurmTakeOut(n *store.Node, why string) func(ctx context.Context) {
	if r.slurmRole(n) != "compute" || n.Details.SlurmState == "" {
		return nil
	}
	var ctl string
	for _, m := range r.controllerNodes() {
		if r.c.cfg.Agents.Connected(m.InstanceID) {
			ctl = m.InstanceID
		}
	}
	if ctl == "" {
		return nil
	}
	name, c, node := slurmName(n), r.c, *n
	return func(ctx context.Context) {
		if _, err := c.runOn(ctx, ctl, slurm.Down(name, slurm.HaleReason+why), 10*time.Second); err != nil {
			if ctx.Err() == nil {
				c.log.Warn("taking a node out of Slurm", "node", name, "error", err)
			}
			return
		}
		// The node may be back before the next poll sees it down: say so now.
		c.nodeTx(ctx, node.ClusterID, node.LogicalID, func(tx store.Tx, cl *store.Cluster, m *store.Node) error {
			return c.appendEvent(tx, cl, m, api.ClusterEventLevelInfo,
				"Slurm node %s (instance %s, group %s) taken out of service by hale (state down, its jobs requeued): %s.", name, node.InstanceID, node.GroupName, why)
		})
	}
}

// SlurmStrategy is the cluster's SlurmConfigStrategy; Managed when none was given (HyperPod's
// default).
func SlurmStrategy(spec *api.CreateClusterRequest) api.ClusterSlurmConfigStrategy {
	if o := spec.Orchestrator; o != nil && o.Slurm != nil && o.Slurm.SlurmConfigStrategy != nil {
		return *o.Slurm.SlurmConfigStrategy
	}
	return api.ClusterSlurmConfigStrategyManaged
}

// clusterEventTx appends a Cluster event outside a round.
func clusterEventTx(tx store.Tx, cl *store.Cluster, level api.ClusterEventLevel, format string, args ...any) error {
	return tx.AppendEvent(&store.Event{ID: uuid.NewString(), ClusterID: cl.ID, ClusterName: cl.Name, ClusterARN: cl.ARN,
		ResourceType: api.ClusterEventResourceTypeCluster, Level: level, Time: time.Now().UTC().Truncate(time.Millisecond),
		Description: fmt.Sprintf(format, args...)})
}

// SlurmDrift lists how slurm.conf on the cluster's controller node differs from what hale last
// wrote there: the operator's part always, and hale's block too when the controller holds the
// latest rendering. It lists nothing when no controller node runs with hale's files (there is
// no live file to compare).
func (c *Controller) SlurmDrift(ctx context.Context, clusterID string) ([]string, error) {
	var st *store.SlurmState
	var ctl *store.Node
	err := c.st.Read(ctx, func(tx store.Tx) error {
		cl, err := tx.ClusterByID(clusterID)
		if err != nil {
			return err
		}
		if st = cl.State.Slurm; st == nil {
			return nil
		}
		nodes, err := tx.NodesOf(clusterID)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.GroupName == st.Controller && n.Details.Phase == store.PhaseReady && n.Details.SlurmConf != "" && c.cfg.Agents.Connected(n.InstanceID) {
				ctl = n
			}
		}
		return nil
	})
	if err != nil || st == nil || ctl == nil {
		return nil, err
	}
	live, err := c.readConf(ctx, ctl.InstanceID)
	if err != nil {
		return nil, err
	}
	if ctl.Details.SlurmConf == st.Hash {
		return slurm.Drift(st.Conf, live), nil
	}
	return slurm.OperatorDrift(st.Conf, live), nil
}
