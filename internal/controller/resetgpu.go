package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/store"
)

// ResetGPU, NVIDIA's RESET_GPU (DESIGN.md §7): the repair asks the node's agent to reset the
// GPU the finding named (agentproto.ResetGPU: nvidia-smi -r -i once no process holds it; a
// simulated GPU is reset by the agent). A reset that worked puts the node back in service
// without a reboot; one that failed or cannot be done (a process holds the GPU, no nvidia-smi,
// a virtual machine, an agent older than capability 8, a finding that names no GPU) makes the
// repair a Reboot, as health.Action.EffectiveOn says. The outcome is on the repair's timeline
// and in an event.

// resetTimeout is how long the agent has to answer a reset (nvidia-smi -r takes seconds).
const resetTimeout = 2 * time.Minute

// Repair.Reset's outcomes: "" until the agent answered, then resetOK or resetFailed + why.
const (
	resetOK     = "succeeded"
	resetFailed = "failed: "
)

// gpuName is how events name the repair's GPU: "GPU 3 (0000:3b:00)", "GPU 0000:3b:00".
func gpuName(rp *store.Repair) string {
	switch {
	case rp.GPU >= 0 && rp.PCI != "":
		return fmt.Sprintf("GPU %d (%s)", rp.GPU, rp.PCI)
	case rp.GPU >= 0:
		return fmt.Sprintf("GPU %d", rp.GPU)
	}
	return "GPU " + rp.PCI
}

// resetGPU takes a ResetGPU repair one step: ask the agent, wait for its answer, then resume
// the node or fall back to a reboot.
func (r *round) resetGPU(rp *store.Repair, n *store.Node) error {
	switch {
	case rp.Reset == "" && rp.GPU < 0 && rp.PCI == "":
		rp.Reset = resetFailed + "the finding names no GPU"
	case rp.Reset == "":
		r.work = append(r.work, r.c.background(key(jobResetGPU, rp.ID), r.cl.ID, r.c.askReset(r.cl.ID, rp.ID, n.InstanceID, rp.GPU, rp.PCI)))
		return nil
	}
	if rp.Reset == resetOK {
		what := "ResetGPU of " + gpuName(rp) + " succeeded"
		if err := r.repairTo(rp, n, store.RepairResuming, what); err != nil {
			return err
		}
		return r.nodeEvent(n, api.ClusterEventLevelInfo, "Repair %s of node %s: %s (%s); the node was not rebooted.", rp.ID, n.LogicalID, what, rp.Fault)
	}
	why := strings.TrimPrefix(rp.Reset, resetFailed)
	rp.Action = store.RepairReboot // a reset that did not cure the node is a reboot (health.Action.EffectiveOn)
	if err := r.repairTo(rp, n, store.RepairRepairing, "ResetGPU failed: "+why+"; rebooting"); err != nil {
		return err
	}
	return r.nodeEvent(n, api.ClusterEventLevelWarn, "Repair %s of node %s: ResetGPU of %s failed: %s; rebooting instance %s instead.", rp.ID, n.LogicalID, gpuName(rp), why, n.InstanceID)
}

// askReset is the background job that sends the reset and records the agent's answer on the
// repair (still Repairing, not yet answered). Its command id is the repair's, so an agent that
// ran it already (a server restart) answers from its stored result instead of resetting twice.
func (c *Controller) askReset(clusterID, repairID, instanceID string, gpu int, pci string) func(ctx context.Context) {
	return func(ctx context.Context) {
		outcome := resetOK
		res, err := c.do(ctx, instanceID, &agentproto.Command{Id: "reset-gpu-" + repairID,
			Kind: &agentproto.Command_ResetGpu{ResetGpu: &agentproto.ResetGPU{Index: int32(gpu), Pci: pci}}}, resetTimeout)
		switch {
		case ctx.Err() != nil:
			return // the server stops: the next one asks again
		case err != nil:
			outcome = resetFailed + err.Error()
		case res.Error != "":
			outcome = resetFailed + res.Error
		case res.ExitCode != 0:
			outcome = resetFailed + fmt.Sprintf("exit code %d: %s", res.ExitCode, strings.TrimSpace(errorLines(res.OutputTail, 3)))
		}
		err = c.st.Write(ctx, func(tx store.Tx) error {
			rp, err := tx.Repair(repairID)
			if err != nil || rp.State != store.RepairRepairing || rp.Action != store.RepairResetGPU || rp.Reset != "" {
				return err
			}
			rp.Reset, rp.UpdatedAt = outcome, c.now()
			return tx.PutRepair(rp)
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			c.log.Error("recording a GPU reset", "repair", repairID, "error", err)
		}
	}
}
