package slurm

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// Auto-resume answers (research hyperpod-api-slurm.md §3.7): when a step started with
// `srun --auto-resume=1` fails, srun asks whether any node of the step has a fault. RETRYSTEP
// means yes: the step will be re-run once those nodes are replaced; NONE means the failure is the
// application's, and the step is not retried.
const (
	ResumeRetryStep = "RETRYSTEP"
	ResumeNone      = "NONE"
)

// AutoResumeSettle is how long a diagnosis waits for a fault to show when it finds none at once:
// the step's failure and the node's own report of the fault race (a rank dies with its GPU in
// the same instant the agent reads the Xid), and a dead agent is only known after heartbeats stop.
var AutoResumeSettle = 3 * time.Second

// AutoResume answers a node's AutoResume call about the Slurm nodes of a job step.
func (s *Slurm) AutoResume(ctx context.Context, clusterID string, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error) {
	since := time.UnixMilli(req.StepStartUnixMs)
	if req.Kind == "requeue" {
		return s.autoResumeRequeue(ctx, clusterID, req)
	}
	switch req.Kind {
	case "status":
		return s.autoResumeLook(ctx, clusterID, req, since, false)
	case "implicate":
		return s.implicate(ctx, clusterID, req)
	case "hang":
		return s.hang(ctx, clusterID, req)
	}
	deadline := time.Now().Add(AutoResumeSettle)
	for {
		resp, err := s.autoResumeLook(ctx, clusterID, req, since, true)
		if err != nil {
			return nil, err
		}
		if resp.Action == ResumeRetryStep || time.Now().After(deadline) {
			return resp, s.autoResumeEvent(ctx, clusterID, req, resp)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// autoResumeLook finds, for each named node, its repair opened since the step started (or still
// open). With diagnose it decides the action, records an event and makes a pending reboot a
// replacement: HyperPod always replaces the nodes of an auto-resumed step, so the step comes
// back on a fresh instance rather than on one that failed once already.
func (s *Slurm) autoResumeLook(ctx context.Context, clusterID string, req *agentproto.AutoResumeRequest, since time.Time, diagnose bool) (*agentproto.AutoResumeResponse, error) {
	resp := &agentproto.AutoResumeResponse{Action: ResumeNone}
	changed := false
	// Only a diagnosis may change a repair; the status polls of a waiting srun just read.
	txn := s.h.Store().Read
	if diagnose {
		txn = s.h.Store().Write
	}
	err := txn(ctx, func(tx store.Tx) error {
		resp.Unhealthy, resp.Repairs, changed = nil, nil, false
		cl, err := tx.ClusterByID(clusterID)
		if err != nil {
			return err
		}
		nodes, err := tx.NodesOf(clusterID)
		if err != nil {
			return err
		}
		byName := map[string]*store.Node{}
		for _, n := range nodes {
			byName[orchestrator.NodeName(n)] = n
		}
		open, err := tx.OpenRepairs(clusterID)
		if err != nil {
			return err
		}
		var unknown []string
		var atFault []*store.Repair
		for _, name := range req.Nodes {
			n := byName[name]
			if n == nil {
				unknown = append(unknown, name)
				continue
			}
			rp, err := latestRepair(tx, open, n, since)
			if err != nil {
				return err
			}
			if rp == nil || rp.State == store.RepairCancelled {
				continue
			}
			resp.Unhealthy = append(resp.Unhealthy, name)
			atFault = append(atFault, rp)
			if diagnose && (rp.Action == store.RepairReboot || rp.Action == store.RepairResetGPU) && rp.State.BeforeRepairing() {
				rp.Action = store.RepairReplace
				rp.Timeline = append(rp.Timeline, store.RepairStep{At: s.h.Now(), What: fmt.Sprintf("job %s runs with auto-resume: replace, not reboot", req.JobId)})
				rp.UpdatedAt = s.h.Now()
				if err := tx.PutRepair(rp); err != nil {
					return err
				}
				changed = true
			}
			resp.Repairs = append(resp.Repairs, &agentproto.NodeRepair{Node: name, State: string(rp.State), Action: string(rp.Action),
				Fault: rp.Fault, InService: rp.State == store.RepairDone && rp.InService, InstanceId: n.InstanceID})
		}
		switch {
		case len(resp.Unhealthy) > 0 && cl.Spec.GetNodeRecovery() == api.ClusterNodeRecoveryNone:
			resp.Message = fmt.Sprintf("node %s has a fault, but the cluster's NodeRecovery is None: hale does not repair it, so the step is not retried", strings.Join(resp.Unhealthy, ","))
		case len(resp.Unhealthy) > 0:
			resp.Action = ResumeRetryStep
			resp.Message = fmt.Sprintf("node %s has a fault (%s): the step is retried once it is replaced", strings.Join(resp.Unhealthy, ","), faults(resp.Repairs))
		case len(unknown) > 0:
			resp.Message = fmt.Sprintf("no node of this cluster is named %s", strings.Join(unknown, ","))
		default:
			resp.Message = "no node of the step has a fault: the failure is the application's, and the step is not retried"
		}
		if diagnose && resp.Action == ResumeRetryStep {
			// The job waits for these repairs: its "resumed" report (controller.KindResumed)
			// finds them by it.
			for _, rp := range atFault {
				if !contains(rp.ResumeJobs, req.JobId) {
					rp.ResumeJobs = append(rp.ResumeJobs, req.JobId)
					if err := tx.PutRepair(rp); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if changed {
		s.h.Enqueue(clusterID)
	}
	return resp, err
}

// autoResumeRequeue requeues a job whose step cannot be shrunk and expanded (see hale srun): the
// asking node's agent runs scontrol, so the command outlives the batch script that the requeue
// ends. The job starts again once it has its nodes (the faulty ones stay drained until
// repaired) and Slurm's requeue delay (cred_expire, 10 s in hale's slurm.conf) has passed. That
// delay is kept on purpose: until it passes, slurmd refuses the job's revoked credential, and a
// batch script started earlier on its old batch host fails at once (seen as exit 1, no output).
func (s *Slurm) autoResumeRequeue(ctx context.Context, clusterID string, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error) {
	if _, err := strconv.ParseUint(req.JobId, 10, 32); err != nil {
		return nil, fmt.Errorf("auto-resume: job id %q is not a Slurm job id", req.JobId)
	}
	resp := &agentproto.AutoResumeResponse{Action: "REQUEUE", Unhealthy: req.Nodes}
	script := fmt.Sprintf("scontrol requeue %s", req.JobId)
	if req.NumNodes > 0 {
		// A job shrunk before its expansion failed gets its size back once it is pending.
		script += fmt.Sprintf(` || exit 1
for i in $(seq 100); do [ "$(squeue -h -j %[1]s -o %%T)" = PENDING ] && break; sleep 0.1; done
scontrol update JobId=%[1]s NumNodes=%[2]d`, req.JobId, req.NumNodes)
	}
	if out, err := s.h.Run(ctx, req.InstanceId, []string{"sh", "-c", script}, 30*time.Second); err != nil {
		return nil, fmt.Errorf("requeue job %s: %v %s", req.JobId, err, out)
	}
	resp.Message = fmt.Sprintf("job %s requeued; it starts again once it has its nodes and Slurm's requeue delay has passed", req.JobId)
	return resp, s.autoResumeEvent(ctx, clusterID, req, resp)
}

// autoResumeEvent records the answer as an event on the nodes at fault (or, for NONE, on the
// step's first node), so ListClusterEvents shows why a step was or was not retried.
func (s *Slurm) autoResumeEvent(ctx context.Context, clusterID string, req *agentproto.AutoResumeRequest, resp *agentproto.AutoResumeResponse) error {
	return s.h.Store().Write(ctx, func(tx store.Tx) error {
		cl, nodes, err := clusterNodes(tx, clusterID)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			name := orchestrator.NodeName(n)
			if contains(resp.Unhealthy, name) || (len(resp.Unhealthy) == 0 && len(req.Nodes) > 0 && req.Nodes[0] == name) {
				if err := s.h.Event(tx, cl, n, api.ClusterEventLevelInfo, "Auto-resume: job %s step %s failed on %s; %s: %s.",
					req.JobId, req.StepId, strings.Join(req.Nodes, ","), resp.Action, resp.Message); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// clusterNodes reads a cluster and its nodes.
func clusterNodes(tx store.Tx, clusterID string) (*store.Cluster, []*store.Node, error) {
	cl, err := tx.ClusterByID(clusterID)
	if err != nil {
		return nil, nil, err
	}
	nodes, err := tx.NodesOf(clusterID)
	return cl, nodes, err
}

// latestRepair is the node's open repair, or the last one opened since the step started.
func latestRepair(tx store.Tx, open []*store.Repair, n *store.Node, since time.Time) (*store.Repair, error) {
	for _, rp := range open {
		if rp.LogicalID == n.LogicalID {
			return rp, nil
		}
	}
	rps, err := tx.RepairsOf(n.ClusterID, n.LogicalID, since)
	if err != nil || len(rps) == 0 {
		return nil, err
	}
	return rps[len(rps)-1], nil
}

func faults(rs []*agentproto.NodeRepair) string {
	var f []string
	for _, r := range rs {
		if !contains(f, r.Fault) {
			f = append(f, r.Fault)
		}
	}
	return strings.Join(f, ", ")
}
