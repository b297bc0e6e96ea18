package slurm

import (
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
)

// How hale answers what it reads of a cluster's accounting, look after look: a silent
// slurmdbd is restarted once it stays silent, not at the first silent look, and not more
// than accountingRestarts times; a full disk is reported with its cause and never restarted
// for; a growing queue is a warning; each problem is said once, and its end too.
func TestJudgeAccounting(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	w := &acctWatch{}
	look := func(at time.Duration, out string) acctVerdict {
		return judgeAccounting(slurmconf.ParseAccountingHealth(out), w, t0.Add(at), "controller-1")
	}
	const well = "running=yes\nanswers=yes\nqueue=0\nmax=10000\ndisk=40\n"
	const silent = "running=yes\nanswers=no\nqueue=120\nmax=10000\ndisk=40\n"
	if v := look(0, well); v.msg != "" || v.restart {
		t.Fatalf("a well slurmdbd: %+v", v)
	}
	if v := look(15*time.Second, silent); v.msg != "" || v.restart {
		t.Fatalf("one silent look acted: %+v", v)
	}
	v := look(45*time.Second, silent)
	if !v.restart || v.level != api.ClusterEventLevelWarn || !strings.Contains(v.msg, "is running but does not answer") || !strings.Contains(v.msg, "holds 120 job records for it and drops any past 10000") {
		t.Fatalf("a slurmdbd silent for 30 s: %+v", v)
	}
	if v := look(60*time.Second, silent); v.restart {
		t.Fatalf("restarted again while the last restart comes up: %+v", v)
	}
	for i, at := range []time.Duration{2 * time.Minute, 4 * time.Minute} {
		if v := look(at, silent); !v.restart {
			t.Fatalf("restart %d: %+v", i+2, v)
		}
	}
	v = look(6*time.Minute, silent)
	if v.restart || v.level != api.ClusterEventLevelError || !strings.Contains(v.msg, "still does not answer after 3 restarts") {
		t.Fatalf("after three restarts: %+v", v)
	}
	if v := look(7*time.Minute, silent); v.msg != "" || v.restart {
		t.Fatalf("said twice: %+v", v)
	}
	if v := look(8*time.Minute, well); v.level != api.ClusterEventLevelInfo || !strings.Contains(v.msg, "well again") {
		t.Fatalf("back: %+v", v)
	}

	// A full disk: the cause, an Error, no restart, however long it lasts.
	const full = "running=yes\nanswers=no\nqueue=9000\nmax=10000\ndisk=100\ndiskerror=2026-12-04 10:00:01 0 [ERROR] mariadbd: Disk full (/var/lib/mysql/slurm_acct_db/job_table.ibd); waiting for someone to free some space... (errno: 28 \"No space left on device\")\n"
	for i, at := range []time.Duration{10 * time.Minute, 11 * time.Minute, 12 * time.Minute} {
		v := look(at, full)
		if v.restart {
			t.Fatalf("restarted for a full disk: %+v", v)
		}
		if i == 0 && (v.level != api.ClusterEventLevelError || !strings.Contains(v.msg, "MariaDB's disk is full (/var/lib/mysql is 100% used; the log says: ") || !strings.Contains(v.msg, "holds 9000")) {
			t.Fatalf("a full disk: %+v", v)
		}
		if i > 0 && v.msg != "" {
			t.Fatalf("said twice: %+v", v)
		}
	}
	look(13*time.Minute, well)
	if v := look(14*time.Minute, "running=yes\nanswers=yes\nqueue=6000\nmax=10000\ndisk=50\n"); v.level != api.ClusterEventLevelWarn || !strings.Contains(v.msg, "does not keep up") {
		t.Fatalf("a growing queue: %+v", v)
	}
}
