package slurm

import (
	"context"
	"crypto/rand"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/plural"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/topology"
)

// Prepare implements orchestrator.Round: it resolves the cluster's Slurm roles and renders its
// configuration. It sets r.ok once the roles are known (nodes do not configure before), and
// r.sl for a Slurm cluster.
func (r *round) Prepare() error {
	st, had := r.st, r.st != nil
	if st == nil {
		st = &State{}
	}
	before := *st
	specs := make([]api.ClusterInstanceGroupSpecification, len(r.groups))
	for i, g := range r.groups {
		specs[i] = g.Spec
	}
	switch roles, fromAPI := slurmconf.RolesFromAPI(specs); {
	case fromAPI:
		st.Resolved, st.Source, st.RolesError = true, roles.Source, ""
		st.Controller, st.Login, st.Workers = roles.Controller, roles.Login, roles.Workers
	case !st.Resolved:
		r.resolveLegacyRoles()
		return nil
	}
	if !reflect.DeepEqual(before, *st) || !had {
		r.st = st
		if err := r.saveState(); err != nil {
			return err
		}
		if st.Controller != "" && before.Controller == "" {
			if err := r.r.Event(nil, api.ClusterEventLevelInfo, "Slurm roles (from %s): %s.", st.Source, describeRoles(st)); err != nil {
				return err
			}
		}
	}
	r.ok = true
	if st.Controller == "" {
		return nil
	}
	r.sl = st
	return r.render()
}

func describeRoles(st *State) string {
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
	s, clusterID := r.s, r.cl.ID
	source := s.h.Lifecycle()
	if source == nil {
		uris = nil
	}
	r.r.Go(jobRoles, clusterID, func(ctx context.Context) {
		var roles *slurmconf.Roles
		var problem string
		for _, u := range uris {
			files, err := source.Fetch(ctx, u)
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
			if roles, err = slurmconf.RolesFromProvisioningParameters(pp); err != nil {
				problem = fmt.Sprintf("%s in %s", err, u)
				roles = nil
				continue
			}
			break
		}
		err := s.h.Store().Write(ctx, func(tx store.Tx) error {
			cl, err := tx.ClusterByID(clusterID)
			if err != nil {
				return err
			}
			if had, err := loadState(tx, clusterID); err != nil || had != nil && had.Resolved {
				return err
			}
			st := &State{Resolved: true, RolesError: problem}
			if roles != nil {
				st.Controller, st.Login, st.Workers, st.Source, st.RolesError = roles.Controller, roles.Login, roles.Workers, roles.Source, ""
			}
			if err := putState(tx, clusterID, st); err != nil {
				return err
			}
			if st.Controller != "" {
				return s.h.Event(tx, cl, nil, api.ClusterEventLevelInfo, "Slurm roles (from %s): %s.", st.Source, describeRoles(st))
			}
			if problem != "" {
				return s.h.Event(tx, cl, nil, api.ClusterEventLevelWarn, "No Slurm on this cluster: %s.", problem)
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			s.log.Error("recording Slurm roles", "cluster_id", clusterID, "error", err)
		}
	})
}

// slurmController is the node that runs slurmctld: the controller group's first live node
// with an address.
func (r *round) controllerNode() *store.Node {
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
func (r *round) render() error {
	st := r.sl
	if len(st.MungeKey) == 0 {
		st.MungeKey = make([]byte, 1024) // mungekey's default size
		rand.Read(st.MungeKey)
	}
	ctl := r.controllerNode()
	if ctl == nil {
		return nil
	}
	prev := map[string]ConfNode{}
	for _, sn := range st.Nodes {
		prev[sn.Name] = sn
	}
	if err := r.decideAccounting(st); err != nil {
		return err
	}
	cfg := slurmconf.Config{ClusterName: strings.ToLower(r.cl.Name), ControllerName: orchestrator.NodeName(ctl), ControllerAddr: ctl.Details.PrivateIP,
		Accounting: st.Accounting}
	prevHeads := st.Heads
	st.HeadDir, st.Heads = r.headDir(), nil
	if st.HeadDir != "" {
		st.Heads = r.heads(prevHeads)
		for i, h := range st.Heads {
			if i == 0 {
				cfg.ControllerName, cfg.ControllerAddr = h.Name, h.Addr
				continue
			}
			cfg.Backups = append(cfg.Backups, h.Controller)
		}
		cfg.StateSave, cfg.CtldTimeout = st.HeadDir+"/statesave", MultiHeadCtldTimeout
	}
	var listed []ConfNode
	var topo []topology.Node
	for _, n := range r.nodes {
		part, ok := st.Workers[n.GroupName]
		if !ok || n.Details.PrivateIP == "" || n.Details.Phase == store.PhaseFailed || n.Details.Phase == store.PhaseTerminating {
			continue
		}
		sn, ok := prev[orchestrator.NodeName(n)]
		if n.Details.Inventory != nil {
			sn, ok = confNodeOf(n, part), true
		}
		if !ok || sn.Group != n.GroupName {
			continue
		}
		listed = append(listed, sn)
		cfg.Nodes = append(cfg.Nodes, slurmconf.Node{Name: sn.Name, Addr: sn.Addr, CPUs: sn.CPUs, RealMemory: sn.RealMemory, GPUs: sn.GPUs, Group: sn.Group, Partition: sn.Partition})
		topo = append(topo, topology.Node{Name: sn.Name, InstanceType: n.InstanceType, NetworkNodes: n.Details.NetworkNodes,
			CapacityBlockID: n.Details.CapacityBlockID, Partitions: []string{slurmconf.DefaultPartition, sn.Partition}})
	}
	topoErr, topoAnnounced := st.TopologyError, st.TopologyAnnounced
	if err := r.topology(st, topo); err != nil {
		return err
	}
	if st.Topology != "" {
		cfg.TopologyPlugin, cfg.TopologyHash, cfg.PartitionTopology = st.TopologyPlugin, slurmconf.Hash(st.Topology), st.PartitionTopology
	}
	operator := ""
	if st.Conf != "" {
		operator = slurmconf.OperatorPart(st.Conf)
	}
	conf, gres := slurmconf.Conf(operator, &cfg), cfg.Gres()
	hash := renderHash(conf, gres, st, r.cl)
	if hash == st.Hash {
		if st.TopologyError != topoErr || st.TopologyAnnounced != topoAnnounced { // so events are not repeated
			r.st = st
			return r.saveState()
		}
		return nil
	}
	sort.Slice(listed, func(i, j int) bool { return listed[i].Name < listed[j].Name })
	st.Conf, st.Gres, st.Hash, st.Nodes = conf, gres, hash, listed
	r.st = st
	return r.saveState()
}

// slurmTopology renders the topology of the compute nodes for the installed Slurm (research
// hyperpod-api-slurm.md §4): on every membership change, since a replacement may sit under
// another leaf. A topology that does not validate is refused with an error event, once per
// reason, and the previous one stays: slurmctld never reads an empty, partial or broken file.
func (r *round) topology(st *State, nodes []topology.Node) error {
	if len(nodes) == 0 {
		return nil // an empty cluster keeps what it had (hale never writes an empty topology)
	}
	plan, err := slurmconf.Generate(nodes, versionOf(st))
	if err != nil {
		if st.TopologyError == err.Error() {
			return nil
		}
		st.TopologyError = err.Error()
		return r.r.Event(nil, api.ClusterEventLevelError, "The Slurm topology of the cluster's nodes is not valid, so hale keeps the previous one: %v.", err)
	}
	file := plan.Conf
	if plan.YAML != "" {
		file = plan.YAML
	}
	// While the cluster is created its nodes report one by one: the event says what it ended
	// with, once it is created.
	if h := slurmconf.Hash(file); file != "" && h != st.TopologyAnnounced && r.cl.Status != api.ClusterStatusCreating {
		kind := plan.Plugin
		if kind == "" {
			kind = "topology.yaml"
		}
		if err := r.r.Event(nil, api.ClusterEventLevelInfo, "Slurm topology (%s, Slurm %s) rendered for %d node(s): %s.", kind, versionOf(st),
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

// versionOf is the cluster's Slurm version, as its controller node reported it
// (SlurmState.Version): hale only configures a topology plugin that Slurm has (22.05 has
// topology/tree but not block). Until the controller has answered, Debian 12's 22.05, the
// oldest hale supports.
func versionOf(st *State) slurmconf.Version {
	if v, err := slurmconf.ParseVersion(st.Version); err == nil {
		return v
	}
	return slurmconf.Version{Major: 22, Minor: 5}
}

// slurmNodeOf is a compute node's slurm.conf entry from what its agent reported, capped at its
// instance type's size (on the local provider every node sees the host's CPUs and memory).
// RealMemory keeps a tenth back for the operating system, as HyperPod's sample configuration
// does, so slurmd never registers with less than slurm.conf promises.
func confNodeOf(n *store.Node, partition string) ConfNode {
	inv := n.Details.Inventory
	cpus, mem := int(inv.CPUs), inv.MemoryMiB
	if it, ok := topology.Lookup(n.InstanceType); ok {
		cpus, mem = min(cpus, it.VCPUs), min(mem, it.MemoryMiB)
	}
	sn := ConfNode{Name: orchestrator.NodeName(n), Addr: n.Details.PrivateIP, CPUs: max(cpus, 1), RealMemory: max(mem*9/10, 1),
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

// MayStart implements orchestrator.Round: a node whose agent registered may start configuring
// once the roles are known, and for a Slurm node once the configuration is rendered and lists
// every compute node coming up (each has reported its inventory), so the first slurm.conf is
// the whole cluster's. A compute node joining a running slurmctld (a scale-up) starts once
// slurmctld has a configuration that lists it: HyperPod's lifecycle scripts start slurmd
// configless (slurmd --conf-server), which asks slurmctld for its configuration at once and
// exits when it is not in it (TestSlurmVersions' configless scale-up, on a busy machine).
func (r *round) MayStart(n *store.Node) bool {
	if !r.ok {
		return false
	}
	if r.role(n) == "" {
		return true
	}
	if r.sl.Hash == "" {
		return false
	}
	for _, m := range r.nodes {
		if r.role(m) == "compute" && m.Details.Phase == store.PhaseBooting && m.Details.Inventory == nil && m.Details.PrivateIP != "" {
			return false
		}
	}
	if r.role(n) == "compute" && r.sl.ctldRuns() && !slices.Contains(r.sl.AppliedNodes, orchestrator.NodeName(n)) {
		return false
	}
	return true
}

// ctldRuns says whether slurmctld has started with a configuration of the cluster: it started
// (CtldHash), or one was applied (AppliedNodes). Not Applied, which is "" again while a newer
// rendering awaits its apply (the files of a scale-up written to the running nodes): a joining
// node let through then started its configless slurmd against a slurmctld that did not list it
// yet, which exited ("Unable to determine this slurmd's NodeName"), and hale's own slurmd took
// the node (TestSlurmVersions' configless scale-up, 3 of about 15 full runs).
func (st *State) ctldRuns() bool { return st.CtldHash != "" || len(st.AppliedNodes) > 0 }

// blockHash names hale's block of a slurm.conf: the node set and partitions slurmctld reads
// only when it starts.
func blockHash(conf string) string { return slurmconf.Hash(slurmconf.BlockOf(conf)) }

// slurmHash names a rendering of the cluster's Slurm files: slurm.conf and gres.conf as given,
// with the state's topology, munge key and generation. Every rendering is named by it (a merge
// of the operator's edits too), so an unchanged rendering is never written again.
func renderHash(conf, gres string, st *State, cl *store.Cluster) string {
	return slurmconf.Hash(conf, gres, st.Topology, string(st.MungeKey), fmt.Sprint(cl.State.UpdateGeneration))
}
