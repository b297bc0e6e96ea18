//go:build kube

package eks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentserver"
	"github.com/haleproject/hale/internal/kubeplane"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
	"github.com/haleproject/hale/internal/store/sqlite"
)

// BenchmarkEks1000Repairs measures hale's Kubernetes repair path at scale: one Eks cluster of
// 1,000 nodes on a real control plane (internal/kubeplane: etcd, kube-apiserver, the controller
// manager, the scheduler, kwok as every Node's kubelet, and Kubeflow's training operator), with
// 1,000 filler pods (a Deployment) and an auto-resume PyTorchJob of 16 pods (one per node, 8
// GPUs each). Twenty times, on a node that runs one of the job's pods (never the same node
// twice), an Xid 79 line is appended to the node's kernel log, and the benchmark times, from
// that write: the repair opened in hale, the Node labelled UnschedulablePendingReplacement, the
// job's pod gone from it, the Node drained (every pod evicted), the job's 16 pods made again,
// bound to other Nodes and Running, and the repair done (a replacement Running, its Node
// Schedulable). The Kubernetes times come from watches, hale's from its store. It reads the
// CPU time and resident memory of hale, of each control-plane process and of its own process
// (the agents) from /proc: idle, over the faults, and idle again without hale; and it times
// the bring-up (the Nodes registered and Ready, then admitted by hale).
//
// What is real and what stands in:
//   - hale: its store (SQLite), agent server (gRPC), controller and Eks orchestrator, wired as
//     `hale server` wires them, alone in a process of their own (this test binary again,
//     HALE_EKS_BENCH_ROLE=hale); the HTTP API is left out, and JoinTimeout is 30 min (the
//     bring-up of 1,000 nodes at once takes longer than the default 60 s). The provider is the
//     benchmark's: the 1,000 nodes exist already (seeded store rows, as after a CreateCluster
//     whose nodes ran their lifecycle scripts: Joining), and a replacement is a real agent
//     (this binary, HALE_EKS_BENCH_ROLE=agent) in a private mount namespace whose /opt is a
//     tmpfs (the lifecycle files), plus its Node, registered as its kubelet would.
//   - the nodes' agents: 1,000 real agents (internal/agent, over the real gRPC protocol, a
//     heartbeat a second each, a kernel-log monitor each) in the benchmark's own process. They
//     simulate no GPUs (no device files to poll), to keep their own cost off the machine.
//   - faults: a kernel-log line read by the node's agent, reported as a finding, judged by the
//     controller's policy, which opens the repair: the same path as on a real node.
//   - the Nodes: kwok Nodes the benchmark registers as the kubelets would (on EKS kubelets
//     register their own Nodes: hale's SimulatedKubelets is off), p5.48xlarge-sized.
//
// Run, as root (the training operator and the replacements' agents run in mount namespaces of
// their own), on an otherwise idle machine; it takes about 15 minutes, most of it hale
// admitting the 1,000 Nodes, and prints its tables on standard output:
//
//	go test -tags kube ./internal/orchestrator/eks -run '^$' -bench Eks1000 -benchtime 1x -timeout 60m
//
// HALE_EKS_BENCH_NODES and HALE_EKS_BENCH_FAULTS change the size (1000 and 20);
// HALE_EKS_BENCH_LOGS=DIR copies hale's and the control plane's logs there at the end. It
// stops everything it started, also when it fails.
func BenchmarkEks1000Repairs(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the training operator and the replacements' agents run in mount namespaces")
	}
	nodes, faults := envInt("HALE_EKS_BENCH_NODES", 1000), envInt("HALE_EKS_BENCH_FAULTS", 20)
	ctx := context.Background()
	dir := b.TempDir()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", "..", "bin", "k8s")

	// The control plane.
	cp, err := kubeplane.Start(ctx, kubeplane.Config{Bin: bin, Dir: filepath.Join(dir, "kubernetes"), Kwok: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if errors.Is(err, kubeplane.ErrNotBuilt) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cp.Stop)
	haleDir := filepath.Join(dir, "hale")
	if logs := os.Getenv("HALE_EKS_BENCH_LOGS"); logs != "" {
		b.Cleanup(func() { keepLogs(b, logs, haleDir, filepath.Join(dir, "kubernetes", "logs")) })
	}
	adminRC, err := clientcmd.BuildConfigFromFlags("", cp.AdminKubeconfig())
	if err != nil {
		b.Fatal(err)
	}
	adminRC.QPS, adminRC.Burst = 500, 1000 // the benchmark's own client plays 1,000 kubelets
	cs := kubernetes.NewForConfigOrDie(adminRC)
	dyn := dynamic.NewForConfigOrDie(adminRC)

	// hale's registration of the cluster (its ServiceAccount and narrow ClusterRole), and its
	// store: an InService Eks cluster of one group whose nodes finished their lifecycle scripts.
	kc, err := eks.Register(ctx, rest.CopyConfig(adminRC), "hale-bench", "us-west-2", "123456789012", "")
	if err != nil {
		b.Fatal(err)
	}
	seeded, err := seed(haleDir, kc, nodes)
	if err != nil {
		b.Fatal(err)
	}

	// Bring-up, 1: the kubelets register the 1,000 Nodes and kwok reports them Ready.
	start := time.Now()
	if err := forEach(seeded.nodes, 16, func(n seedNode) error {
		_, err := cs.CoreV1().Nodes().Create(ctx, kubeletNode(eks.NodeName(n.instanceID), n.instanceID), metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	created := time.Since(start)
	waitUntil(b, 10*time.Minute, "every Node Ready", func() (bool, string) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for i := range list.Items {
			if nodeReady(&list.Items[i]) {
				ready++
			}
		}
		return ready == nodes, fmt.Sprintf("%d of %d Ready", ready, nodes)
	})
	nodesReady := time.Since(start)

	// Bring-up, 2: hale and the agents start; hale admits each node once its Node is Ready
	// (labelled, Schedulable).
	agentAddr, dhcPort := freeAddr(b), freePort(b)
	hale, stopHale := startHale(b, benchConfig{Dir: haleDir, AgentListen: agentAddr, AdminKubeconfig: cp.AdminKubeconfig(), DHCPort: dhcPort,
		JoinTimeout: 30 * time.Minute})
	actx, stopAgents := context.WithCancel(ctx)
	pool := &agentPool{root: filepath.Join(dir, "agents"), server: agentAddr, caFile: filepath.Join(haleDir, "agent-ca", "ca.crt"), dhcPort: dhcPort, stops: map[string]context.CancelFunc{}}
	b.Cleanup(func() { stopAgents(); pool.wg.Wait() })
	start = time.Now()
	for _, n := range seeded.nodes {
		pool.start(actx, n.instanceID, n.token)
	}
	go pool.reapTerminated(actx, filepath.Join(haleDir, "terminated"))
	st, err := sqlite.Open(filepath.Join(haleDir, "hale.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	var registered, joined time.Duration
	waitUntil(b, 30*time.Minute, "every node Running in hale", func() (bool, string) {
		var reg, ready int
		st.Read(ctx, func(tx store.Tx) error {
			ns, err := tx.NodesOf(seeded.clusterID)
			for _, n := range ns {
				if n.Details.AgentCertSerial != "" {
					reg++
				}
				if n.Details.Phase == store.PhaseReady {
					ready++
				}
			}
			return err
		})
		if reg == nodes && registered == 0 {
			registered = time.Since(start)
		}
		return ready == nodes, fmt.Sprintf("%d agents registered, %d of %d nodes Running", reg, ready, nodes)
	})
	joined = time.Since(start)
	procs := append([]proc{{"hale", hale.Process.Pid}}, children(hale.Process.Pid)...)
	procs = append(procs, proc{"benchmark (agents)", os.Getpid()})

	// The workload: filler pods on every node, then the job.
	waitUntil(b, time.Minute, "the default ServiceAccount", func() (bool, string) {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	start = time.Now()
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, filler(int32(nodes)), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	waitUntil(b, 15*time.Minute, "the filler pods available", func() (bool, string) {
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "serve", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.AvailableReplicas == int32(nodes), fmt.Sprintf("%d of %d available", d.Status.AvailableReplicas, nodes)
	})
	fillerUp := time.Since(start)
	pj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(fmt.Appendf(nil, benchJob, jobPods-1), &pj.Object); err != nil {
		b.Fatal(err)
	}
	if _, err := dyn.Resource(eks.PyTorchJobs).Namespace("default").Create(ctx, pj, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	waitUntil(b, 5*time.Minute, "the job's pods Running", func() (bool, string) {
		running, _ := jobRunning(ctx, cs)
		return len(running) == jobPods, fmt.Sprintf("%d of %d Running", len(running), jobPods)
	})
	fmt.Printf("bring-up: %d Nodes created in %.1f s, all Ready after %.1f s; hale: %d agents registered after %.1f s, every node Running (its Node labelled) after %.1f s; %d filler pods available after %.1f s",
		nodes, created.Seconds(), nodesReady.Seconds(), nodes, registered.Seconds(), joined.Seconds(), nodes, fillerUp.Seconds())
	fmt.Println()
	b.ReportMetric(nodesReady.Seconds(), "nodes-ready-s")
	b.ReportMetric(joined.Seconds(), "hale-all-running-s")

	// Idle: 1,000 nodes heartbeating, their Nodes leased by kwok, hale polling the Nodes.
	time.Sleep(10 * time.Second)
	const idleWindow = 30 * time.Second
	before := sample(procs)
	time.Sleep(idleWindow)
	idle := sample(procs)

	// The faults.
	faulted := map[string]bool{} // logical ids
	var results []faultResult
	peak := &peakRSS{max: map[string]int64{}}
	pctx, stopPeak := context.WithCancel(ctx)
	go peak.run(pctx, procs)
	faultStart, faultSample := time.Now(), sample(procs)
	for i := 0; i < faults; i++ {
		target := pickTarget(b, ctx, cs, seeded, faulted, i)
		faulted[target.logicalID] = true
		r := runFault(b, ctx, cs, st, seeded.clusterID, target, pool.kernelLog(target.instanceID))
		results = append(results, r)
		time.Sleep(2 * time.Second) // let the job settle
	}
	faultEnd, faultWall := sample(procs), time.Since(faultStart)
	stopPeak()

	// The same cluster without hale (and its agents): what hale costs the control plane.
	stopHale()
	stopAgents()
	pool.wg.Wait()
	time.Sleep(10 * time.Second)
	plane := children(0)
	alone0 := sample(plane)
	time.Sleep(idleWindow)
	alone := sample(plane)

	report(b, results, procs, before, idle, alone0, alone, idleWindow, faultSample, faultEnd, faultWall, peak)
	checkNoOtherRepairs(b, st, seeded.clusterID, faulted)
	summarizeLog(b, filepath.Join(haleDir, "hale.log"))
	summarizeThrottling(filepath.Join(haleDir, "hale.out"))
}

// jobPods is the size of the benchmark's PyTorchJob (a master and 15 workers).
const jobPods = 16

// benchJob is the PyTorchJob: auto-resume with retries to spare, one pod a node (8 GPUs each,
// anti-affinity), on Schedulable nodes only. %d is the number of workers.
const benchJob = `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: train
  namespace: default
  annotations:
    sagemaker.amazonaws.com/enable-job-auto-resume: "true"
    sagemaker.amazonaws.com/job-max-retry-count: "1000"
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template: &pod
        metadata:
          labels: {app: train}
        spec:
          nodeSelector: {sagemaker.amazonaws.com/node-health-status: Schedulable}
          affinity:
            podAntiAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
              - labelSelector: {matchLabels: {app: train}}
                topologyKey: kubernetes.io/hostname
          containers:
          - name: pytorch
            image: pytorch/pytorch
            command: [torchrun, train.py]
            resources:
              requests: {nvidia.com/gpu: 8, cpu: "96", memory: 1000Gi}
              limits: {nvidia.com/gpu: 8}
    Worker:
      replicas: %d
      restartPolicy: OnFailure
      template: *pod
`

// filler is a Deployment of small pods with no placement rules: they land on every node.
func filler(replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "serve"}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "serve", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "serve", Image: "vllm/vllm-openai",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
						corev1.ResourceMemory: resource.MustParse("16Gi")}}}}}}}}
}

// kubeletNode is the Node a p5.48xlarge's kubelet registers, for kwok to play that kubelet.
func kubeletNode(name, instanceID string) *corev1.Node {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("192"), corev1.ResourceMemory: resource.MustParse("2048Gi"),
		corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("8")}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels:      map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec:   corev1.NodeSpec{ProviderID: "aws:///us-west-2a/" + instanceID},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res}}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ---- the seeded store ----

type seedNode struct {
	instanceID, logicalID, token, hostname string
}

type seeded struct {
	clusterID string
	nodes     []seedNode
	byNode    map[string]seedNode // by Node name
}

// seed writes hale's store for an InService Eks cluster of n nodes that ran their lifecycle
// scripts and wait for Kubernetes (Joining), each with a one-time agent token, and the
// cluster's lifecycle script (for replacements).
func seed(dir string, kc *store.KubeCluster, n int) (*seeded, error) {
	lc := filepath.Join(dir, "s3", "bench", "eks")
	if err := os.MkdirAll(lc, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(lc, "on_create.sh"), []byte("#!/bin/sh\necho \"on_create on $(hostname)\"\n"), 0o755); err != nil {
		return nil, err
	}
	st, err := sqlite.Open(filepath.Join(dir, "hale.db"))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	s := &seeded{clusterID: "ekbench00001", byNode: map[string]seedNode{}}
	now := time.Now().UTC().Truncate(time.Millisecond)
	err = st.Write(context.Background(), func(tx store.Tx) error {
		if err := tx.PutKubeCluster(kc); err != nil {
			return err
		}
		spec := api.CreateClusterRequest{ClusterName: new("bench"), NodeRecovery: new(api.ClusterNodeRecoveryAutomatic),
			Orchestrator: &api.ClusterOrchestrator{Eks: &api.ClusterOrchestratorEksConfig{ClusterArn: new(kc.ARN)}}}
		if err := tx.InsertCluster(&store.Cluster{ID: s.clusterID, Name: "bench", ARN: "arn:aws:sagemaker:us-west-2:123456789012:cluster/" + s.clusterID,
			Status: api.ClusterStatusInService, Spec: spec, CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		g := &store.Group{ClusterID: s.clusterID, Name: "workers", CreatedAt: now,
			Spec: api.ClusterInstanceGroupSpecification{InstanceGroupName: new("workers"), InstanceCount: new(int32(n)),
				InstanceType: new(api.ClusterInstanceTypeMlP548xlarge), ExecutionRole: new("arn:aws:iam::123456789012:role/hale-bench"),
				LifeCycleConfig: &api.ClusterLifeCycleConfig{SourceS3Uri: new("s3://bench/eks"), OnCreate: new("on_create.sh")}},
			State: store.GroupState{Status: api.InstanceGroupStatusInService, CurrentImageID: "default", DesiredImageID: "default", NextLogicalOrdinal: n}}
		if err := tx.PutGroup(g); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			token, hash := agentserver.NewToken()
			id := fmt.Sprintf("i-0be%014x", i+1)
			ip := fmt.Sprintf("10.1.%d.%d", (i+10)/250, (i+10)%250+1)
			node := &store.Node{ClusterID: s.clusterID, InstanceID: id, LogicalID: fmt.Sprintf("workers-%d", i+1), GroupName: "workers",
				InstanceType: string(api.ClusterInstanceTypeMlP548xlarge), Status: api.ClusterInstanceStatusPending, LaunchTime: now,
				StatusMessage: "Waiting for Kubernetes: its Node has not registered yet"}
			d := &node.Details
			d.PrivateIP, d.PrivateDNSHostname, d.OrchestratorName = ip, provider.Hostname(ip)+".us-west-2.compute.internal", provider.Hostname(ip)
			d.Phase, d.PhaseSince, d.AgentTokenHash, d.Ordinal, d.ImageID = store.PhaseJoining, now, hash, i+1, "default"
			d.CommandID, d.RecordedCommand = "lifecycle-"+id, "lifecycle-"+id
			if err := tx.InsertNode(node); err != nil {
				return err
			}
			sn := seedNode{instanceID: id, logicalID: node.LogicalID, token: token, hostname: provider.Hostname(ip)}
			s.nodes = append(s.nodes, sn)
			s.byNode[eks.NodeName(id)] = sn
		}
		return nil
	})
	return s, err
}

// ---- the hale process ----

// The benchmark runs this test binary again as hale, and as a replacement's agent.
const (
	roleEnv   = "HALE_EKS_BENCH_ROLE"
	configEnv = "HALE_EKS_BENCH_CONFIG"
)

// benchConfig configures the hale process (and, with Server and InstanceID, an agent).
type benchConfig struct {
	Dir             string // hale.db, s3/, hale.log, launched/<instance>/, terminated/
	AgentListen     string
	AdminKubeconfig string // for the replacements' kubelets, which register their Nodes
	DHCPort         int
	JoinTimeout     time.Duration

	Server, InstanceID, StateDir, TokenFile, CAFile string
}

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "hale":
		os.Exit(runHale(readConfig()))
	case "agent":
		os.Exit(runAgent(readConfig()))
	}
	os.Exit(m.Run())
}

func readConfig() benchConfig {
	var c benchConfig
	b, err := os.ReadFile(os.Getenv(configEnv))
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmark config:", err)
		os.Exit(2)
	}
	return c
}
