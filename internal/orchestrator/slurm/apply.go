package slurm

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/plural"
	"github.com/haleproject/hale/internal/store"
)

// Steps implements orchestrator.Round: it starts the Slurm work of the round: file syncs, the
// apply, the poll.
func (r *round) Steps() error {
	r.startMungeChecks()
	if r.sl == nil || r.sl.Hash == "" {
		return nil
	}
	st, s := r.sl, r.s
	var ctl *store.Node
	synced := true
	for _, n := range r.nodes {
		role := r.role(n)
		if role == "" || (n.Details.Phase != store.PhaseConfiguring && n.Details.Phase != store.PhaseJoining && n.Details.Phase != store.PhaseReady) || !s.h.Connected(n.InstanceID) {
			continue
		}
		if role == "controller" && n.Details.Phase == store.PhaseReady && !n.Details.Unreachable && ctl == nil {
			ctl = n
		}
		if r.recs[n.LogicalID].conf(n) != st.Hash {
			synced = false
			clusterID, logicalID := r.cl.ID, n.LogicalID
			r.r.Go(jobFiles, n.InstanceID, func(ctx context.Context) {
				if err := s.syncFiles(ctx, clusterID, logicalID); err != nil && ctx.Err() == nil {
					s.log.Warn("writing Slurm files", "cluster_id", clusterID, "node", logicalID, "error", err)
				}
			})
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
		// A new node set or partitions (hale's block) need slurmctld restarted before Slurm
		// 23.11; from 23.11 scontrol reconfigure takes them, as it takes every other setting.
		clusterID, inst, hash, members := r.cl.ID, ctl.InstanceID, st.Hash, st.CtldHash != blockHash(st.Conf)
		restart := members
		if v, err := slurmconf.ParseVersion(st.Version); err == nil && v.ReconfiguresNodes() {
			restart = false
		}
		r.r.Go(jobApply, clusterID, func(ctx context.Context) {
			s.apply(ctx, clusterID, inst, hash, members, restart, names)
		})
	}
	acct := r.accountingNode(ctl)
	switch {
	case acct == nil:
		// A multi-head cluster's primary is away, and its slurmdbd with it (slurmctld keeps the
		// records meanwhile): there is nothing to look at.
	case !st.Accounting && st.AccountingOff != "" && accountingMissing() == "":
		clusterID, inst := r.cl.ID, acct.InstanceID
		r.r.Go(jobAccounting, clusterID, func(ctx context.Context) {
			s.accountingBack(ctx, clusterID, inst)
		})
	case st.Accounting && st.Applied == st.Hash && s.acctLooks.Due(r.cl.ID, r.now):
		clusterID, inst, name := r.cl.ID, acct.InstanceID, orchestrator.NodeName(acct)
		r.r.Go(jobAccounting, clusterID, func(ctx context.Context) {
			s.watchAccounting(ctx, clusterID, inst, name)
		})
	}
	if s.polls.Due(r.cl.ID, r.now) {
		clusterID, inst := r.cl.ID, ctl.InstanceID
		r.r.Go(jobPoll, clusterID, func(ctx context.Context) {
			s.poll(ctx, clusterID, inst)
		})
	}
	return nil
}

// nodeLock serialises the Slurm file writes to one instance, so the last write is the newest.
func (s *Slurm) nodeLock(instanceID string) func() {
	s.mu.Lock()
	l := s.fileLocks[instanceID]
	if l == nil {
		l = make(chan struct{}, 1)
		s.fileLocks[instanceID] = l
	}
	s.mu.Unlock()
	l <- struct{}{}
	return func() { <-l }
}

// readConf reads slurm.conf on an instance. A command's result carries only the last lines of
// its output (the agent's tail), so the file comes as one line of base64: read with cat, a
// slurm.conf of more than 40 lines lost its head, which then looked like drift.
func (s *Slurm) readConf(ctx context.Context, instanceID string) (string, error) {
	out, err := s.h.Run(ctx, instanceID, slurmconf.ReadConf(), 10*time.Second)
	if err != nil {
		return "", err
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", slurmconf.ConfPath, err)
	}
	return string(b), nil
}

// syncFiles writes the cluster's current munge key, slurm.conf and gres.conf to a node
// (atomically, by its agent) and records the rendering the node now holds. On the controller,
// an operator's edits to slurm.conf since hale last wrote it are first merged (strategy
// Merge) or discarded with a warning event (Managed, Overwrite).
func (s *Slurm) syncFiles(ctx context.Context, clusterID, logicalID string) error {
	var st *State
	var n *store.Node
	var rec *NodeRecord
	var strategy api.ClusterSlurmConfigStrategy
	read := func() error {
		return s.h.Store().Read(ctx, func(tx store.Tx) error {
			cl, err := tx.ClusterByID(clusterID)
			if err != nil {
				return err
			}
			strategy = Strategy(&cl.Spec)
			if st, err = loadState(tx, clusterID); err != nil {
				return err
			}
			if n, err = tx.NodeByLogicalID(clusterID, logicalID); err != nil {
				return err
			}
			rec, err = loadNode(tx, clusterID, logicalID)
			return err
		})
	}
	if err := read(); err != nil {
		return err
	}
	unlock := s.nodeLock(n.InstanceID)
	defer unlock()
	if err := read(); err != nil { // what it is now that this write is the only one
		return err
	}
	if st == nil || st.Hash == "" {
		return nil
	}
	if roleIn(st, n.GroupName) == "controller" && rec.conf(n) != "" {
		live, err := s.readConf(ctx, n.InstanceID)
		if err != nil {
			return err
		}
		if drift := slurmconf.OperatorDrift(st.Conf, live); len(drift) > 0 {
			var refused []slurmconf.Problem
			if strategy == api.ClusterSlurmConfigStrategyMerge {
				// What a merge would make is read by Slurm first: a line that does not parse
				// is refused here, before any daemon reads it.
				if refused, _, err = s.checkConf(ctx, n.InstanceID, slurmconf.MergeInto(live, st.Conf)); err != nil {
					return err
				}
			}
			if len(refused) > 0 {
				if err := s.refuseEdits(ctx, clusterID, n.InstanceID, st.Hash, live, refused); err != nil {
					return err
				}
			} else {
				merged, err := s.operatorEdits(ctx, clusterID, st.Hash, live, drift)
				if err != nil || merged {
					return err // a merge made a new rendering: the next round writes it
				}
			}
		}
	}
	// hale's own rendering is read by this node's Slurm before its daemons may read it.
	problems, known, err := s.checkConf(ctx, n.InstanceID, st.Conf)
	if err != nil {
		return err
	}
	if known && len(problems) > 0 {
		return s.refuseRendering(ctx, clusterID, st.Conf, problems)
	}
	files := []*agentproto.File{
		{Path: slurmconf.MungeKey, Content: st.MungeKey, Mode: 0o400},
		{Path: slurmconf.ConfPath, Content: []byte(st.Conf), Mode: 0o644},
		{Path: slurmconf.GresPath, Content: []byte(st.Gres), Mode: 0o644},
	}
	if roleIn(st, n.GroupName) == "controller" {
		// slurmdbd's: only the controller runs it (and it reads it only with mode 0600).
		files = append(files, &agentproto.File{Path: slurmconf.DbdConfPath, Content: []byte(slurmconf.DbdConf), Mode: 0o600})
	}
	switch {
	case st.Topology != "" && st.TopologyYAML:
		// topology.conf empties: a cluster's first rendering, before its controller said which
		// Slurm it runs, may have written one (for 22.05), which would otherwise stay beside
		// the topology.yaml that Slurm reads instead.
		files = append(files, &agentproto.File{Path: slurmconf.TopologyYAMLPath, Content: []byte(st.Topology), Mode: 0o644},
			&agentproto.File{Path: slurmconf.TopologyPath, Content: []byte(slurmconf.TopologyConfUnused), Mode: 0o644})
	case st.Topology != "":
		files = append(files, &agentproto.File{Path: slurmconf.TopologyPath, Content: []byte(st.Topology), Mode: 0o644})
	}
	r, err := s.h.Do(ctx, n.InstanceID, &agentproto.Command{Id: fmt.Sprintf("slurm-files-%s-%d", st.Hash, time.Now().UnixNano()), Ephemeral: true,
		Kind: &agentproto.Command_WriteFiles{WriteFiles: &agentproto.WriteFiles{Files: files}}}, 15*time.Second)
	if err != nil {
		return err
	}
	if r.Error != "" {
		return fmt.Errorf("writing the Slurm files: %s", r.Error)
	}
	hash, instanceID := st.Hash, n.InstanceID
	s.h.NodeTx(ctx, clusterID, logicalID, func(tx store.Tx, cl *store.Cluster, n *store.Node) error {
		if n.InstanceID != instanceID {
			return nil // replaced meanwhile: the new instance holds none of it
		}
		rec, err := loadNode(tx, clusterID, logicalID)
		if err != nil {
			return err
		}
		had := rec.conf(n)
		rec.Conf, rec.ConfInstance = hash, n.InstanceID
		if err := putNode(tx, clusterID, logicalID, rec); err != nil {
			return err
		}
		st, err := loadState(tx, clusterID)
		if err != nil || st == nil {
			return err
		}
		if had != "" && had != hash && (n.Details.Phase == store.PhaseReady || n.Details.Phase == store.PhaseJoining) {
			// Running daemons read the new files only when told to.
			st.Applied = ""
			return putState(tx, clusterID, st)
		}
		return nil
	})
	return nil
}

// operatorEdits handles edits an operator made to slurm.conf on the controller: Merge keeps
// them (a new rendering; merged is true), Managed and Overwrite write over them, with a Warn
// event naming the lines.
func (s *Slurm) operatorEdits(ctx context.Context, clusterID, hash, live string, drift []string) (merged bool, err error) {
	err = s.updateState(ctx, clusterID, "", func(tx store.Tx, cl *store.Cluster, st *State) (bool, error) {
		if st.Hash != hash {
			return false, nil
		}
		strategy := Strategy(&cl.Spec)
		if strategy != api.ClusterSlurmConfigStrategyMerge {
			return false, s.h.Event(tx, cl, nil, api.ClusterEventLevelWarn, "slurm.conf: changes made on the controller outside hale were overwritten (SlurmConfigStrategy %s): %s.", strategy, strings.Join(drift, "; "))
		}
		st.Conf = slurmconf.MergeInto(live, st.Conf)
		st.Hash = renderHash(st.Conf, st.Gres, st, cl)
		merged = true
		return true, s.h.Event(tx, cl, nil, api.ClusterEventLevelInfo, "slurm.conf: the operator's changes on the controller were merged (SlurmConfigStrategy Merge): %s.", strings.Join(drift, "; "))
	})
	return merged, err
}

// apply has Slurm read the rendering every node now holds: slurmctld restarts first when its
// node set or partitions changed (members) on a Slurm before 23.11 (restart: 22.05 reads a new
// node set only at start), then `scontrol reconfigure` makes slurmctld and every slurmd read the
// files again (and, from 23.11, takes the new node set without a restart).
func (s *Slurm) apply(ctx context.Context, clusterID, ctlInstance, hash string, members, restart bool, names []string) {
	start := time.Now()
	err := func() error {
		if restart {
			r, err := s.h.Do(ctx, ctlInstance, &agentproto.Command{Id: fmt.Sprintf("slurmctld-restart-%s-%d", hash, time.Now().UnixNano()), Ephemeral: true,
				Kind: &agentproto.Command_RestartDaemon{RestartDaemon: &agentproto.RestartDaemon{Name: "slurmctld"}}}, 30*time.Second)
			if err != nil {
				return err
			}
			if r.Error != "" {
				return fmt.Errorf("restarting slurmctld: %s", r.Error)
			}
		}
		if _, err := s.h.Run(ctx, ctlInstance, slurmconf.WaitUp(), slurmconf.StartWait+15*time.Second); err != nil {
			return err
		}
		if restart && len(names) > 0 {
			// Its start over (its configuration read) before it is asked to reconfigure.
			if _, err := s.h.Run(ctx, ctlInstance, slurmconf.WaitListed(names...), slurmconf.StartWait+15*time.Second); err != nil {
				return err
			}
		}
		// Just after a restart slurmctld may answer a ping yet drop the reconfigure request
		// ("Zero Bytes were transmitted or received"): try a few times.
		var err error
		for try := 0; try < 5; try++ {
			if _, err = s.h.Run(ctx, ctlInstance, slurmconf.Reconfigure(), 20*time.Second); err == nil || ctx.Err() != nil {
				break
			}
			s.h.Sleep(ctx, 300*time.Millisecond)
		}
		if err != nil || len(names) == 0 {
			return err
		}
		// 24.11 and later answer the reconfigure, then start again (a new process image): the
		// configuration counts as applied, and a joining node's lifecycle scripts start (a
		// configless slurmd among them, asking slurmctld for its files), once the new one has
		// read it.
		_, err = s.h.Run(ctx, ctlInstance, slurmconf.WaitListed(names...), slurmconf.StartWait+15*time.Second)
		return err
	}()
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("applying the Slurm configuration; will retry", "cluster_id", clusterID, "error", err)
			s.applyFailed(ctx, clusterID, hash, err)
			s.h.Sleep(ctx, time.Second) // the round that follows tries again
		}
		return
	}
	took := time.Since(start)
	s.updateState(ctx, clusterID, "recording the Slurm configuration", func(tx store.Tx, cl *store.Cluster, st *State) (bool, error) {
		if st.Hash != hash {
			return false, nil // a newer rendering: it is applied next
		}
		if members {
			st.CtldHash = blockHash(st.Conf)
		}
		prev := st.AppliedNodes
		st.Applied, st.AppliedNodes, st.ApplyError = hash, names, ""
		how := "scontrol reconfigure"
		switch {
		case restart:
			how = "slurmctld restarted: Slurm " + releaseOf(st.Version) + " reads a new node set only at its start; scontrol reconfigure"
		case members:
			how = "scontrol reconfigure, which takes the new node set on Slurm " + releaseOf(st.Version) + ": slurmctld not restarted"
		}
		added, removed := setDiff(names, prev), setDiff(prev, names)
		change := ""
		if len(added) > 0 {
			change += "; joined: " + slurmconf.Hostlist(added)
		}
		if len(removed) > 0 {
			change += "; left: " + slurmconf.Hostlist(removed)
		}
		return true, s.h.Event(tx, cl, nil, api.ClusterEventLevelInfo, "Slurm configuration applied (%s, %.2fs): %s %s%s.",
			how, took.Seconds(), plural.Count(len(names), "compute node", "compute nodes"), slurmconf.Hostlist(names), change)
	})
}

// applyFailed records why a rendering could not be applied, with a Warn event the first
// time each reason is seen (hale retries every round).
func (s *Slurm) applyFailed(ctx context.Context, clusterID, hash string, cause error) {
	s.updateState(ctx, clusterID, "recording a Slurm apply failure", func(tx store.Tx, cl *store.Cluster, st *State) (bool, error) {
		if st.Hash != hash || st.ApplyError == cause.Error() {
			return false, nil
		}
		st.ApplyError = cause.Error()
		return true, s.h.Event(tx, cl, nil, api.ClusterEventLevelWarn, "Slurm configuration not applied yet (hale retries): %v.", cause)
	})
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

// poll reads slurmctld's view of the nodes and records each node's state and reason,
// with an event when a node leaves or returns to service. A compute node an operator set to
// fail, down or drain with the reason Action:Replace or Action:Reboot (HyperPod's convention,
// exact and case-sensitive) gets the request recorded for the repair flow and is drained;
// a node hale itself took down (reason "hale: ...") is resumed once it is Running again.
func (s *Slurm) poll(ctx context.Context, clusterID, ctlInstance string) {
	// The states below are no older than this, on the controller's clock, which is what a
	// repair's times are on (JobsLeft, Released compare them).
	readAt := s.h.Now()
	out, err := s.h.Run(ctx, ctlInstance, slurmconf.ShowNodes(), 10*time.Second)
	if err != nil {
		return
	}
	states := slurmconf.ParseShowNodes(out)
	type act struct{ argv []string }
	var acts []act
	var lost []*store.Node // not responding in Slurm while their agents answer
	ctlName := ""
	err = s.h.Store().Write(ctx, func(tx store.Tx) error {
		acts, lost = nil, nil
		cl, st, nodes, recs, err := loadAll(tx, clusterID)
		if err != nil || st == nil {
			return err
		}
		for _, n := range nodes {
			if n.InstanceID == ctlInstance {
				ctlName = orchestrator.NodeName(n)
			}
			if roleIn(st, n.GroupName) != "compute" || !slurmsOwn(n) {
				continue
			}
			name := orchestrator.NodeName(n)
			ns, ok := states[name]
			if !ok {
				// Not in Slurm (any more): a failed replacement left the node without a host,
				// and slurm.conf without its name. A state kept from before would have the
				// repair flow drain a name Slurm does not know, forever ("Invalid node name
				// specified"). An answer that lists no node at all says nothing.
				if rec := recs[n.LogicalID]; rec != nil && rec.State != "" && len(states) > 0 {
					rec.State, rec.Reason = "", ""
					if err := s.saveNode(tx, n, rec); err != nil {
						return err
					}
				}
				continue
			}
			rec := recs[n.LogicalID]
			if rec == nil {
				rec = &NodeRecord{}
			}
			changed := ns.State != rec.State || ns.Reason != rec.Reason
			wasOut, isOut, back := rec.wasOut(), outOfService(ns.State), acceptsWork(ns.State)
			prevReason := rec.Reason
			rec.State, rec.Reason = ns.State, ns.Reason
			if out := (wasOut || isOut) && !back; out != rec.Out {
				rec.Out, changed = out, true
			}
			var events []func() error
			// hale's own take-out of the node's previous instance (a replacement, a re-image)
			// has its event already ("taken out of service by hale"); the new instance is not
			// to blame for it, and it ends when the new one joins.
			const takeOut = slurmconf.HaleReason + "replacing instance "
			takenOutBefore := strings.HasPrefix(ns.Reason, takeOut) && !strings.HasPrefix(ns.Reason, takeOut+n.InstanceID+" ")
			goesOut := isOut && (!wasOut || prevReason != ns.Reason) && !takenOutBefore
			if changed && (goesOut || wasOut && back) {
				level, what := api.ClusterEventLevelInfo, "is back in service"
				if isOut {
					level, what = api.ClusterEventLevelWarn, "is out of service"
				}
				desc := fmt.Sprintf("Slurm node %s (instance %s, group %s) %s: %s", name, n.InstanceID, n.GroupName, what, strings.ToLower(ns.State))
				if ns.Reason != "" {
					desc += ", reason: " + ns.Reason
				}
				events = append(events, func() error { return s.h.Event(tx, cl, n, level, "%s.", desc) })
			}
			if fault := slurmVerdict(ns.Reason); fault != "" && isOut && ns.Reason != prevReason && n.Details.Phase == store.PhaseReady {
				// Slurm took the node out itself, for a reason that says the machine is sick.
				evidence := fmt.Sprintf("slurmctld has node %s %s, reason: %s", name, strings.ToLower(ns.State), ns.Reason)
				events = append(events, func() error { return s.h.Finding(tx, cl, n, fault, evidence) })
			}
			req := ns.RepairRequest()
			haleDrain := rec.HaleDrain != "" && ns.Reason == rec.HaleDrain
			// States read before hale recorded its drain cannot show it yet: a poll that
			// read them then and stores them now must not forget the drain, or the next poll,
			// which sees it, takes it for an operator's request (a cancelled heartbeat repair's
			// node was replaced so: TestOutagesCostNoNode, TestHaleDrainReadBeforeIsKept).
			if rec.HaleDrain != "" && !haleDrain && ns.State != "" && readAt.After(rec.HaleDrainAt) {
				changed = true
				rec.HaleDrain, rec.HaleDrainAt = "", time.Time{} // Slurm no longer shows hale's drain
			}
			switch {
			case req != "" && haleDrain:
				// hale's own drain of a repair, under way, ended or cancelled: not an
				// operator's request.
			case req != "" && rec.RepairRequest != req && n.Details.RepairStatus != "":
				// hale's own drain of a repair under way, not an operator's request.
				changed = true
				rec.RepairRequest = req
			case req != "" && rec.RepairRequest != req && n.Details.Phase == store.PhaseReady:
				changed = true
				rec.RepairRequest = req
				events = append(events, func() error {
					if err := s.h.Event(tx, cl, n, api.ClusterEventLevelWarn,
						"Slurm node %s (instance %s) is marked Action:%s by an operator (state %s): hale drains it and starts the %s.",
						name, n.InstanceID, req, strings.ToLower(ns.State), strings.ToLower(req)); err != nil {
						return err
					}
					return s.h.RequestRepair(tx, cl, n, store.RepairAction(req), "Slurm reason Action:"+req)
				})
			case req == "" && rec.RepairRequest != "" && !strings.HasPrefix(ns.Reason, "Action:"):
				changed = true
				old := rec.RepairRequest
				rec.RepairRequest = ""
				events = append(events, func() error {
					return s.h.Event(tx, cl, n, api.ClusterEventLevelInfo, "Slurm node %s: the Action:%s request was withdrawn (state %s).", name, old, strings.ToLower(ns.State))
				})
			}
			if n.Details.Phase == store.PhaseReady && !n.Details.Unreachable && (strings.HasPrefix(ns.Reason, slurmconf.HaleReason) || haleDrain && n.Details.RepairStatus == "") &&
				isOut && !ns.Has("NOT_RESPONDING") && s.h.Connected(n.InstanceID) {
				// hale's own reason with no repair left to need it (a cancelled repair's
				// drain): back in service, retried until Slurm shows it.
				acts = append(acts, act{slurmconf.Resume(name)})
			}
			if n.Details.Phase == store.PhaseReady && !n.Details.Unreachable && notResponding(ns.State, ns.Reason) && s.h.Connected(n.InstanceID) {
				lost = append(lost, n)
			}
			// A node recorded before its status line was kept (an upgrade) gets it too.
			if changed || statusLine(n, rec) != n.Details.OrchestratorStatus {
				if err := s.saveNode(tx, n, rec); err != nil {
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
			s.log.Error("recording Slurm node states", "cluster_id", clusterID, "error", err)
		}
		return
	}
	s.mu.Lock()
	if readAt.After(s.polled[clusterID]) {
		s.polled[clusterID] = readAt
	}
	s.mu.Unlock()
	for _, a := range acts {
		if _, err := s.h.Run(ctx, ctlInstance, a.argv, 10*time.Second); err != nil && ctx.Err() == nil {
			s.log.Warn("scontrol", "cluster_id", clusterID, "error", err)
		}
	}
	// Their munge clocks are checked in jobs of their own, which the next round starts: two
	// commands each, which must never hold up the poll (a node slow to answer would delay every
	// state the repairs wait for).
	var due []mungeCheck
	for _, n := range lost {
		if s.mungeChecks.Due(n.InstanceID, s.h.Now()) {
			due = append(due, mungeCheck{node: *n, ctlInstance: ctlInstance, ctlName: ctlName})
		}
	}
	if len(due) > 0 {
		s.mu.Lock()
		s.mungeDue[clusterID] = append(s.mungeDue[clusterID], due...)
		s.mu.Unlock()
		s.h.Enqueue(clusterID)
	}
}

// slurmVerdict is the catalog's fault for a reason Slurm drains a node with by itself when the
// machine is sick ("" for any other reason: an operator's, hale's, a node not responding,
// which hale's own heartbeats judge).
func slurmVerdict(reason string) string {
	r := strings.ToLower(reason)
	switch {
	case strings.HasPrefix(r, "kill task failed"):
		return "slurm.kill_task_failed"
	case strings.HasPrefix(r, "prolog error"), strings.HasPrefix(r, "epilog error"), strings.HasPrefix(r, "prolog failed"), strings.HasPrefix(r, "epilog failed"):
		return "slurm.prolog_failed"
	case strings.HasPrefix(r, "low realmemory"), strings.HasPrefix(r, "low socket"), strings.HasPrefix(r, "low cpus"), strings.HasPrefix(r, "low tmpdisk"):
		return "slurm.low_resources"
	}
	return ""
}

// slurmsOwn reports whether the name the node has now is its current instance's in Slurm: not
// while a replacement is on its way (until it is set up, its name and address may still be
// the previous instance's, another host's on the static provider), nor while it goes.
func slurmsOwn(n *store.Node) bool {
	switch n.Details.Phase {
	case store.PhaseJoining, store.PhaseReady, store.PhaseFailed:
		return true
	}
	return false
}

// outOfService: the node takes no new jobs (down, drained or draining, failed).
func outOfService(state string) bool {
	s := slurmconf.NodeState{State: state}
	switch s.Base() {
	case "down", "drain", "draining", "fail":
		return true
	}
	return s.Has("DRAIN") || s.Has("FAIL")
}

// saveNode stores node n's record and the one line DescribeClusterNode shows of it.
func (s *Slurm) saveNode(tx store.Tx, n *store.Node, rec *NodeRecord) error {
	if err := putNode(tx, n.ClusterID, n.LogicalID, rec); err != nil {
		return err
	}
	if line := statusLine(n, rec); line != n.Details.OrchestratorStatus {
		n.Details.OrchestratorStatus = line
		return tx.UpdateNode(n)
	}
	return nil
}

// statusLine is Slurm's view of the node (scontrol show node) in sinfo's lowercase words.
func statusLine(n *store.Node, rec *NodeRecord) string {
	if rec.State == "" {
		return ""
	}
	line := fmt.Sprintf("Slurm node %s: %s", orchestrator.NodeName(n), strings.ToLower(rec.State))
	if rec.Reason != "" {
		line += " (reason: " + rec.Reason + ")"
	}
	if rec.RepairRequest != "" {
		line += "; Action:" + rec.RepairRequest + " requested"
	}
	return line
}

// releaseOf is the release of a version slurmctld -V printed ("22.05"), or "of this cluster"
// when it is not known.
func releaseOf(version string) string {
	if v, err := slurmconf.ParseVersion(version); err == nil {
		return v.String()
	}
	return "of this cluster"
}
