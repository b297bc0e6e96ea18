package slurm

import (
	"context"
	"fmt"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/store"
)

// Accounting at run time (issue 27): a slurmdbd that is up at the start may stop answering
// later (its database locked or its disk full, the process wedged) while its process is
// still there, so the agent's supervision sees nothing. slurmctld then keeps the job records
// for it in its DBD Agent queue and drops them once the queue holds MaxDBDMsgs. hale reads
// the controller's accounting every accountingWatchInterval (slurmconf.AccountingHealth):
// a slurmdbd silent for accountingSilence is restarted (at most accountingRestarts times in
// accountingRestartWindow, then an Error), a full disk is reported with its cause and not
// restarted (no restart frees space), and a queue past half of MaxDBDMsgs is a warning while
// there is time.

const (
	accountingWatchInterval = 15 * time.Second
	accountingSilence       = 20 * time.Second
	accountingRestarts      = 3
	accountingRestartWindow = 10 * time.Minute
	// accountingDiskFull is the use, in per cent, of MariaDB's file system taken for full
	// (the basic checks' disk.full threshold).
	accountingDiskFull = 97
)

// acctWatch is what hale remembers of one cluster's accounting between two looks.
type acctWatch struct {
	silentSince time.Time   // the first look slurmdbd did not answer at; zero while it answers
	restarts    []time.Time // hale's restarts of a silent slurmdbd, within the window
	said        string      // the problem last reported, "" when none is
}

// acctVerdict is what one look concludes: restart slurmdbd, and an event to say (none when
// msg is "").
type acctVerdict struct {
	restart bool
	level   api.ClusterEventLevel
	msg     string
}

// judgeAccounting decides on one look at the controller's accounting (node is its Slurm
// name), updating w.
func judgeAccounting(a slurmconf.AccountingState, w *acctWatch, now time.Time, node string) acctVerdict {
	queue := "slurmctld's queue for it is not known (slurmctld did not answer sdiag)"
	if a.Queue >= 0 && a.Max > 0 {
		queue = fmt.Sprintf("slurmctld holds %d job records for it and drops any past %d (MaxDBDMsgs)", a.Queue, a.Max)
	}
	say := func(key string, level api.ClusterEventLevel, format string, args ...any) acctVerdict {
		if w.said == key {
			return acctVerdict{}
		}
		w.said = key
		return acctVerdict{level: level, msg: fmt.Sprintf(format, args...)}
	}
	for len(w.restarts) > 0 && now.Sub(w.restarts[0]) > accountingRestartWindow {
		w.restarts = w.restarts[1:]
	}
	if a.Answers {
		w.silentSince = time.Time{}
	} else if w.silentSince.IsZero() {
		w.silentSince = now
	}
	switch {
	case a.Disk >= accountingDiskFull || (!a.Answers && a.DiskError != ""):
		cause := fmt.Sprintf("%s is %d%% used", slurmconf.MariaDBDir, a.Disk)
		if a.DiskError != "" {
			cause += "; the log says: " + a.DiskError
		}
		return say("disk", api.ClusterEventLevelError, "Slurm accounting on %s: MariaDB's disk is full (%s). slurmdbd cannot store job records; %s. "+
			"Free space on the controller: restarting slurmdbd would not help.", node, cause, queue)
	case !a.Answers && now.Sub(w.silentSince) < accountingSilence:
		return acctVerdict{} // one silent look may be a moment's load
	case !a.Answers && len(w.restarts) >= accountingRestarts:
		return say("silent, restarts spent", api.ClusterEventLevelError, "Slurm accounting on %s: slurmdbd still does not answer after %d restarts within %s; %s. "+
			"Its logs: /var/log/slurm/slurmdbd.log, /var/log/mysql/error.log.", node, len(w.restarts), accountingRestartWindow, queue)
	case !a.Answers:
		if n := len(w.restarts); n > 0 && now.Sub(w.restarts[n-1]) < accountingSilence*3 {
			return acctVerdict{} // the last restart is still coming up
		}
		w.restarts = append(w.restarts, now)
		w.said = "silent"
		state := "is running but does not answer"
		if !a.Running {
			state = "is not running and nothing answers"
		}
		return acctVerdict{restart: true, level: api.ClusterEventLevelWarn, msg: fmt.Sprintf("Slurm accounting on %s: slurmdbd %s (no answer within %d s, for %s); %s. Restarting slurmdbd.",
			node, state, slurmconf.DbdAnswerWait, now.Sub(w.silentSince).Round(time.Second), queue)}
	case a.Queue >= 0 && a.Max > 0 && 2*a.Queue >= a.Max:
		return say("queue", api.ClusterEventLevelWarn, "Slurm accounting on %s: slurmdbd answers but does not keep up: %s.", node, queue)
	case w.said != "":
		w.said, w.restarts = "", nil
		return acctVerdict{level: api.ClusterEventLevelInfo, msg: fmt.Sprintf("Slurm accounting on %s is well again: slurmdbd answers; %s.", node, queue)}
	}
	return acctVerdict{}
}

// watchAccounting takes one look at the accounting of a cluster whose controller node is
// ctlInstance (Slurm name node) and acts on it.
func (s *Slurm) watchAccounting(ctx context.Context, clusterID, ctlInstance, node string) {
	out, err := s.h.Run(ctx, ctlInstance, slurmconf.AccountingHealth(), time.Duration(slurmconf.DbdAnswerWait+20)*time.Second)
	if err != nil {
		return // the controller did not answer: its own health is judged elsewhere
	}
	s.mu.Lock()
	w := s.acct[clusterID]
	if w == nil {
		w = &acctWatch{}
		s.acct[clusterID] = w
	}
	v := judgeAccounting(slurmconf.ParseAccountingHealth(out), w, time.Now(), node)
	s.mu.Unlock()
	if v.msg != "" {
		s.updateState(ctx, clusterID, "reporting on Slurm accounting", func(tx store.Tx, cl *store.Cluster, st *State) (bool, error) {
			return false, s.h.Event(tx, cl, nil, v.level, "%s", v.msg)
		})
	}
	if v.restart {
		r, err := s.h.Do(ctx, ctlInstance, &agentproto.Command{Id: fmt.Sprintf("slurmdbd-restart-%d", time.Now().UnixNano()), Ephemeral: true,
			Kind: &agentproto.Command_RestartDaemon{RestartDaemon: &agentproto.RestartDaemon{Name: "slurmdbd"}}}, 30*time.Second)
		if err == nil && r.Error != "" {
			err = fmt.Errorf("%s", r.Error)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("restarting slurmdbd", "cluster_id", clusterID, "error", err)
		}
	}
}
