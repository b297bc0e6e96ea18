package slurm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/runpolicy"
	"github.com/haleproject/hale/internal/store"
)

// Hangs (docs/autoresume.md, "Run policies"): hale's srun holds a step's output to the job's
// run policy. When the step breaks a rule, srun asks which nodes are to blame ("implicate"),
// climbs the restart ladder itself (internal/runpolicy), and tells the server the rung it took
// ("hang"): the server records it as an event and, on the repair-node rung, opens the repairs.

// stepProcs lists, on one node, the processes of job step job.step that run there:
// slurmstepd sets SLURM_JOB_ID, SLURM_STEP_ID and SLURMD_NODENAME for every task.
func stepProcs(job, step, node string) []string {
	return runpolicy.ProcessProbe("SLURM_JOB_ID="+job, "SLURM_STEP_ID="+step, "SLURMD_NODENAME="+node)
}

// implicate answers kind "implicate": which of the step's nodes are to blame for its hang. A
// node is, when a repair of it opened since the step started (a fault the agent found), when a
// process of the step there is stopped, wedged or dead (runpolicy.Blamed), or when its agent is
// not connected. A node with no process of the step left is not to blame: its rank may have
// finished (a rank that died is in srun's "task N: Exited" lines, which srun reads itself).
func (s *Slurm) implicate(ctx context.Context, clusterID string, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error) {
	look, err := s.autoResumeLook(ctx, clusterID, req, time.UnixMilli(req.StepStartUnixMs), false)
	if err != nil {
		return nil, err
	}
	var nodes []*store.Node
	err = s.h.Store().Read(ctx, func(tx store.Tx) error {
		all, err := tx.NodesOf(clusterID)
		for _, n := range all {
			if slices.Contains(req.Nodes, orchestrator.NodeName(n)) {
				nodes = append(nodes, n)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	type probe struct {
		why  string
		gone bool
	}
	probes := make([]probe, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !s.h.Connected(n.InstanceID) {
				probes[i].gone = true
				return
			}
			out, err := s.h.Run(ctx, n.InstanceID, stepProcs(req.JobId, req.StepId, orchestrator.NodeName(n)), 15*time.Second)
			if err != nil {
				// Not to blame for it: the probe could not look (no ps on the node's image).
				s.log.Warn("looking for a hung step's processes", "node", orchestrator.NodeName(n), "error", err)
				return
			}
			probes[i].why, _ = runpolicy.Blamed(out)
		}()
	}
	wg.Wait()
	// The repairs of nodes with a fault go back with the answer: their nodes are repaired
	// whatever the ladder says, as auto-resume's are.
	resp := &agentproto.AutoResumeResponse{Action: ResumeNone, Repairs: look.Repairs}
	var whys []string
	for i, n := range nodes {
		name, why := orchestrator.NodeName(n), ""
		switch p := probes[i]; {
		case slices.Contains(look.Unhealthy, name):
			why = "has a fault (" + faults(look.Repairs) + ")"
		case p.gone:
			why = "has lost its agent (the node is down or wedged)"
		case p.why != "":
			why = p.why
		}
		if why != "" {
			resp.Unhealthy = append(resp.Unhealthy, name)
			whys = append(whys, name+": "+why)
		}
	}
	resp.Message = "no node of the step is to blame"
	if len(whys) > 0 {
		resp.Message = strings.Join(whys, "; ")
	}
	return resp, nil
}

// hang answers kind "hang": it records the rung srun took as an event on the step's first node
// (and on each node to repair), and on the repair-node rung opens a Replace repair of each node
// in req.Repair that has none, so the step's retry (the auto-resume path) finds it.
func (s *Slurm) hang(ctx context.Context, clusterID string, req *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error) {
	resp := &agentproto.AutoResumeResponse{Action: strings.ToUpper(req.Rung)}
	if req.Rung == string(runpolicy.RepairNode) {
		resp.Action, resp.Unhealthy = ResumeRetryStep, req.Repair
	}
	err := s.h.Store().Write(ctx, func(tx store.Tx) error {
		cl, nodes, err := clusterNodes(tx, clusterID)
		if err != nil {
			return err
		}
		open, err := tx.OpenRepairs(clusterID)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			name := orchestrator.NodeName(n)
			repair := req.Rung == string(runpolicy.RepairNode) && slices.Contains(req.Repair, name)
			first := len(req.Repair) == 0 && len(req.Nodes) > 0 && req.Nodes[0] == name
			if !repair && !first {
				continue
			}
			level := api.ClusterEventLevelWarn
			if err := s.h.Event(tx, cl, n, level, "Run policy: job %s step %s on %s: %s; %s.", req.JobId, req.StepId,
				strings.Join(req.Nodes, ","), req.Message, req.Rung); err != nil {
				return err
			}
			if !repair || slices.ContainsFunc(open, func(rp *store.Repair) bool { return rp.LogicalID == n.LogicalID }) {
				continue
			}
			if cl.Spec.GetNodeRecovery() == api.ClusterNodeRecoveryNone {
				resp.Action = ResumeNone
				resp.Message = fmt.Sprintf("node %s is to blame, but the cluster's NodeRecovery is None: hale does not repair it", name)
				continue
			}
			if err := s.h.RequestRepair(tx, cl, n, store.RepairReplace, fmt.Sprintf("job %s: %s", req.JobId, req.Message)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.h.Enqueue(clusterID)
	if resp.Message == "" {
		resp.Message = "recorded: " + req.Rung
	}
	return resp, nil
}
