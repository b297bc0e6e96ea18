//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/image"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
)

// BenchmarkCreateToInService measures CreateCluster until DescribeCluster says InService, for
// 4 and 16 nodes on the local provider (real namespaces, agents and lifecycle scripts), then
// deletes the cluster (not measured). Run as root:
// go test -tags e2e ./test/e2e -run '^$' -bench CreateToInService -benchtime 3x
func BenchmarkCreateToInService(b *testing.B) {
	for _, n := range []int32{4, 16} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			e := startB(b)
			lc := e.script("bench", "on_create.sh", recordScript)
			ctx := context.Background()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				name := fmt.Sprintf("bench-%d", i)
				start := time.Now()
				if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String(name), InstanceGroups: []types.ClusterInstanceGroupSpecification{
					group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
					group("workers", "ml.g5.2xlarge", n-1, types.ClusterSlurmNodeTypeCompute, lc, "gpu"),
				}}); err != nil {
					b.Fatal(err)
				}
				for {
					d, err := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String(name)})
					if err != nil {
						b.Fatal(err)
					}
					if d.ClusterStatus == types.ClusterStatusInservice {
						break
					}
					if d.ClusterStatus == types.ClusterStatusFailed {
						b.Fatalf("%s failed: %s", name, *d.FailureMessage)
					}
					time.Sleep(20 * time.Millisecond)
				}
				total += time.Since(start)
				b.StopTimer()
				e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String(name)})
				e.waitGone(name, time.Minute)
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s-to-InService")
		})
	}
}

// slurmStates reads `sinfo -N` on a node: Slurm node name -> state (idle, alloc, down...).
func (e *env) slurmStates(instanceID string) map[string]string {
	out, _ := e.onNode(instanceID, "sinfo -h -N -o '%N %t' 2>/dev/null")
	states := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			states[f[0]] = f[1]
		}
	}
	return states
}

// BenchmarkSlurmCreateToIdle measures CreateCluster until sinfo on the controller shows every
// compute node idle, for 4 and 16 nodes (a controller and 3 or 15 workers): real slurmctld,
// slurmd and munged in namespace nodes. Run as root:
// go test -tags e2e ./test/e2e -run '^$' -bench SlurmCreateToIdle -benchtime 3x
func BenchmarkSlurmCreateToIdle(b *testing.B) {
	for _, n := range []int32{4, 16} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			e := startB(b)
			lc := e.script("bench", "on_create.sh", recordScript)
			ctx := context.Background()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				name := fmt.Sprintf("bench-%d", i)
				start := time.Now()
				if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String(name), InstanceGroups: []types.ClusterInstanceGroupSpecification{
					group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
					group("workers", "ml.c5.2xlarge", n-1, types.ClusterSlurmNodeTypeCompute, lc, "batch"),
				}}); err != nil {
					b.Fatal(err)
				}
				ctl := ""
				for time.Since(start) < 2*time.Minute {
					if ctl == "" {
						for _, nd := range e.storeNodes(name) {
							if nd.GroupName == "controller" && nd.Status == "Running" {
								ctl = nd.InstanceID
							}
						}
					}
					idle := 0
					if ctl != "" {
						for _, s := range e.slurmStates(ctl) {
							if s == "idle" {
								idle++
							}
						}
					}
					if idle == int(n-1) {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				total += time.Since(start)
				b.StopTimer()
				e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String(name)})
				e.waitGone(name, time.Minute)
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s-to-all-idle")
		})
	}
}

// BenchmarkSlurmMembershipChange measures a membership change until Slurm shows it: an
// UpdateCluster that adds a worker until sinfo lists it idle (slurm.conf rewritten on every
// node, slurmctld restarted, scontrol reconfigure, the new slurmd registered), and a
// BatchDeleteClusterNodes until sinfo no longer lists it. Run as root:
// go test -tags e2e ./test/e2e -run '^$' -bench SlurmMembershipChange -benchtime 3x
func BenchmarkSlurmMembershipChange(b *testing.B) {
	e := startB(b)
	lc := e.script("bench", "on_create.sh", recordScript)
	ctx := context.Background()
	workers := group("workers", "ml.c5.2xlarge", 2, types.ClusterSlurmNodeTypeCompute, lc, "batch")
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("members"), InstanceGroups: []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc), workers}}); err != nil {
		b.Fatal(err)
	}
	e.waitStatus("members", types.ClusterStatusInservice, time.Minute)
	var ctl string
	for _, nd := range e.storeNodes("members") {
		if nd.GroupName == "controller" {
			ctl = nd.InstanceID
		}
	}
	wait := func(cond func(map[string]string) bool) {
		for start := time.Now(); time.Since(start) < 2*time.Minute; time.Sleep(20 * time.Millisecond) {
			if cond(e.slurmStates(ctl)) {
				return
			}
		}
		b.Fatalf("Slurm did not get there:\n%s", e.events("members"))
	}
	wait(func(s map[string]string) bool { return len(s) == 2 })
	var up, down time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		workers.InstanceCount = aws.Int32(3)
		if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("members"),
			InstanceGroups: []types.ClusterInstanceGroupSpecification{workers}}); err != nil {
			b.Fatal(err)
		}
		wait(func(s map[string]string) bool {
			idle := 0
			for _, st := range s {
				if st == "idle" {
					idle++
				}
			}
			return idle == 3
		})
		up += time.Since(start)
		b.StopTimer()
		e.waitStatus("members", types.ClusterStatusInservice, time.Minute)
		var newest *store.Node
		for _, nd := range e.storeNodes("members") {
			if nd.GroupName == "workers" && (newest == nil || nd.Details.Ordinal > newest.Details.Ordinal) {
				newest = nd
			}
		}
		b.StartTimer()
		start = time.Now()
		if _, err := e.SDK.BatchDeleteClusterNodes(ctx, &sagemaker.BatchDeleteClusterNodesInput{ClusterName: aws.String("members"), NodeIds: []string{newest.InstanceID}}); err != nil {
			b.Fatal(err)
		}
		wait(func(s map[string]string) bool { return len(s) == 2 })
		down += time.Since(start)
		b.StopTimer()
		workers.InstanceCount = aws.Int32(2)
		e.waitStatus("members", types.ClusterStatusInservice, time.Minute)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(up.Seconds()/float64(b.N), "s-scale-up-to-idle")
	b.ReportMetric(down.Seconds()/float64(b.N), "s-delete-to-removed")
	e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("members")})
	e.waitGone("members", time.Minute)
}

// BenchmarkHealthDetectAndRepair injects Replace-class GPU faults into the workers of a real
// Slurm cluster (at least 20 injections, each node never twice for the same fault, so the
// quarantine policy stays out of it) and measures, from the moment the kernel line is written:
// detection (the node drained in Slurm) and repair (the node back in service under its name,
// on a new instance). Beside it, Slurm's own detection of a slurmd that stops answering
// (SIGSTOP; SlurmdTimeout=10) is measured as the reference. Run as root:
// go test -tags e2e ./test/e2e -run '^$' -bench HealthDetectAndRepair -benchtime 1x
func BenchmarkHealthDetectAndRepair(b *testing.B) {
	// The same Xid on worker after worker is what the burst pause exists for; this measures
	// one repair at a time, so the pause is off.
	dir := b.TempDir()
	b.Setenv("HALE_DATA_DIR", dir)
	o := options(b, dir)
	o.RepairBurstNodes = -1
	e := &env{Env: servertest.Start(b, o), t: b, scripts: o.ObjectStore}
	lc := e.script("bench", "on_create.sh", recordScript)
	ctx := context.Background()
	const workers = 4
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("faults"), InstanceGroups: []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
		group("gpu", "ml.g5.2xlarge", workers, types.ClusterSlurmNodeTypeCompute, lc, "gpu"),
	}}); err != nil {
		b.Fatal(err)
	}
	e.waitStatus("faults", types.ClusterStatusInservice, time.Minute)
	var ctl string
	for _, n := range e.storeNodes("faults") {
		if n.GroupName == "controller" {
			ctl = n.InstanceID
		}
	}
	idle := func(name string) bool { return e.slurmStates(ctl)[name] == "idle" }
	faults := []int{79, 74, 119, 140, 64, 54} // all Replace; distinct fault types
	n := 20                                   // -benchtime 1x: one run of n injections
	if v, err := strconv.Atoi(os.Getenv("HALE_BENCH_INJECTIONS")); err == nil && v > 0 {
		n = v
	}
	var detect, repair []time.Duration
	b.ResetTimer()
	for i := 0; i < n; i++ {
		logical := fmt.Sprintf("gpu-%d", i%workers+1)
		var node *store.Node
		for _, nd := range e.storeNodes("faults") {
			if nd.LogicalID == logical {
				node = nd
			}
		}
		name, _, _ := strings.Cut(node.Details.PrivateDNSHostname, ".")
		for start := time.Now(); !idle(name) && time.Since(start) < time.Minute; time.Sleep(50 * time.Millisecond) {
		}
		before := len(e.repairsOf("faults", logical))
		start := time.Now()
		if _, err := local.InjectFault(filepath.Join(e.Options.DataDir, "local"), node.InstanceID, local.Fault{Xid: faults[(i/workers)%len(faults)], LoseGPU: -1}); err != nil {
			b.Fatal(err)
		}
		var rp *store.Repair
		for time.Since(start) < 2*time.Minute {
			rs := e.repairsOf("faults", logical)
			if len(rs) > before && !rs[before].State.Open() {
				rp = rs[before]
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if rp == nil || rp.State != store.RepairDone {
			b.Fatalf("injection %d into %s: repair %+v\n%s", i, logical, rp, e.events("faults"))
		}
		for _, s := range rp.Timeline {
			if strings.HasPrefix(s.What, "drained in Slurm") {
				detect = append(detect, s.At.Sub(start))
			}
		}
		repair = append(repair, rp.Timeline[len(rp.Timeline)-1].At.Sub(start))
		b.Logf("injection %d into %s: repair done after %s, loop %s", i, logical, repair[len(repair)-1], time.Since(start))
	}
	b.StopTimer()
	// The reference: Slurm noticing by itself a slurmd that stopped answering.
	var slurmDetect []time.Duration
	for i := 0; i < 3; i++ {
		node := e.nodeOf("faults", fmt.Sprintf("gpu-%d", i+1))
		name, _, _ := strings.Cut(node.Details.PrivateDNSHostname, ".")
		for start := time.Now(); !idle(name) && time.Since(start) < time.Minute; time.Sleep(50 * time.Millisecond) {
		}
		// slurmd.pid holds the node's own number for it; signals come from the host.
		pidb, _ := e.onNode(node.InstanceID, "cat /var/spool/slurmd/slurmd.pid")
		nsPID, _ := strconv.Atoi(strings.TrimSpace(pidb))
		pid := e.hostPID(node.InstanceID, nsPID)
		if nsPID <= 1 || pid <= 1 {
			continue
		}
		start := time.Now()
		syscall.Kill(pid, syscall.SIGSTOP)
		for time.Since(start) < time.Minute {
			if st := e.slurmStates(ctl)[name]; strings.HasSuffix(st, "*") || st == "down" {
				slurmDetect = append(slurmDetect, time.Since(start))
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		syscall.Kill(pid, syscall.SIGCONT)
	}
	report := func(unit string, ds []time.Duration) {
		if len(ds) == 0 {
			return
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		b.ReportMetric((sum / time.Duration(len(ds))).Seconds(), unit+"-mean-s")
		b.ReportMetric(ds[len(ds)*50/100].Seconds(), unit+"-p50-s")
		b.ReportMetric(ds[min(len(ds)-1, len(ds)*99/100)].Seconds(), unit+"-p99-s")
		b.ReportMetric(ds[len(ds)-1].Seconds(), unit+"-max-s")
	}
	b.Logf("%d injections; Slurm's own detection measured %d times", len(repair), len(slurmDetect))
	report("detect", detect)
	report("repair", repair)
	report("slurm-detect", slurmDetect)
	e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("faults")})
	e.waitGone("faults", time.Minute)
}

// BenchmarkAutoResume runs examples/train (2 nodes, 300 steps, a checkpoint every 20) with
// srun --auto-resume=1 again and again, injects an Xid 79 on the job's second node at a
// different step each run, and measures: fault to training resumed (the first step after the
// restart done), the steps recomputed (the last step before the fault minus the checkpoint it
// resumed from; at most the interval), and the run's goodput (300 steps at the undisturbed step
// time over the training's wall time). HALE_BENCH_RUNS sets the runs (default 3). Run as root:
// go test -tags e2e ./test/e2e -run '^$' -bench AutoResume -benchtime 1x
func BenchmarkAutoResume(b *testing.B) {
	runs := 3
	if v, err := strconv.Atoi(os.Getenv("HALE_BENCH_RUNS")); err == nil && v > 0 {
		runs = v
	}
	const steps, every = 300, 20
	e := startB(b)
	login := healthCluster(b, e, "bench-resume", 3, types.ClusterNodeRecoveryAutomatic)
	var resume, recomputed, goodput []float64
	for i := 0; i < b.N*runs; i++ {
		// Steps of at least 50 ms (--step-seconds), as in TestAutoResume: unpaced, OpenBLAS runs
		// this model's step in milliseconds and the run can end before the fault lands.
		r := e.submit(b, login, fmt.Sprintf("TRAIN_ARGS='--steps %d --ckpt-every %d --step-seconds 0.05' CKPT_DIR=/fsx/ckpt/bench-%d sbatch --parsable -p gpu /fsx/train/train.sbatch", steps, every, i))
		at := 90 + 23*i%100 // a different place in the checkpoint interval each run
		r.waitFor(b, fmt.Sprintf(`step %d loss`, at), 120*time.Second)
		nodes := r.nodes(b)
		if len(nodes) != 2 {
			b.Fatalf("job %s on %v", r.id, nodes)
		}
		fault := time.Now()
		bad := e.nodeNamed(b, "bench-resume", nodes[1])
		e.inject(bad.InstanceID, xid(79))
		if state, _ := r.waitEnd(b, 240*time.Second); state != "COMPLETED" {
			b.Fatalf("job %s ended %s:\n%s", r.id, state, r.output())
		}
		m, err := trainMetrics(r.output(), fault, steps)
		if err != nil {
			b.Fatalf("job %s: %v\n%s", r.id, err, r.output())
		}
		b.Logf("run %d: fault at step %d, resumed from %d (%d recomputed), training again %.2fs after the fault, goodput %.1f%%",
			i+1, m.lastBefore, m.from, m.lastBefore-m.from, m.resume.Seconds(), 100*m.goodput)
		// Where the time went: srun's lines, timed from the fault.
		for _, l := range strings.Split(r.output(), "\n") {
			hms, err := time.ParseInLocation("15:04:05.000", strings.Fields(l + " x")[0], time.Local)
			if err != nil || !(strings.Contains(l, "[Auto Resume]") || strings.Contains(l, "resumed from")) {
				continue
			}
			at := time.Date(fault.Year(), fault.Month(), fault.Day(), hms.Hour(), hms.Minute(), hms.Second(), hms.Nanosecond(), time.Local)
			b.Logf("  %+7.2fs %s", at.Sub(fault).Seconds(), strings.TrimSpace(l[12:]))
		}
		// And the repair's own steps.
		if rps := e.repairsOf("bench-resume", bad.LogicalID); len(rps) > 0 {
			rp := rps[len(rps)-1]
			for _, st := range rp.Timeline {
				b.Logf("  %+7.2fs repair: %s", st.At.Sub(fault).Seconds(), st.What)
			}
		}
		resume = append(resume, m.resume.Seconds())
		recomputed = append(recomputed, float64(m.lastBefore-m.from))
		goodput = append(goodput, m.goodput)
	}
	b.ReportMetric(mean(resume), "s-fault-to-resumed")
	b.ReportMetric(slices.Max(resume), "s-fault-to-resumed-max")
	b.ReportMetric(mean(recomputed), "steps-recomputed")
	b.ReportMetric(every, "ckpt-interval-steps")
	b.ReportMetric(100*mean(goodput), "%goodput")
	e.SDK.DeleteCluster(context.Background(), &sagemaker.DeleteClusterInput{ClusterName: aws.String("bench-resume")})
	e.waitGone("bench-resume", time.Minute)
}

type resumeMetrics struct {
	lastBefore, from int
	resume           time.Duration
	goodput          float64
}

// trainMetrics reads examples/train's log: "HH:MM:SS.mmm [train] step N loss L" lines.
func trainMetrics(out string, fault time.Time, steps int) (*resumeMetrics, error) {
	m := &resumeMetrics{lastBefore: -1, from: -1}
	var first, last, resumedAt time.Time
	var prev time.Time
	var intervals []float64
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "[train]" {
			continue
		}
		hms, err := time.ParseInLocation("15:04:05.000", f[0], time.Local)
		if err != nil {
			continue
		}
		at := time.Date(fault.Year(), fault.Month(), fault.Day(), hms.Hour(), hms.Minute(), hms.Second(), hms.Nanosecond(), time.Local)
		if first.IsZero() {
			first = at
		}
		last = at
		switch {
		case f[2] == "step" && len(f) > 3:
			n, _ := strconv.Atoi(f[3])
			if at.Before(fault) {
				m.lastBefore = n
				if !prev.IsZero() {
					intervals = append(intervals, at.Sub(prev).Seconds())
				}
				prev = at
			} else if m.from >= 0 && n == m.from+1 && resumedAt.IsZero() {
				resumedAt = at
			}
		case f[2] == "resumed" && len(f) > 5:
			m.from, _ = strconv.Atoi(f[5])
		}
	}
	if m.from < 0 || resumedAt.IsZero() || len(intervals) == 0 {
		return nil, fmt.Errorf("no resumed run in the log")
	}
	sort.Float64s(intervals)
	m.resume = resumedAt.Sub(fault)
	m.goodput = float64(steps) * intervals[len(intervals)/2] / last.Sub(first).Seconds()
	return m, nil
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// restartBench runs op b.N times, each with the server armed at point (internal/failpoint),
// where it dies (exit 137, as a SIGKILL) and is started again at once; "none" arms nothing.
// op starts the operation and returns a check that says whether it is done. It reports the
// mean time to done and the mean time the server was down.
func restartBench(b *testing.B, point string, setup func(e *env), op func(e *env, i int) func() bool) {
	dir := b.TempDir()
	b.Setenv("HALE_DATA_DIR", dir)
	e, srv, run := binaryServer(b, dir)
	setup(e)
	var total, down time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if point != "none" {
			srv.Process.Signal(syscall.SIGKILL)
			srv.Wait()
			srv = run("HALE_FAILPOINT=" + point)
		}
		exited := make(chan time.Time, 1)
		armed := srv
		go func() { armed.Wait(); exited <- time.Now() }()
		b.StartTimer()
		start := time.Now()
		done := op(e, i)
		for !done() {
			select {
			case died := <-exited:
				srv = run()
				down += time.Since(died)
			default:
			}
			if time.Since(start) > 2*time.Minute {
				b.Fatalf("not done 2 minutes after the start (point %s)", point)
			}
			time.Sleep(20 * time.Millisecond)
		}
		total += time.Since(start)
		if point != "none" && srv == armed {
			b.Fatalf("the server did not die at %s", point)
		}
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s-done")
	b.ReportMetric(down.Seconds()/float64(b.N), "s-server-down")
	b.StopTimer()
	out, err := e.SDK.ListClusters(context.Background(), &sagemaker.ListClustersInput{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range out.ClusterSummaries {
		e.SDK.DeleteCluster(context.Background(), &sagemaker.DeleteClusterInput{ClusterName: c.ClusterName})
		e.waitGone(*c.ClusterName, time.Minute)
	}
}

// BenchmarkRestartMidCreate measures what a server crash costs a creation: CreateCluster of a
// 4-node Slurm cluster (a controller, 3 workers) until InService, the server dying at a point of
// it, against an uninterrupted creation ("none"); the cluster is deleted after each (not
// measured). Run as root:
// go test -tags e2e ./test/e2e -run '^$' -bench RestartMid -benchtime 3x
func BenchmarkRestartMidCreate(b *testing.B) {
	for _, point := range []string{"none", "node:Launching@2", "node:Configuring@4", "node:Joining", "cluster:InService"} {
		b.Run(point, func(b *testing.B) {
			var lc string
			restartBench(b, point, func(e *env) { lc = e.script("bench", "on_create.sh", recordScript) }, func(e *env, i int) func() bool {
				name := fmt.Sprintf("restart-%d", i)
				if i > 0 {
					b.StopTimer()
					prev := fmt.Sprintf("restart-%d", i-1)
					e.SDK.DeleteCluster(context.Background(), &sagemaker.DeleteClusterInput{ClusterName: aws.String(prev)})
					e.waitGone(prev, time.Minute)
					b.StartTimer()
				}
				if _, err := e.SDK.CreateCluster(context.Background(), &sagemaker.CreateClusterInput{ClusterName: aws.String(name), InstanceGroups: []types.ClusterInstanceGroupSpecification{
					group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
					group("workers", "ml.g5.2xlarge", 3, types.ClusterSlurmNodeTypeCompute, lc, "gpu"),
				}}); err != nil {
					b.Fatal(err)
				}
				return func() bool {
					d, err := e.SDK.DescribeCluster(context.Background(), &sagemaker.DescribeClusterInput{ClusterName: aws.String(name)})
					if err == nil && d.ClusterStatus == types.ClusterStatusFailed {
						b.Fatalf("%s failed: %s", name, *d.FailureMessage)
					}
					return err == nil && d.ClusterStatus == types.ClusterStatusInservice
				}
			})
		})
	}
}

// BenchmarkRestartMidReplace measures what a server crash costs a repair: BatchReplaceClusterNodes
// of a worker until its new instance is Running (Slurm accepts work on it), the server dying at
// a point of the repair, against an uninterrupted one ("none"). Run as root:
// go test -tags e2e ./test/e2e -run '^$' -bench RestartMid -benchtime 3x
func BenchmarkRestartMidReplace(b *testing.B) {
	for _, point := range []string{"none", "repair:Repairing", "node:Launching", "node:Configuring", "node:Joining", "repair:Resuming", "repair:Done"} {
		b.Run(point, func(b *testing.B) {
			const name = "replace"
			restartBench(b, point, func(e *env) {
				lc := e.script("bench", "on_create.sh", recordScript)
				if _, err := e.SDK.CreateCluster(context.Background(), &sagemaker.CreateClusterInput{ClusterName: aws.String(name), InstanceGroups: []types.ClusterInstanceGroupSpecification{
					group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
					group("workers", "ml.g5.2xlarge", 2, types.ClusterSlurmNodeTypeCompute, lc, "gpu"),
				}}); err != nil {
					b.Fatal(err)
				}
				e.waitStatus(name, types.ClusterStatusInservice, time.Minute)
			}, func(e *env, _ int) func() bool {
				var old string
				for _, n := range e.nodes(name) {
					if *n.NodeLogicalId == "workers-1" {
						old = *n.InstanceId
					}
				}
				if _, err := e.SDK.BatchReplaceClusterNodes(context.Background(), &sagemaker.BatchReplaceClusterNodesInput{ClusterName: aws.String(name), NodeIds: []string{old}}); err != nil {
					b.Fatal(err)
				}
				return func() bool {
					out, err := e.SDK.ListClusterNodes(context.Background(), &sagemaker.ListClusterNodesInput{ClusterName: aws.String(name), IncludeNodeLogicalIds: aws.Bool(true)})
					if err != nil {
						return false
					}
					for _, n := range out.ClusterNodeSummaries {
						if *n.NodeLogicalId == "workers-1" {
							return *n.InstanceId != old && n.InstanceStatus.Status == types.ClusterInstanceStatusRunning
						}
					}
					return false
				}
			})
		})
	}
}

// BenchmarkAgentReconnect measures how soon the agents of a 4-node cluster are back after a
// server restart: the server is killed (SIGKILL), stays down 1 s, is started again, and the
// time from its listening to the last agent's "agent connected" is read from its log. Run as
// root: go test -tags e2e ./test/e2e -run '^$' -bench AgentReconnect -benchtime 5x
func BenchmarkAgentReconnect(b *testing.B) {
	dir := b.TempDir()
	b.Setenv("HALE_DATA_DIR", dir)
	e, srv, run := binaryServer(b, dir)
	lc := e.script("bench", "on_create.sh", recordScript)
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("reconnect"), InstanceGroups: fourNodes(lc)}); err != nil {
		b.Fatal(err)
	}
	e.waitStatus("reconnect", types.ClusterStatusInservice, time.Minute)
	var worst, sum time.Duration
	for i := 0; i < b.N; i++ {
		srv.Process.Signal(syscall.SIGKILL)
		srv.Wait()
		time.Sleep(time.Second)
		srv = run()
		var back time.Duration
		eventually(b, 30*time.Second, "every agent reconnected", func() (bool, string) {
			listened, conns := reconnects(b, filepath.Join(dir, "server.log"))
			if len(conns) < 4 {
				return false, fmt.Sprintf("%d agents back", len(conns))
			}
			back = conns[3].Sub(listened)
			return true, ""
		})
		sum += back
		worst = max(worst, back)
	}
	b.ReportMetric(sum.Seconds()/float64(b.N), "s-mean-last-agent")
	b.ReportMetric(worst.Seconds(), "s-worst-last-agent")
	e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("reconnect")})
	e.waitGone("reconnect", time.Minute)
}

// reconnects reads a server log: when the last start listened, and when agents connected
// after it, in order.
func reconnects(b *testing.B, path string) (time.Time, []time.Time) {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var listened time.Time
	var conns []time.Time
	for _, l := range strings.Split(string(data), "\n") {
		ts, _, ok := strings.Cut(strings.TrimPrefix(l, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if !ok || err != nil {
			continue
		}
		switch {
		case strings.Contains(l, `msg="hale server listening"`):
			listened, conns = at, nil
		case strings.Contains(l, `msg="agent connected"`) && !listened.IsZero():
			conns = append(conns, at)
		}
	}
	return listened, conns
}

// BenchmarkImageBuild builds node images for real with mmdebstrap from Debian's archive, in a
// fresh registry (empty cache) per suite and PyTorch choice, and reports: cold_s (the first
// build: every package downloaded), copy_s (the same spec again: the archive has not changed,
// so the root is copied), apt_cached_s (one more package: mmdebstrap runs again, with the
// downloaded packages from the cache) and the image's size. Each image is deleted at the end.
// Run as root (a few minutes per case; PyTorch more):
// go test -tags e2e ./test/e2e -run '^$' -bench ImageBuild -benchtime 1x
func BenchmarkImageBuild(b *testing.B) {
	cases := []struct {
		suite string
		torch bool
	}{{"bookworm", false}, {"bookworm", true}, {"trixie", false}}
	if s := os.Getenv("HALE_BENCH_IMAGE_CASES"); s != "" { // e.g. "bookworm,trixie+torch"
		cases = cases[:0]
		for _, c := range strings.Split(s, ",") {
			suite, torch := strings.CutSuffix(c, "+torch")
			cases = append(cases, struct {
				suite string
				torch bool
			}{suite, torch})
		}
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("suite=%s/pytorch=%v", c.suite, c.torch), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				dir := b.TempDir()
				reg, err := image.Open(image.Options{Dir: dir})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				spec := image.Spec{Name: "bench-cold", Suite: c.suite, NoPyTorch: !c.torch}
				cold, err := reg.Build(ctx, spec)
				if err != nil {
					b.Fatal(err)
				}
				spec.Name = "bench-copy"
				copied, err := reg.Build(ctx, spec)
				if err != nil {
					b.Fatal(err)
				}
				if copied.CopiedFrom == "" {
					b.Logf("the archive changed between the builds: the second built afresh")
				}
				spec.Name, spec.Packages = "bench-apt", []string{"less"}
				apt, err := reg.Build(ctx, spec)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(cold.BuildSeconds, "cold_s")
				b.ReportMetric(copied.BuildSeconds, "copy_s")
				b.ReportMetric(apt.BuildSeconds, "apt_cached_s")
				b.ReportMetric(float64(cold.SizeBytes)/1e6, "image_MB")
				b.ReportMetric(float64(len(cold.Installed)), "packages")
				b.Logf("%s pytorch=%v: slurmd %s, %d packages, %d bytes; cold %.1f s, copy %.1f s, apt cached %.1f s",
					c.suite, c.torch, cold.Installed["slurmd"], len(cold.Installed), cold.SizeBytes, cold.BuildSeconds, copied.BuildSeconds, apt.BuildSeconds)
				none := func(context.Context, string) ([]string, error) { return nil, nil }
				for _, m := range []*image.Manifest{cold, copied, apt} {
					if err := reg.Delete(ctx, m.ImageID, none); err != nil {
						b.Error(err)
					}
				}
				reg.Close()
			}
		})
	}
}

// BenchmarkDefaultImageBoot compares a small Slurm cluster (a controller and 3 workers, the
// example lifecycle scripts: slurmctld, slurmd, munged, accounting on the controller) whose
// nodes boot from the default image with the same cluster on the host's root (hale server
// --default-image host), and reports, per root:
//   - boot_s: CreateCluster until a node's agent registered (its phase leaves Launching and
//     Booting), the mean over the nodes;
//   - s-to-InService: CreateCluster until DescribeCluster says InService;
//   - upper_MB: what a node wrote to its own layer by then (image: rootfs/upper; host: the
//     writable copies of /etc and /var/lib), the mean over the nodes; node_dir_MB: its whole
//     instance directory (the layer, /var/log, spool, MariaDB's files...), which both share.
//
// Run as root: go test -tags e2e ./test/e2e -run '^$' -bench DefaultImageBoot -benchtime 3x
func BenchmarkDefaultImageBoot(b *testing.B) {
	for _, root := range []string{"image", "host"} {
		b.Run("root="+root, func(b *testing.B) {
			o := options(b, b.TempDir())
			if root == "host" {
				o.DefaultImage = server.DefaultImageHost
			}
			e := startWith(b, o)
			lc := e.exampleBundle()
			ctx := context.Background()
			var toInService, boot time.Duration
			var upper, dirs int64
			booted := 0
			for i := 0; i < b.N; i++ {
				name := fmt.Sprintf("boot-%d", i)
				start := time.Now()
				if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String(name), InstanceGroups: []types.ClusterInstanceGroupSpecification{
					group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc),
					group("workers", "ml.c5.2xlarge", 3, types.ClusterSlurmNodeTypeCompute, lc, "batch"),
				}}); err != nil {
					b.Fatal(err)
				}
				registered := map[string]time.Duration{}
				for {
					for _, nd := range e.storeNodes(name) {
						if _, ok := registered[nd.LogicalID]; !ok && nd.Details.Phase != "" && nd.Details.Phase != store.PhasePending &&
							nd.Details.Phase != store.PhaseLaunching && nd.Details.Phase != store.PhaseBooting {
							registered[nd.LogicalID] = time.Since(start)
						}
					}
					d, err := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: aws.String(name)})
					if err != nil {
						b.Fatal(err)
					}
					if d.ClusterStatus == types.ClusterStatusInservice {
						break
					}
					if d.ClusterStatus == types.ClusterStatusFailed || time.Since(start) > 3*time.Minute {
						b.Fatalf("%s: %s\n%s", name, d.ClusterStatus, e.events(name))
					}
					time.Sleep(20 * time.Millisecond)
				}
				toInService += time.Since(start)
				b.StopTimer()
				for _, d := range registered {
					boot += d
					booted++
				}
				for _, nd := range e.storeNodes(name) {
					dir := filepath.Join(e.Options.DataDir, "local", "instances", nd.InstanceID)
					layer := filepath.Join(dir, "rootfs", "upper")
					if root == "host" {
						layer = filepath.Join(dir, "layers")
					}
					upper += duBytes(b, layer)
					dirs += duBytes(b, dir)
				}
				e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String(name)})
				e.waitGone(name, time.Minute)
				b.StartTimer()
			}
			b.ReportMetric(toInService.Seconds()/float64(b.N), "s-to-InService")
			if booted > 0 {
				b.ReportMetric(boot.Seconds()/float64(booted), "boot_s")
			}
			b.ReportMetric(float64(upper)/1e6/float64(4*b.N), "upper_MB")
			b.ReportMetric(float64(dirs)/1e6/float64(4*b.N), "node_dir_MB")
		})
	}
}

// duBytes is du -sbx of path: its files' apparent bytes, on its own file system only.
func duBytes(b *testing.B, path string) int64 {
	out, err := exec.Command("du", "-sbx", path).Output()
	if err != nil {
		b.Fatalf("du %s: %v", path, err)
	}
	n, err := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return n
}
