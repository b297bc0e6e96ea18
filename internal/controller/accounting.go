package controller

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/slurm"
	"github.com/haleproject/hale/internal/store"
)

// Slurm accounting (docs/slurm.md, "Accounting"): slurmdbd and MariaDB run on the controller
// node, as HyperPod's sample lifecycle scripts set them up, and slurm.conf's accounting lines
// are part of hale's block. A cluster's accounting is decided with its first rendering
// (decideAccounting). The controller starts MariaDB and slurmdbd before its lifecycle scripts,
// so their database is made meanwhile, and starts slurmctld once slurmdbd answers
// (waitAccounting): slurmctld 22.05 exits at its first start when slurmdbd does not. If it does
// not answer in time, accounting goes off so that slurmctld runs and jobs run; hale turns it on
// again once slurmdbd answers (accountingBack), and slurmctld restarts to use it.

// accountingRetry is how often hale looks again whether slurmdbd answers while accounting is
// off.
const accountingRetry = 10 * time.Second

// accountingMissing says which of the programs accounting needs this machine lacks ("" when it
// has them all). The local provider's nodes run the host's programs.
var accountingMissing = sync.OnceValue(func() string {
	var missing []string
	for _, p := range []string{"mariadbd", "mariadb-install-db", "slurmdbd"} {
		if _, err := exec.LookPath(p); err != nil {
			if _, err := os.Stat("/usr/sbin/" + p); err != nil { // not on a non-root PATH
				missing = append(missing, p)
			}
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("this machine has no %s (Debian's mariadb-server and slurmdbd; scripts/setup.sh installs them)", strings.Join(missing, ", "))
})

// decideAccounting turns accounting on for a cluster whose configuration is rendered for the
// first time, or records (with a Warn event) why it cannot be.
func (r *round) decideAccounting(st *store.SlurmState) error {
	if st.Hash != "" || st.Accounting || st.AccountingOff != "" {
		return nil
	}
	if why := accountingMissing(); why != "" {
		st.AccountingOff = why
		return r.clusterEvent(api.ClusterEventLevelWarn, "Slurm accounting is off: %s; sacct will say so.", why)
	}
	st.Accounting = true
	return nil
}

// accountingOf reads whether node n runs the accounting daemons (it is a controller node and
// accounting is on, or off for a reason hale may mend) and whether accounting is on.
func (c *Controller) accountingOf(ctx context.Context, n *store.Node) (run, on bool, err error) {
	err = c.st.Read(ctx, func(tx store.Tx) error {
		cl, err := tx.ClusterByID(n.ClusterID)
		if err != nil {
			return err
		}
		st := cl.State.Slurm
		if st == nil || roleIn(st, n.GroupName) != "controller" {
			return nil
		}
		on = st.Accounting
		run = on || (st.AccountingOff != "" && accountingMissing() == "")
		return nil
	})
	return run, on, err
}

// waitAccounting returns once slurmctld may start on controller node n: at once without
// accounting, or when slurmdbd answers. When slurmdbd does not answer within
// slurm.AccountingWait, it turns accounting off and returns once the node holds a slurm.conf
// without it.
func (c *Controller) waitAccounting(ctx context.Context, n *store.Node) error {
	_, on, err := c.accountingOf(ctx, n)
	if err != nil {
		return c.setupErr(n, "reading the cluster", err)
	}
	if !on {
		return nil
	}
	start := time.Now()
	_, err = c.runOn(ctx, n.InstanceID, slurm.WaitDbd(slurm.AccountingWait), time.Duration(slurm.AccountingWait+10)*time.Second)
	if err == nil {
		c.log.Info("slurmdbd answers", "cluster_id", n.ClusterID, "node", n.LogicalID, "waited", time.Since(start).Round(time.Millisecond))
		return nil
	}
	if !c.cfg.Agents.Connected(n.InstanceID) || ctx.Err() != nil {
		return errAgentGone
	}
	why := fmt.Sprintf("slurmdbd on %s did not answer within %d s (its logs: /var/log/slurm/slurmdbd.log, /var/log/mysql/error.log)", slurmName(n), slurm.AccountingWait)
	c.nodeTx(ctx, n.ClusterID, n.LogicalID, func(tx store.Tx, cl *store.Cluster, _ *store.Node) error {
		st := cl.State.Slurm
		if st == nil || !st.Accounting {
			return nil
		}
		st.Accounting, st.AccountingOff = false, why
		cl.UpdatedAt = c.now()
		if err := tx.UpdateCluster(cl); err != nil {
			return err
		}
		return clusterEventTx(tx, cl, api.ClusterEventLevelWarn,
			"Slurm accounting is off: %s. slurmctld starts without it; hale turns accounting on when slurmdbd answers.", why)
	})
	c.Enqueue(n.ClusterID)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		ready, current := false, true
		err := c.st.Read(ctx, func(tx store.Tx) error {
			cl, err := tx.ClusterByID(n.ClusterID)
			if err != nil {
				return err
			}
			m, err := tx.NodeByLogicalID(n.ClusterID, n.LogicalID)
			if err != nil {
				return err
			}
			st := cl.State.Slurm
			current = m.InstanceID == n.InstanceID && m.Details.Phase == store.PhaseConfiguring
			ready = st != nil && !st.Accounting && m.Details.SlurmConf == st.Hash
			return nil
		})
		switch {
		case err != nil:
			return c.setupErr(n, "reading the cluster", err)
		case !current:
			return errAgentGone
		case ready:
			return nil
		}
		select {
		case <-tick.C:
			if !c.cfg.Agents.Connected(n.InstanceID) {
				return errAgentGone
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// accountingBack turns accounting on again once slurmdbd answers on the running controller; the
// next rendering has the accounting lines, and slurmctld restarts with them (hale's block
// changed). It looks once per accountingRetry.
func (c *Controller) accountingBack(ctx context.Context, clusterID, ctlInstance string) {
	if _, err := c.runOn(ctx, ctlInstance, slurm.WaitDbd(0), 10*time.Second); err != nil {
		select {
		case <-ctx.Done():
		case <-time.After(accountingRetry):
		}
		return
	}
	err := c.st.Write(ctx, func(tx store.Tx) error {
		cl, err := tx.ClusterByID(clusterID)
		if err != nil {
			return err
		}
		st := cl.State.Slurm
		if st == nil || st.Accounting || st.AccountingOff == "" {
			return nil
		}
		st.Accounting, st.AccountingOff = true, ""
		cl.UpdatedAt = c.now()
		if err := tx.UpdateCluster(cl); err != nil {
			return err
		}
		return clusterEventTx(tx, cl, api.ClusterEventLevelInfo, "Slurm accounting is on: slurmdbd answers on the controller; slurmctld restarts to use it.")
	})
	if err != nil && ctx.Err() == nil {
		c.log.Error("turning Slurm accounting on", "cluster_id", clusterID, "error", err)
	}
}
