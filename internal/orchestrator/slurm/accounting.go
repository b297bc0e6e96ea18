package slurm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
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
func (r *round) decideAccounting(st *State) error {
	if st.Hash != "" || st.Accounting || st.AccountingOff != "" {
		return nil
	}
	if why := accountingMissing(); why != "" {
		st.AccountingOff = why
		return r.r.Event(nil, api.ClusterEventLevelWarn, "Slurm accounting is off: %s; sacct will say so.", why)
	}
	st.Accounting = true
	return nil
}

// accountingOf reads whether node n runs the accounting daemons (it is the accounting host,
// accountingHost, and accounting is on, or off for a reason hale may mend), whether accounting
// is on, and where MariaDB keeps its data.
func (s *Slurm) accountingOf(ctx context.Context, n *store.Node) (run, on bool, dataDir string, err error) {
	err = s.h.Store().Read(ctx, func(tx store.Tx) error {
		cl, err := tx.ClusterByID(n.ClusterID)
		if err != nil {
			return err
		}
		st, err := loadState(tx, cl.ID)
		if err != nil {
			return err
		}
		if st == nil {
			return nil
		}
		host, dir := accountingHost(st, n)
		if !host {
			return nil
		}
		on, dataDir = st.Accounting, dir
		run = on || (st.AccountingOff != "" && accountingMissing() == "")
		return nil
	})
	return run, on, dataDir, err
}

// waitAccounting returns once slurmctld may start on controller node n: at once without
// accounting or on a backup controller of a multi-head cluster (slurmdbd is the primary's),
// or when slurmdbd answers. When slurmdbd does not answer within
// slurmconf.AccountingWait, it turns accounting off and returns once the node holds a slurm.conf
// without it.
func (s *Slurm) waitAccounting(ctx context.Context, n *store.Node) error {
	_, on, dataDir, err := s.accountingOf(ctx, n)
	if err != nil {
		return s.setupErr(n, "reading the cluster", err)
	}
	if !on {
		return nil
	}
	start := time.Now()
	_, err = s.h.Run(ctx, n.InstanceID, slurmconf.WaitDbd(dataDir, slurmconf.AccountingWait), slurmconf.WaitDbdLimit(slurmconf.AccountingWait))
	if err == nil {
		s.log.Info("slurmdbd answers", "cluster_id", n.ClusterID, "node", n.LogicalID, "waited", time.Since(start).Round(time.Millisecond))
		return nil
	}
	if !s.h.Connected(n.InstanceID) || ctx.Err() != nil {
		return orchestrator.ErrAgentGone
	}
	why := fmt.Sprintf("slurmdbd on %s did not answer within %d s (its logs: /var/log/slurm/slurmdbd.log, /var/log/mysql/error.log)", orchestrator.NodeName(n), slurmconf.AccountingWait)
	s.h.NodeTx(ctx, n.ClusterID, n.LogicalID, func(tx store.Tx, cl *store.Cluster, _ *store.Node) error {
		st, err := loadState(tx, cl.ID)
		if err != nil {
			return err
		}
		if st == nil || !st.Accounting {
			return nil
		}
		st.Accounting, st.AccountingOff = false, why
		if err := putState(tx, cl.ID, st); err != nil {
			return err
		}
		return s.h.Event(tx, cl, nil, api.ClusterEventLevelWarn,
			"Slurm accounting is off: %s. slurmctld starts without it; hale turns accounting on when slurmdbd answers.", why)
	})
	s.h.Enqueue(n.ClusterID)
	return s.waitUntil(ctx, n, accountingOffHeld)
}

// accountingOffHeld says whether node m holds a rendering without accounting: the State's
// Accounting is off, and so is the rendering it names. Until the next round renders again,
// State.Hash still names the rendering with accounting, which the controller holds: slurmctld
// started then tried slurmdbd ("Still don't know my ClusterID") and was restarted twice within
// seconds (TestSlurmVersions, sid, under the full suite's load).
func accountingOffHeld(st *State, m *store.Node, rec *NodeRecord) bool {
	return st != nil && !st.Accounting && !slurmconf.HasAccounting(st.Conf) && rec.conf(m) == st.Hash
}

// accountingBack turns accounting on again once slurmdbd listens on the running controller; the
// next rendering has the accounting lines, and slurmctld restarts with them (hale's block
// changed). It looks once per accountingRetry.
func (s *Slurm) accountingBack(ctx context.Context, clusterID, ctlInstance string) {
	if _, err := s.h.Run(ctx, ctlInstance, slurmconf.DbdListening(), 10*time.Second); err != nil {
		select {
		case <-ctx.Done():
		case <-time.After(accountingRetry):
		}
		return
	}
	s.updateState(ctx, clusterID, "turning Slurm accounting on", func(tx store.Tx, cl *store.Cluster, st *State) (bool, error) {
		if st.Accounting || st.AccountingOff == "" {
			return false, nil
		}
		st.Accounting, st.AccountingOff = true, ""
		return true, s.h.Event(tx, cl, nil, api.ClusterEventLevelInfo, "Slurm accounting is on: slurmdbd answers on the controller; slurmctld restarts to use it.")
	})
}
