//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// Slurm accounting: slurmdbd with Debian's MariaDB on the controller node, started by hale's
// agent (docs/slurm.md, "Accounting").

// sacctJobs reads `sacct -X -n -P -o JobID,JobName,State` on a node: job id -> "name state".
func (e *env) sacctJobs(node string) (map[string]string, string) {
	out, err := e.onNode(node, "sacct -X -n -P -o JobID,JobName,State")
	jobs := map[string]string{}
	if err != nil {
		return jobs, out
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Split(l, "|"); len(f) == 3 {
			jobs[f[0]] = f[1] + " " + f[2]
		}
	}
	return jobs, out
}

// waitJobs waits until sacct on node lists every job id of want with its "name state".
func (e *env) waitJobs(t *testing.T, node string, want map[string]string) {
	t.Helper()
	eventually(t, 30*time.Second, "sacct lists the jobs", func() (bool, string) {
		jobs, out := e.sacctJobs(node)
		for id, w := range want {
			if jobs[id] != w {
				return false, out
			}
		}
		return true, ""
	})
}

// jobID runs a command on a node whose output's last line is a Slurm job id, and returns it.
// Jobs are found by name (squeue -t all lists them for MinJobAge, 300 s, after they end).
func (e *env) jobID(t *testing.T, node, shell string) string {
	t.Helper()
	out, err := e.onNode(node, shell)
	if err != nil {
		t.Fatal(err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	id := strings.TrimSpace(lines[len(lines)-1])
	if _, err := strconv.Atoi(id); err != nil {
		t.Fatalf("no job id in %q", out)
	}
	return id
}

// TestSlurmAccounting: on a new cluster sacct on the login node lists srun and sbatch jobs as
// COMPLETED (and a GPU job's gres/gpu), the cluster is registered in the accounting database,
// MariaDB's files are the controller node's own, and when MariaDB and slurmdbd are killed jobs
// still run, the agent starts both again and the job's record arrives.
func TestSlurmAccounting(t *testing.T) {
	parallel(t)
	_, hadRunMysqld := os.Lstat("/run/mysqld")
	e := start(t)
	ctx := context.Background()
	lc := e.exampleBundle()
	groups := []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
		group("login", "ml.m5.xlarge", 1, types.ClusterSlurmNodeTypeLogin, lc),
		group("gpu", "ml.g5.2xlarge", 2, types.ClusterSlurmNodeTypeCompute, lc, "gpu"),
	}
	start := time.Now()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("acct"), InstanceGroups: groups}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("acct", types.ClusterStatusInservice, 90*time.Second)
	t.Logf("InService %.2f s after CreateCluster", time.Since(start).Seconds())
	nodes := e.nodes("acct")
	login := aws.ToString(byGroup(nodes, "login")[0].InstanceId)
	ctl := aws.ToString(byGroup(nodes, "controller")[0].InstanceId)
	var workers []string
	for _, n := range byGroup(nodes, "gpu") {
		workers = append(workers, host(n))
	}
	e.waitIdle(t, login, workers...)

	t.Run("sacct lists srun and sbatch jobs", func(t *testing.T) {
		e := e.in(t)
		srun := e.jobID(t, login, "srun -N2 hostname >/dev/null && squeue -h -t all -o %i -n hostname | tail -1")
		gpu := e.jobID(t, login, "srun -p gpu --gres=gpu:1 -J gpujob true && squeue -h -t all -o %i -n gpujob | tail -1")
		batch := e.jobID(t, login, "sbatch --parsable -N1 -J batchjob -o /dev/null --wrap 'sleep 1'")
		e.waitJobs(t, login, map[string]string{srun: "hostname COMPLETED", gpu: "gpujob COMPLETED", batch: "batchjob COMPLETED"})
		out, err := e.onNode(login, "sacct -X -n -P -o AllocTRES -j "+gpu)
		if err != nil || !strings.Contains(out, "gres/gpu=1") {
			t.Errorf("the GPU job's AllocTRES: %q %v", out, err)
		}
	})

	// A longer slurm.conf (more than the 40 lines a command's result carries) is still read
	// whole: no drift of hale's own lines is reported.
	if ev := e.events("acct"); strings.Contains(ev, "outside hale") {
		t.Errorf("hale took its own slurm.conf for an operator's edit:\n%s", ev)
	}

	t.Run("the cluster is registered", func(t *testing.T) {
		e := e.in(t)
		out, err := e.onNode(login, "sacctmgr -n -P list cluster format=Cluster,ControlHost")
		ctlAddr := aws.ToString(e.describeNode("acct", ctl).PrivatePrimaryIp)
		if err != nil || strings.TrimSpace(out) != "acct|"+ctlAddr {
			t.Errorf("sacctmgr list cluster: %q %v, want acct|%s", out, err, ctlAddr)
		}
	})

	t.Run("MariaDB and slurmdbd files are the controller's own", func(t *testing.T) {
		e := e.in(t)
		out, err := e.onNode(ctl, "test -S /var/lib/mysql/mysql.sock && stat -c '%a %U' /etc/slurm/slurmdbd.conf && ls /var/log/mysql/error.log /var/log/slurm/slurmdbd.log /var/spool/slurmctld/slurmdbd.pid")
		if err != nil || !strings.HasPrefix(out, "600 root\n") {
			t.Errorf("on the controller: %q %v", out, err)
		}
		own := filepath.Join(e.Options.DataDir, "local", "instances", ctl, "root", "var", "lib", "mysql", "mysql.sock")
		if _, err := os.Stat(own); err != nil {
			t.Errorf("the socket is not in the node's own directory: %v", err)
		}
		for _, p := range []string{"/var/lib/mysql/mysql.sock", "/var/lib/mysql/.hale-initialized", "/var/spool/slurmctld/slurmdbd.pid"} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("the host has %s", p)
			}
		}
		if _, err := os.Lstat("/run/mysqld"); err == nil && hadRunMysqld != nil {
			t.Error("the host has /run/mysqld now")
		}
		if out, _ := e.onNode(login, "ls /etc/slurm/slurmdbd.conf /var/lib/mysql/mysql.sock 2>&1"); !strings.Contains(out, "No such file") || strings.Contains(out, "\n/") {
			t.Errorf("the login node has accounting files: %q", out)
		}
	})

	t.Run("jobs run while MariaDB and slurmdbd are down; both come back and the job is recorded", func(t *testing.T) {
		e := e.in(t)
		pids := map[string]string{"mariadbd": "/var/lib/mysql/mariadbd.pid", "slurmdbd": "/var/spool/slurmctld/slurmdbd.pid"}
		pidOf := func(file string) int {
			out, _ := e.onNode(ctl, "cat "+file+" 2>/dev/null")
			pid, _ := strconv.Atoi(strings.TrimSpace(out))
			return pid
		}
		old := map[string]int{}
		for name, file := range pids {
			if old[name] = pidOf(file); old[name] <= 0 {
				t.Fatalf("no %s pid in %s", name, file)
			}
		}
		for name, pid := range old {
			if out, err := e.onNode(ctl, "kill -KILL "+strconv.Itoa(pid)); err != nil {
				t.Fatalf("kill %s: %v %s", name, err, out)
			}
		}
		id := e.jobID(t, login, "srun -N2 -J whiledown hostname >/dev/null && squeue -h -t all -o %i -n whiledown | tail -1")
		for name, file := range pids {
			eventually(t, 30*time.Second, "a new "+name, func() (bool, string) {
				pid := pidOf(file)
				_, err := e.onNode(ctl, "kill -0 "+strconv.Itoa(pid))
				return pid > 0 && pid != old[name] && err == nil, strconv.Itoa(pid)
			})
		}
		e.waitJobs(t, login, map[string]string{id: "whiledown COMPLETED"})
	})

	t.Run("a slurmdbd alive but not answering is found at run time and restarted; no record is lost", func(t *testing.T) {
		e := e.in(t)
		// SIGSTOP: the process is there (the agent's supervision sees nothing wrong) and
		// accepts connections, but answers none: as a wedged slurmdbd does.
		out, err := e.onNode(ctl, "cat /var/spool/slurmctld/slurmdbd.pid")
		pid, _ := strconv.Atoi(strings.TrimSpace(out))
		if err != nil || pid <= 0 {
			t.Fatalf("no slurmdbd pid: %q %v", out, err)
		}
		if out, err := e.onNode(ctl, "kill -STOP "+strconv.Itoa(pid)); err != nil {
			t.Fatal(err, out)
		}
		id := e.jobID(t, login, "srun -N2 -J whilesilent hostname >/dev/null && squeue -h -t all -o %i -n whilesilent | tail -1")
		eventually(t, 120*time.Second, "slurmdbd found silent and restarted", func() (bool, string) {
			ev := e.events("acct")
			out, _ := e.onNode(ctl, "cat /var/spool/slurmctld/slurmdbd.pid")
			now, _ := strconv.Atoi(strings.TrimSpace(out))
			return strings.Contains(ev, "slurmdbd is running but does not answer") && strings.Contains(ev, "Restarting slurmdbd") && now > 0 && now != pid, ev
		})
		e.waitJobs(t, login, map[string]string{id: "whilesilent COMPLETED"})
		eventually(t, 60*time.Second, "accounting said well again", func() (bool, string) {
			ev := e.events("acct")
			return strings.Contains(ev, "is well again: slurmdbd answers"), ev
		})
	})

	e.deleteGone(t, "acct", ctl)
}

// deleteGone deletes a cluster, waits until it is gone and checks that the controller's
// MariaDB and slurmdbd went with it.
func (e *env) deleteGone(t *testing.T, name, ctl string) {
	t.Helper()
	var pids []int
	for _, file := range []string{"/var/lib/mysql/mariadbd.pid", "/var/spool/slurmctld/slurmdbd.pid"} {
		out, _ := e.onNode(ctl, "cat "+file+" 2>/dev/null")
		// The file holds the node's number; its host pid is what outlives the node, or not.
		if pid, err := strconv.Atoi(strings.TrimSpace(out)); err == nil && pid > 0 {
			if host := e.hostPID(ctl, pid); host > 0 {
				pids = append(pids, host)
			}
		}
	}
	if _, err := e.SDK.DeleteCluster(context.Background(), &sagemaker.DeleteClusterInput{ClusterName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	e.waitGone(name, 60*time.Second)
	for _, pid := range pids {
		eventually(t, 10*time.Second, "MariaDB and slurmdbd gone", func() (bool, string) {
			return !alive(pid), fmt.Sprintf("process %d outlived the cluster", pid)
		})
	}
}

// alive: the process exists and is not a zombie (killed daemons whose agent died wait for
// their new parent to reap them).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// TestSlurmAccountingLate: when slurmdbd does not answer as the controller comes up, slurmctld
// starts without accounting (jobs run; an event says why), and once slurmdbd answers hale turns
// accounting on and sacct lists jobs. The controller's lifecycle script breaks slurmdbd: once it
// is up, it is started again listening on another port; the next slurmdbd.conf hale writes is
// right again, and the test kills slurmdbd so the agent starts it with that.
func TestSlurmAccountingLate(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	lc := e.exampleBundle()
	breakDbd := e.script("breakdbd", "on_create.sh", `#!/bin/bash
set -e
for i in $(seq 300); do ss -Hltn 'sport = :6819' | grep -q . && break; sleep 0.1; done
sed -i 's/^DbdPort=.*/DbdPort=6899/' /etc/slurm/slurmdbd.conf
pid=$(cat /var/spool/slurmctld/slurmdbd.pid)
kill "$pid"
# Gone before the script ends: a slurmdbd still shutting down (slow on a busy machine) holds
# 6819 open, and hale, which looks for it there next, would start slurmctld with accounting.
for i in $(seq 300); do kill -0 "$pid" 2>/dev/null || ss -Hltn 'sport = :6819' | grep -q . || break; sleep 0.1; done
`)
	groups := []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, breakDbd),
		group("login", "ml.m5.xlarge", 1, types.ClusterSlurmNodeTypeLogin, lc),
		group("cpu", "ml.c5.2xlarge", 1, types.ClusterSlurmNodeTypeCompute, lc, "cpu"),
	}
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("late"), InstanceGroups: groups}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("late", types.ClusterStatusInservice, 120*time.Second)
	if ev := e.events("late"); !strings.Contains(ev, "Slurm accounting is off: slurmdbd on ip-") {
		t.Errorf("no event says accounting is off:\n%s", ev)
	}
	nodes := e.nodes("late")
	login := aws.ToString(byGroup(nodes, "login")[0].InstanceId)
	ctl := aws.ToString(byGroup(nodes, "controller")[0].InstanceId)
	cpu := host(byGroup(nodes, "cpu")[0])
	e.waitIdle(t, login, cpu)
	if out, err := e.onNode(login, "srun hostname"); err != nil || strings.TrimSpace(out) != cpu {
		t.Fatalf("srun without accounting: %q %v", out, err)
	}
	if out, _ := e.onNode(login, "sacct 2>&1"); !strings.Contains(out, "accounting storage is disabled") {
		t.Errorf("sacct without accounting: %q", out)
	}

	if out, err := e.onNode(ctl, `grep -q '^DbdPort=6819$' /etc/slurm/slurmdbd.conf && kill "$(cat /var/spool/slurmctld/slurmdbd.pid)"`); err != nil {
		t.Fatalf("restarting slurmdbd with hale's slurmdbd.conf: %v %s", err, out)
	}
	eventually(t, 60*time.Second, "accounting on", func() (bool, string) {
		ev := e.events("late")
		return strings.Contains(ev, "Slurm accounting is on") && strings.Contains(ev, "slurmctld restarted"), ev
	})
	var id string
	eventually(t, 30*time.Second, "a job after accounting is on", func() (bool, string) {
		out, err := e.onNode(login, "srun -J after hostname >/dev/null && squeue -h -t all -o %i -n after | tail -1")
		id = strings.TrimSpace(out)
		return err == nil && id != "", out
	})
	e.waitJobs(t, login, map[string]string{id: "after COMPLETED"})
	e.deleteGone(t, "late", ctl)
}

func (e *env) describeNode(cluster, id string) *types.ClusterNodeDetails {
	e.t.Helper()
	d, err := e.SDK.DescribeClusterNode(context.Background(), &sagemaker.DescribeClusterNodeInput{ClusterName: &cluster, NodeId: &id})
	if err != nil {
		e.t.Fatal(err)
	}
	return d.NodeDetails
}
