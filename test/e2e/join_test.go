//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	slurm "github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
)

// takesJobs reports whether Slurm gives new jobs to a node in this scontrol State (IDLE,
// MIXED, IDLE+DRAIN, DOWN+NOT_RESPONDING, ...). The test's own reading, not the controller's.
func takesJobs(state string) bool {
	f := strings.Split(state, "+")
	if !slices.Contains([]string{"IDLE", "MIXED", "ALLOCATED", "COMPLETING"}, f[0]) {
		return false
	}
	for _, flag := range f[1:] {
		if slices.Contains([]string{"DRAIN", "FAIL", "NOT_RESPONDING", "FUTURE", "POWERED_DOWN", "POWERING_DOWN", "REBOOT_REQUESTED", "REBOOT_ISSUED"}, flag) {
			return false
		}
	}
	return true
}

// joinWatch samples one node through an operation that brings it back (a replacement, a
// repair, a reboot, a scale-up): DescribeClusterNode as often as it answers, and, at every
// sample that says Running once the node has been Pending, Slurm's own view of the node
// (scontrol show node, from the login node).
type joinWatch struct {
	stop, done chan struct{}

	mu       sync.Mutex
	samples  int      // DescribeClusterNode answers
	checked  int      // Running samples checked against Slurm
	waits    []string // the distinct Pending messages, in order
	statuses []string // the distinct statuses seen, in order (to explain a run that saw no Pending)
	errs     int      // DescribeClusterNode errors
	lastErr  string
	bad      []string // Running while Slurm did not take jobs on the node
	waitFrom time.Time
	running  time.Time // first Running sample after Pending
}

func (e *env) watchJoin(cluster, logical, login string) *joinWatch {
	w := &joinWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		pending := false
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			// Paced at most 200 a second: unpaced it asked about 600 a second, above the
			// server's per-key rate (500/s, burst 1000), and the SDK's silent retries of the
			// throttled calls left gaps of a second, long enough to miss a whole Pending.
			time.Sleep(5 * time.Millisecond)
			d, err := e.SDK.DescribeClusterNode(context.Background(), &sagemaker.DescribeClusterNodeInput{ClusterName: &cluster, NodeLogicalId: &logical})
			if err != nil {
				w.mu.Lock()
				w.errs++
				w.lastErr = err.Error()
				w.mu.Unlock()
				time.Sleep(20 * time.Millisecond) // not recorded yet (a scale-up)
				continue
			}
			nd := d.NodeDetails
			status, msg := nd.InstanceStatus.Status, aws.ToString(nd.InstanceStatus.Message)
			w.mu.Lock()
			w.samples++
			if len(w.statuses) == 0 || w.statuses[len(w.statuses)-1] != string(status)+" "+aws.ToString(nd.InstanceId) {
				w.statuses = append(w.statuses, string(status)+" "+aws.ToString(nd.InstanceId))
			}
			if status == types.ClusterInstanceStatusPending {
				pending = true
				if len(w.waits) == 0 || w.waits[len(w.waits)-1] != msg {
					w.waits = append(w.waits, msg)
				}
				if strings.HasPrefix(msg, "Waiting for Slurm") && w.waitFrom.IsZero() {
					w.waitFrom = time.Now()
				}
			}
			w.mu.Unlock()
			if status != types.ClusterInstanceStatusRunning || !pending {
				continue // on its way, or still the node from before the operation
			}
			name, _, _ := strings.Cut(aws.ToString(nd.PrivateDnsHostname), ".")
			out, err := e.onNode(login, "scontrol show node -o "+name)
			s := slurm.ParseShowNodes(out)[name]
			w.mu.Lock()
			w.checked++
			if w.running.IsZero() {
				w.running = time.Now()
			}
			if err != nil || !takesJobs(s.State) {
				w.bad = append(w.bad, fmt.Sprintf("%s API: Running (instance %s, %q); Slurm: %s (reason %q) %v",
					time.Now().Format("15:04:05.000"), aws.ToString(nd.InstanceId), msg, s.State, s.Reason, err))
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// finish samples on for a second after the operation ended (a node must not flap back), stops,
// and fails the test if the API ever said Running while Slurm would not run jobs on the node.
func (w *joinWatch) finish(t *testing.T, what string) {
	t.Helper()
	time.Sleep(time.Second)
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	waited := "never seen"
	if !w.waitFrom.IsZero() && !w.running.IsZero() {
		waited = fmt.Sprintf("%.2fs", w.running.Sub(w.waitFrom).Seconds())
	}
	t.Logf("%s: %d samples, %d of them Running and checked against Slurm; seen Pending waiting for Slurm for %s; Pending messages: %q",
		what, w.samples, w.checked, waited, w.waits)
	if w.checked == 0 {
		t.Errorf("%s: the node was never seen Running after Pending; statuses seen %q; %d describe errors (last: %s)", what, w.statuses, w.errs, w.lastErr)
	}
	if len(w.bad) > 0 {
		t.Errorf("%s: the API said Running while Slurm did not take jobs on the node (%d of %d checked samples):\n  %s",
			what, len(w.bad), w.checked, strings.Join(w.bad, "\n  "))
	}
}

var waitedRe = regexp.MustCompile(`Instance (i-[0-9a-f]+) is Running: Slurm accepts work on node \S+ \(([^)]*)\) after ([0-9.]+)s`)

// joined checks the events say the instance waited for Slurm and then became Running, and
// returns how long it waited, as the controller measured it.
func (e *env) joined(t *testing.T, cluster, instanceID string) string {
	t.Helper()
	ev := e.events(cluster)
	if !strings.Contains(ev, "Instance "+instanceID+" is set up; waiting for Slurm to accept it") {
		t.Errorf("no event says %s waited for Slurm:\n%s", instanceID, ev)
	}
	waited := ""
	for _, m := range waitedRe.FindAllStringSubmatch(ev, -1) {
		if m[1] == instanceID {
			waited = m[3] + "s (" + m[2] + ")" // the last time it joined (a rebooted instance joins again)
		}
	}
	if waited == "" {
		t.Errorf("no event says %s is Running because Slurm accepts it:\n%s", instanceID, ev)
	}
	return waited
}

// TestRunningMeansSlurmAccepts: through a BatchReplaceClusterNodes, the automatic repair of an
// Xid 79, a BatchRebootClusterNodes, a scale-up and an UpdateClusterSoftware (a rolling
// re-image), DescribeClusterNode never says a Slurm compute node is Running while slurmctld has
// it down, drained or not responding: the node is Pending, "Waiting for Slurm to accept the
// node (...)", until Slurm takes jobs on it.
func TestRunningMeansSlurmAccepts(t *testing.T) {
	parallel(t)
	e := start(t)
	ctx := context.Background()
	const cl = "join"
	login := healthCluster(t, e, cl, 2, types.ClusterNodeRecoveryAutomatic)

	t.Run("BatchReplaceClusterNodes", func(t *testing.T) {
		e := e.in(t)
		old := e.nodeOf(cl, "gpu-1")
		w := e.watchJoin(cl, "gpu-1", login)
		if _, err := e.SDK.BatchReplaceClusterNodes(ctx, &sagemaker.BatchReplaceClusterNodesInput{ClusterName: aws.String(cl), NodeIds: []string{old.InstanceID}}); err != nil {
			t.Fatal(err)
		}
		rp := e.waitRepair(t, cl, "gpu-1", 1, 90*time.Second)
		w.finish(t, "replace")
		t.Logf("replacement %s waited for Slurm %s; repair: %s", rp.NewInstanceID, e.joined(t, cl, rp.NewInstanceID), timelineText(rp))
	})

	t.Run("repair of an Xid 79", func(t *testing.T) {
		e := e.in(t)
		old := e.nodeOf(cl, "gpu-2")
		w := e.watchJoin(cl, "gpu-2", login)
		e.inject(old.InstanceID, xid(79))
		rp := e.waitRepair(t, cl, "gpu-2", 1, 90*time.Second)
		w.finish(t, "repair")
		if rp.Action != "Replace" || rp.NewInstanceID == "" {
			t.Fatalf("repair: %+v", rp)
		}
		t.Logf("replacement %s waited for Slurm %s; repair: %s", rp.NewInstanceID, e.joined(t, cl, rp.NewInstanceID), timelineText(rp))
	})

	t.Run("BatchRebootClusterNodes", func(t *testing.T) {
		e := e.in(t)
		n := e.nodeOf(cl, "gpu-1")
		w := e.watchJoin(cl, "gpu-1", login)
		if _, err := e.SDK.BatchRebootClusterNodes(ctx, &sagemaker.BatchRebootClusterNodesInput{ClusterName: aws.String(cl), NodeIds: []string{n.InstanceID}}); err != nil {
			t.Fatal(err)
		}
		rp := e.waitRepair(t, cl, "gpu-1", 2, 90*time.Second)
		w.finish(t, "reboot")
		t.Logf("rebooted %s waited for Slurm %s; repair: %s", n.InstanceID, e.joined(t, cl, n.InstanceID), timelineText(rp))
	})

	t.Run("scale-up", func(t *testing.T) {
		e := e.in(t)
		w := e.watchJoin(cl, "gpu-3", login)
		gpu := group("gpu", "ml.g5.2xlarge", 3, types.ClusterSlurmNodeTypeCompute, e.script("health", "on_create.sh", recordScript), "gpu")
		if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String(cl), InstanceGroups: []types.ClusterInstanceGroupSpecification{gpu}}); err != nil {
			t.Fatal(err)
		}
		e.waitStatus(cl, types.ClusterStatusInservice, 90*time.Second)
		w.finish(t, "scale-up")
		n := e.nodeOf(cl, "gpu-3")
		t.Logf("new node %s waited for Slurm %s", n.InstanceID, e.joined(t, cl, n.InstanceID))
	})

	t.Run("UpdateClusterSoftware", func(t *testing.T) {
		e := e.in(t)
		old := e.nodeOf(cl, "gpu-1")
		w := e.watchJoin(cl, "gpu-1", login)
		if _, err := e.SDK.UpdateClusterSoftware(ctx, &sagemaker.UpdateClusterSoftwareInput{ClusterName: aws.String(cl),
			InstanceGroups: []types.UpdateClusterSoftwareInstanceGroupSpecification{{InstanceGroupName: aws.String("gpu")}}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 90*time.Second, "gpu-1 re-imaged and the cluster InService", func() (bool, string) {
			d, err := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String(cl)})
			if err != nil {
				return false, err.Error()
			}
			n := e.nodeOf(cl, "gpu-1")
			return n.InstanceID != old.InstanceID && d.ClusterStatus == types.ClusterStatusInservice, string(d.ClusterStatus) + " " + n.InstanceID
		})
		w.finish(t, "software update")
		n := e.nodeOf(cl, "gpu-1")
		t.Logf("re-imaged %s waited for Slurm %s", n.InstanceID, e.joined(t, cl, n.InstanceID))
	})

	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String(cl)}); err != nil {
		t.Fatal(err)
	}
	e.waitGone(cl, 60*time.Second)
}
