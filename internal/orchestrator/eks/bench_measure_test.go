//go:build kube

package eks_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/store"
)

// What the benchmark measures: each fault's timeline, the processes' CPU and memory, the report.

type faultResult struct {
	node, logical                                           string
	opened, labelled, jobPodGone, drained, jobRunning, done time.Duration
	oldGone, recreated, scheduled                           time.Duration
	timeline                                                string
}

type target struct {
	seedNode
	node, pod string
}

// pickTarget chooses a node that runs one of the job's pods, was never faulted, and still has
// its first instance (its agent runs here). The i-th fault starts from the i-th of the job's
// pods by name, so the faulty node's pod takes every place in the order in which the job's pods
// are deleted.
func pickTarget(b *testing.B, ctx context.Context, cs kubernetes.Interface, s *seeded, faulted map[string]bool, i int) target {
	running, _ := jobRunning(ctx, cs)
	for k := range running {
		p := running[(i+k)%len(running)]
		if n, ok := s.byNode[p.Spec.NodeName]; ok && !faulted[n.logicalID] {
			return target{seedNode: n, node: p.Spec.NodeName, pod: p.Name}
		}
	}
	b.Fatalf("no node left to fault: the job runs on %v", running)
	return target{}
}

func jobRunning(ctx context.Context, cs kubernetes.Interface) ([]corev1.Pod, error) {
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "training.kubeflow.org/job-name=train"})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// tracker follows the faulty Node, the pods on it and the job's pods through watches, and
// notes when each awaited state is first seen.
type tracker struct {
	mu                                     sync.Mutex
	node                                   string
	t0                                     time.Time
	before                                 map[string]bool // the job's pods (uids) before the fault
	jobOnNode                              map[string]bool // the job's pods on the node before the fault (names)
	onNode                                 map[string]*corev1.Pod
	job                                    map[string]*corev1.Pod
	labelled, jobPodGone, drained, running time.Time
	oldGone, recreated, scheduled          time.Time // the job's pods all deleted; made again; bound
	err                                    error
}

func (t *tracker) nodeEvent(ev watch.Event) {
	n, ok := ev.Object.(*corev1.Node)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := n.Labels[eks.LabelHealth]; t.labelled.IsZero() && (h == eks.UnschedulablePendingReplacement || h == eks.UnschedulablePendingReboot) {
		t.labelled = time.Now()
	}
}

func (t *tracker) nodePodEvent(ev watch.Event) {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ev.Type == watch.Deleted {
		delete(t.onNode, p.Name)
	} else {
		t.onNode[p.Name] = p
	}
	if t.jobPodGone.IsZero() {
		gone := true
		for name := range t.jobOnNode {
			if t.onNode[name] != nil {
				gone = false
			}
		}
		if gone {
			t.jobPodGone = time.Now()
		}
	}
	if t.drained.IsZero() {
		left := 0
		for _, p := range t.onNode {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				left++
			}
		}
		if left == 0 {
			t.drained = time.Now()
		}
	}
}

func (t *tracker) jobEvent(ev watch.Event) {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ev.Type == watch.Deleted {
		delete(t.job, p.Name)
	} else {
		t.job[p.Name] = p
	}
	if !t.running.IsZero() {
		return
	}
	made, bound, n, old := 0, 0, 0, 0
	for _, p := range t.job {
		if t.before[string(p.UID)] {
			old++
			continue
		}
		if p.DeletionTimestamp != nil {
			continue
		}
		made++
		if p.Spec.NodeName != "" && p.Spec.NodeName != t.node {
			bound++
			if p.Status.Phase == corev1.PodRunning {
				n++
			}
		}
	}
	now := time.Now()
	if old == 0 && t.oldGone.IsZero() {
		t.oldGone = now
	}
	if made == jobPods && t.recreated.IsZero() {
		t.recreated = now
	}
	if bound == jobPods && t.scheduled.IsZero() {
		t.scheduled = now
	}
	if n == jobPods {
		t.running = now
	}
}

func (t *tracker) complete() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.labelled.IsZero() && !t.jobPodGone.IsZero() && !t.drained.IsZero() && !t.oldGone.IsZero() && !t.running.IsZero()
}

// follow hands a watch's events to handle until ctx ends; a watch that ends before is the
// tracker's error.
func follow(ctx context.Context, t *tracker, w watch.Interface, handle func(watch.Event)) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				if ctx.Err() == nil {
					t.mu.Lock()
					t.err = fmt.Errorf("a watch ended: %v", apierrors.FromObject(ev.Object))
					t.mu.Unlock()
				}
				return
			}
			handle(ev)
		}
	}
}

// runFault injects an Xid 79 into the target's kernel log and waits for the repair to be done.
func runFault(b *testing.B, ctx context.Context, cs kubernetes.Interface, st store.Store, clusterID string, tg target, kernelLog string) faultResult {
	t := &tracker{node: tg.node, before: map[string]bool{}, jobOnNode: map[string]bool{}, onNode: map[string]*corev1.Pod{}, job: map[string]*corev1.Pod{}}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Watches start from the lists' resource versions: a single object's may be older than
	// what the API server still keeps (410 Gone).
	kn, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + tg.node})
	if err != nil {
		b.Fatal(err)
	}
	onNode, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + tg.node})
	if err != nil {
		b.Fatal(err)
	}
	jobPodList, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "training.kubeflow.org/job-name=train"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range onNode.Items {
		p := &onNode.Items[i]
		t.onNode[p.Name] = p
		if p.Labels["training.kubeflow.org/job-name"] == "train" {
			t.jobOnNode[p.Name] = true
		}
	}
	for i := range jobPodList.Items {
		p := &jobPodList.Items[i]
		t.job[p.Name] = p
		t.before[string(p.UID)] = true
	}
	nw, err := cs.CoreV1().Nodes().Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=" + tg.node, ResourceVersion: kn.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	pw, err := cs.CoreV1().Pods("").Watch(wctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + tg.node, ResourceVersion: onNode.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	jw, err := cs.CoreV1().Pods("default").Watch(wctx, metav1.ListOptions{LabelSelector: "training.kubeflow.org/job-name=train", ResourceVersion: jobPodList.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	go follow(wctx, t, nw, t.nodeEvent)
	go follow(wctx, t, pw, t.nodePodEvent)
	go follow(wctx, t, jw, t.jobEvent)

	// The fault: the driver's line in the node's kernel log, as syslog writes it.
	meaning := "GPU has fallen off the bus"
	if e, ok := health.Default().Xid(79); ok {
		meaning = e.Meaning
	}
	line := fmt.Sprintf("%s %s kernel: NVRM: Xid (PCI:%s): 79, pid='<unknown>', name=<unknown>, %s\n",
		time.Now().Format(time.Stamp), tg.hostname, agent.SimulatedPCI(0), meaning)
	f, err := os.OpenFile(kernelLog, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	t.mu.Lock()
	t.t0 = time.Now()
	t.mu.Unlock()
	t0 := t.t0
	if _, err := f.WriteString(line); err != nil {
		b.Fatal(err)
	}
	f.Close()

	r := faultResult{node: tg.node, logical: tg.logicalID}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var rp *store.Repair
		st.Read(ctx, func(tx store.Tx) error {
			rs, err := tx.RepairsOf(clusterID, tg.logicalID, t0.Add(-time.Second))
			if len(rs) > 0 {
				rp = rs[len(rs)-1]
			}
			return err
		})
		if rp != nil && r.opened == 0 {
			r.opened = rp.CreatedAt.Sub(t0)
		}
		if rp != nil && rp.State == store.RepairFailed {
			b.Fatalf("fault on %s: the repair failed: %s; timeline %+v", tg.node, rp.Message, rp.Timeline)
		}
		if rp != nil && rp.State == store.RepairDone && r.done == 0 {
			r.done = rp.UpdatedAt.Sub(t0)
			var steps []string
			for _, s := range rp.Timeline {
				steps = append(steps, fmt.Sprintf("+%.2fs %s", s.At.Sub(rp.CreatedAt).Seconds(), s.What))
			}
			r.timeline = strings.Join(steps, "; ")
		}
		if r.done != 0 && t.complete() {
			break
		}
		t.mu.Lock()
		werr := t.err
		t.mu.Unlock()
		if werr != nil {
			b.Fatalf("fault on %s: %v", tg.node, werr)
		}
		if time.Now().After(deadline) {
			t.mu.Lock()
			b.Fatalf("fault on %s: not over within 5 min: repair %+v; labelled %v, job pod gone %v, drained %v (%d pods left), job running %v",
				tg.node, rp, !t.labelled.IsZero(), !t.jobPodGone.IsZero(), !t.drained.IsZero(), len(t.onNode), !t.running.IsZero())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r.labelled, r.jobPodGone, r.drained, r.jobRunning = t.labelled.Sub(t0), t.jobPodGone.Sub(t0), t.drained.Sub(t0), t.running.Sub(t0)
	r.oldGone, r.recreated, r.scheduled = t.oldGone.Sub(t0), t.recreated.Sub(t0), t.scheduled.Sub(t0)
	fmt.Printf("fault %s (%s, %s): opened %.2fs, labelled %.2fs, job pod gone %.2fs, drained %.2fs, all old job pods deleted %.2fs, made again %.2fs, bound %.2fs, Running %.2fs, repair done %.2fs\n",
		tg.logicalID, tg.node, tg.pod, r.opened.Seconds(), r.labelled.Seconds(), r.jobPodGone.Seconds(), r.drained.Seconds(),
		r.oldGone.Seconds(), r.recreated.Seconds(), r.scheduled.Seconds(), r.jobRunning.Seconds(), r.done.Seconds())
	return r
}

// ---- processes, CPU and memory ----

type proc struct {
	name string
	pid  int
}

// children are the processes this one started (the control plane's), by name.
func children(exclude int) []proc {
	self := os.Getpid()
	var out []proc
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == exclude {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if ppid, _ := strconv.Atoi(fields[1]); ppid != self {
			continue
		}
		name := s[strings.IndexByte(s, '(')+1 : strings.LastIndexByte(s, ')')]
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
			arg0 := strings.Split(string(cmdline), "\x00")[0]
			name = filepath.Base(arg0)
			if strings.HasPrefix(arg0, "/proc/self/fd/") {
				name = "training-operator"
			}
		}
		out = append(out, proc{name, pid})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

type usageSample map[string]struct {
	cpu time.Duration
	rss int64
}

func sample(ps []proc) usageSample {
	s := usageSample{}
	for _, p := range ps {
		cpu, rss := procUsage(p.pid)
		s[p.name] = struct {
			cpu time.Duration
			rss int64
		}{cpu, rss}
	}
	return s
}

// procUsage reads a process's CPU time (user+system) and resident memory from /proc.
func procUsage(pid int) (cpu time.Duration, rss int64) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	cpu = time.Duration(utime+stime) * time.Second / 100 // USER_HZ is 100 on Linux
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			rss = kb * 1024
		}
	}
	return cpu, rss
}

type peakRSS struct {
	mu  sync.Mutex
	max map[string]int64
}

func (p *peakRSS) run(ctx context.Context, ps []proc) {
	for ctx.Err() == nil {
		for name, u := range sample(ps) {
			p.mu.Lock()
			p.max[name] = max(p.max[name], u.rss)
			p.mu.Unlock()
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// ---- the report ----

// percentile is the nearest-rank percentile (with 20 samples, p99 is the largest).
func percentile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func report(b *testing.B, rs []faultResult, ps []proc, before, idle, alone0, alone usageSample, idleWindow time.Duration,
	f0, f1 usageSample, faultWall time.Duration, peak *peakRSS) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d faults, times from the kernel-log write (nearest-rank percentiles):\n", len(rs))
	fmt.Fprintf(&sb, "%-34s %8s %8s %8s %8s %8s\n", "", "min", "mean", "p50", "p99", "max")
	measures := []struct {
		name, unit string
		get        func(faultResult) time.Duration
	}{
		{"repair opened in hale", "opened", func(r faultResult) time.Duration { return r.opened }},
		{"Node labelled PendingReplacement", "labelled", func(r faultResult) time.Duration { return r.labelled }},
		{"job's pod gone from the Node", "pod-gone", func(r faultResult) time.Duration { return r.jobPodGone }},
		{"Node drained (all pods evicted)", "drained", func(r faultResult) time.Duration { return r.drained }},
		{"the job's 16 old pods all deleted", "job-deleted", func(r faultResult) time.Duration { return r.oldGone }},
		{"all 16 job pods made again", "job-made", func(r faultResult) time.Duration { return r.recreated }},
		{"all 16 job pods bound to Nodes", "job-bound", func(r faultResult) time.Duration { return r.scheduled }},
		{"all 16 job pods Running elsewhere", "job-running", func(r faultResult) time.Duration { return r.jobRunning }},
		{"repair done (replacement Running)", "done", func(r faultResult) time.Duration { return r.done }},
	}
	for _, m := range measures {
		var ds []time.Duration
		var sum time.Duration
		for _, r := range rs {
			ds = append(ds, m.get(r))
			sum += m.get(r)
		}
		fmt.Fprintf(&sb, "%-34s %7.2fs %7.2fs %7.2fs %7.2fs %7.2fs\n", m.name, percentile(ds, 0).Seconds(), (sum / time.Duration(len(ds))).Seconds(),
			percentile(ds, 0.5).Seconds(), percentile(ds, 0.99).Seconds(), percentile(ds, 1).Seconds())
		b.ReportMetric(percentile(ds, 0.5).Seconds(), m.unit+"-p50-s")
		b.ReportMetric(percentile(ds, 0.99).Seconds(), m.unit+"-p99-s")
	}
	fmt.Fprintf(&sb, "\nCPU (%% of one core) and resident memory (MiB): idle (the agents, the pods, the job) over %s; over the faults (%.0f s);\n"+
		"idle over %s after the faults without hale and its agents (the same Nodes and pods)\n", idleWindow, faultWall.Seconds(), idleWindow)
	fmt.Fprintf(&sb, "%-24s %10s %10s %12s %12s %14s %12s %12s\n", "process", "idle CPU", "idle RSS", "faults CPU", "faults CPU s", "faults peak RSS", "no-hale CPU", "no-hale RSS")
	for _, p := range ps {
		ac, ar := "-", "-"
		if a, ok := alone[p.name]; ok {
			ac = fmt.Sprintf("%.1f%%", 100*(a.cpu-alone0[p.name].cpu).Seconds()/idleWindow.Seconds())
			ar = fmt.Sprintf("%.0f", float64(a.rss)/(1<<20))
		}
		ic := 100 * (idle[p.name].cpu - before[p.name].cpu).Seconds() / idleWindow.Seconds()
		fc := (f1[p.name].cpu - f0[p.name].cpu).Seconds()
		peak.mu.Lock()
		pr := peak.max[p.name]
		peak.mu.Unlock()
		fmt.Fprintf(&sb, "%-24s %9.1f%% %10.0f %11.1f%% %12.1f %14.0f %12s %12s\n", p.name, ic, float64(idle[p.name].rss)/(1<<20),
			100*fc/faultWall.Seconds(), fc, float64(pr)/(1<<20), ac, ar)
		switch p.name {
		case "hale", "kube-apiserver":
			b.ReportMetric(ic, p.name+"-idle-cpu-%")
			b.ReportMetric(float64(idle[p.name].rss)/(1<<20), p.name+"-idle-rss-MiB")
			b.ReportMetric(100*fc/faultWall.Seconds(), p.name+"-faults-cpu-%")
			b.ReportMetric(float64(pr)/(1<<20), p.name+"-faults-peak-rss-MiB")
		}
	}
	fmt.Fprintf(&sb, "\nrepair timelines (hale's, from the repair's opening):\n")
	for _, r := range rs {
		fmt.Fprintf(&sb, "  %s: %s\n", r.logical, r.timeline)
	}
	// b.Log would keep only the first lines of a benchmark's log.
	fmt.Print("\n" + sb.String())
}

// checkNoOtherRepairs fails when hale repaired a node the benchmark did not fault (a heartbeat
// lost under load, say).
func checkNoOtherRepairs(b *testing.B, st store.Store, clusterID string, faulted map[string]bool) {
	var others []string
	st.Read(context.Background(), func(tx store.Tx) error {
		ns, err := tx.NodesOf(clusterID)
		if err != nil {
			return err
		}
		for _, n := range ns {
			rs, err := tx.RepairsOf(clusterID, n.LogicalID, time.Now().Add(-24*time.Hour))
			if err != nil {
				return err
			}
			for _, rp := range rs {
				if !faulted[n.LogicalID] || rp.Source != store.SourceHealth {
					others = append(others, fmt.Sprintf("%s: %s %s (%s, %s)", n.LogicalID, rp.Action, rp.Fault, rp.Source, rp.State))
				}
			}
		}
		return nil
	})
	if len(others) > 0 {
		b.Errorf("hale repaired nodes the benchmark did not fault: %v", others)
	}
}

var slogMsg = regexp.MustCompile(`level=(WARN|ERROR) msg="?([^"=]*?)"? [a-z_]+=`)

// summarizeLog counts hale's warnings and errors by message.
func summarizeLog(b *testing.B, path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	counts := map[string]int{}
	var examples = map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := slogMsg.FindStringSubmatch(sc.Text()); m != nil {
			k := m[1] + " " + m[2]
			counts[k]++
			if examples[k] == "" {
				examples[k] = sc.Text()
			}
		}
	}
	var keys []string
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	var sb strings.Builder
	for _, k := range keys {
		ex := examples[k]
		if len(ex) > 300 {
			ex = ex[:300] + "..."
		}
		fmt.Fprintf(&sb, "%6d  %s\n        e.g. %s\n", counts[k], k, ex)
	}
	if sb.Len() > 0 {
		fmt.Print("\nhale's warnings and errors:\n" + sb.String())
	}
}

var throttled = regexp.MustCompile(`delay="([^"]+)" reason="client-side throttling`)

// summarizeThrottling reports client-go's notes of hale's requests held back by its own rate
// limiter (it notes waits over a second, at most one every few seconds).
func summarizeThrottling(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	n, longest := 0, time.Duration(0)
	for _, m := range throttled.FindAllStringSubmatch(string(data), -1) {
		d, _ := time.ParseDuration(m[1])
		n, longest = n+1, max(longest, d)
	}
	fmt.Printf("\nclient-go noted %d of hale's requests held back over 1 s by its client-side rate limiter (longest %s)\n", n, longest.Round(100*time.Millisecond))
}

func keepLogs(b *testing.B, to string, dirs ...string) {
	os.MkdirAll(to, 0o755)
	for _, d := range dirs {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() || !(strings.HasSuffix(e.Name(), ".log") || strings.HasSuffix(e.Name(), ".out")) {
				continue
			}
			data, err := os.ReadFile(filepath.Join(d, e.Name()))
			if err == nil {
				os.WriteFile(filepath.Join(to, e.Name()), data, 0o644)
			}
		}
	}
	b.Logf("logs kept in %s", to)
}

// ---- helpers ----

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func forEach[T any](items []T, workers int, fn func(T) error) error {
	ch := make(chan T)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				if err := fn(it); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for _, it := range items {
		ch <- it
	}
	close(ch)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func waitUntil(b *testing.B, d time.Duration, what string, ok func() (bool, string)) {
	b.Helper()
	deadline := time.Now().Add(d)
	for {
		done, last := ok()
		if done {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: not within %s (%s)", what, d, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func freePort(b *testing.B) int {
	_, port, _ := net.SplitHostPort(freeAddr(b))
	p, _ := strconv.Atoi(port)
	return p
}

func readPid(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}
