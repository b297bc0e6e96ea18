//go:build e2e && kube

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/haleproject/hale/client"
	"github.com/haleproject/hale/internal/containerimage"
	"github.com/haleproject/hale/internal/kubeplane"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
	"github.com/haleproject/hale/internal/store"
)

// An Eks cluster on the control plane hale runs (--kubernetes local), its nodes on the local
// provider with real kubelets: every instance joins as a Node hyperpod-<instance id> with
// HyperPod's labels and its group's KubernetesConfig; a BatchReplaceClusterNodes drains and
// labels the Node, deletes it, and a new Node joins Schedulable while a Deployment keeps its
// replicas and a PyTorchJob restarts once; an operator's label starts a reboot that keeps the
// Node's name; a deletion leaves no Node. (A GPU fault's replacement under a training job is
// TestEksTrainsAndResumes'; a Node deleted by hand, TestEksRealKubelets'.)
func TestEksClusterNodes(t *testing.T) {
	parallel(t)
	e, cs, dyn := startEks(t, server.KubeletsReal)
	ctx := context.Background()
	// AWS's own OnCreate for HyperPod on EKS, unmodified (examples/s3/.../eks-base-config).
	lc := e.exampleScripts("eks-base-config")
	g := types.ClusterInstanceGroupSpecification{InstanceGroupName: aws.String("workers"), InstanceType: types.ClusterInstanceTypeMlG52xlarge,
		InstanceCount: aws.Int32(2), ExecutionRole: aws.String(role),
		InstanceStorageConfigs: []types.ClusterInstanceStorageConfig{&types.ClusterInstanceStorageConfigMemberEbsVolumeConfig{Value: types.ClusterEbsVolumeConfig{VolumeSizeInGB: aws.Int32(100)}}},
		LifeCycleConfig:        &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(lc), OnCreate: aws.String("on_create.sh")},
		KubernetesConfig: &types.ClusterKubernetesConfig{Labels: map[string]string{"team": "ml"},
			Taints: []types.ClusterKubernetesTaint{{Key: aws.String("dedicated"), Value: aws.String("training"), Effect: types.ClusterKubernetesTaintEffectNoSchedule}}}}
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("eks"), InstanceGroups: []types.ClusterInstanceGroupSpecification{g},
		Orchestrator: localEks()}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("eks", types.ClusterStatusInservice, 150*time.Second)
	// The scripts moved the kubelet's directory onto the secondary volume, in the node's own
	// /var/lib; the host and the other node have none of it.
	for _, n := range e.nodes("eks") {
		out, err := e.onNode(*n.InstanceId, "readlink /var/lib/kubelet && test -d /opt/sagemaker/kubelet && grep -c 'stop. on_create.sh' /var/log/provision/provisioning.log")
		if err != nil || !strings.HasPrefix(out, "/opt/sagemaker/kubelet\n") {
			t.Errorf("%s: AWS's EKS OnCreate did not move /var/lib/kubelet: %v\n%s", *n.NodeLogicalId, err, out)
		}
	}
	if made := hostPathsCreated(); len(made) > 0 {
		t.Errorf("the lifecycle scripts created %v on the host", made)
	}
	nodeOf := map[string]string{} // logical id -> Node name
	for _, n := range e.nodes("eks") {
		nodeOf[*n.NodeLogicalId] = eks.NodeName(*n.InstanceId)
	}
	for logical, name := range nodeOf {
		kn, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: its Node: %v", logical, err)
		}
		for k, v := range map[string]string{eks.LabelComputeType: "hyperpod", eks.LabelInstanceGroup: "workers", eks.LabelClusterName: "eks",
			eks.LabelInstanceType: "ml.g5.2xlarge", eks.LabelHealth: eks.Schedulable, "team": "ml"} {
			if kn.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", name, k, kn.Labels[k], v)
			}
		}
		if !hasTaint(kn, "dedicated", "training") || kn.Spec.Unschedulable {
			t.Errorf("%s: taints %v, unschedulable %v", name, kn.Spec.Taints, kn.Spec.Unschedulable)
		}
		if ip := nodeIP(kn); ip == "" || ip == "127.0.0.1" {
			t.Errorf("%s: InternalIP %q, want the node's own", name, ip)
		}
	}
	// Its kubelet's report: the CPUs its node has (a local node has the machine's), and the one
	// GPU of an ml.g5.2xlarge through the device plugin, once it registered.
	for _, n := range e.nodes("eks") {
		cpus := e.must(t, *n.InstanceId, "nproc")
		eventually(t, 30*time.Second, "the Node's capacity: the node's CPUs and 1 GPU", func() (bool, string) {
			kn, err := cs.CoreV1().Nodes().Get(ctx, eks.NodeName(*n.InstanceId), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			gpu := kn.Status.Capacity["nvidia.com/gpu"]
			return fmt.Sprint(kn.Status.Capacity.Cpu().Value()) == cpus && gpu.Value() == 1, fmt.Sprintf("%v (nproc %s)", kn.Status.Capacity, cpus)
		})
	}

	// DescribeCluster and DescribeClusterNode show the KubernetesConfig as Current and Desired;
	// an UpdateCluster that changes it relabels the Running nodes' Nodes.
	d := e.waitStatus("eks", types.ClusterStatusInservice, time.Second)
	if k := d.InstanceGroups[0].KubernetesConfig; k == nil || k.CurrentLabels["team"] != "ml" || k.DesiredLabels["team"] != "ml" || len(k.CurrentTaints) != 1 {
		t.Errorf("DescribeCluster's KubernetesConfig: %+v", k)
	}
	g.KubernetesConfig = &types.ClusterKubernetesConfig{Labels: map[string]string{"team": "research", "tier": "gold"}}
	if _, err := e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: aws.String("eks"), InstanceGroups: []types.ClusterInstanceGroupSpecification{g}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the Nodes relabelled and untainted", func() (bool, string) {
		for _, name := range nodeOf {
			kn, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || kn.Labels["team"] != "research" || kn.Labels["tier"] != "gold" || hasTaint(kn, "dedicated", "training") {
				return false, fmt.Sprintf("%s: %v %v %v", name, kn.Labels, kn.Spec.Taints, err)
			}
		}
		n, err := e.SDK.DescribeClusterNode(ctx, &sagemaker.DescribeClusterNodeInput{ClusterName: aws.String("eks"), NodeLogicalId: aws.String("workers-2")})
		if err != nil {
			return false, err.Error()
		}
		k := n.NodeDetails.KubernetesConfig
		return k != nil && k.CurrentLabels["tier"] == "gold" && len(k.CurrentTaints) == 0 && k.DesiredLabels["tier"] == "gold", fmt.Sprintf("%+v", k)
	})

	// A PyTorchJob with auto-resume, one pod on each node.
	createJob(t, dyn)
	jobPods := func() (running int, nodes []string) { return runningPods(cs, "training.kubeflow.org/job-name=train") }
	eventually(t, 60*time.Second, "the job's 2 pods Running", func() (bool, string) {
		n, nodes := jobPods()
		return n == 2, fmt.Sprint(nodes)
	})
	// Inference: a Deployment of 2 replicas on Schedulable nodes.
	replicas := int32(2)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "serve", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "serve"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "serve"}},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{eks.LabelHealth: eks.Schedulable},
					Containers: []corev1.Container{{Name: "serve", Image: containerimage.BusyboxImage,
						Command: []string{"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"}}}}}}}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	available := func() (bool, string) {
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "serve", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.AvailableReplicas == 2 && d.Status.UpdatedReplicas == 2, fmt.Sprintf("available %d", d.Status.AvailableReplicas)
	}
	eventually(t, 60*time.Second, "the Deployment's 2 replicas available", available)
	// A DaemonSet, whose pods a drain leaves on the node.
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "agent", Image: containerimage.BusyboxImage,
						Command: []string{"sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"}}}}}}}
	if _, err := cs.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the DaemonSet's pod Running on each node", func() (bool, string) {
		n, nodes := runningPods(cs, "app=agent")
		return n == 2, fmt.Sprint(nodes)
	})

	// BatchReplaceClusterNodes: the old Node is labelled and cordoned, then deleted; the new
	// instance joins as a new Node, Schedulable.
	var target types.ClusterNodeSummary
	for _, n := range e.nodes("eks") {
		if *n.NodeLogicalId == "workers-1" {
			target = n
		}
	}
	if _, err := e.SDK.BatchReplaceClusterNodes(ctx, &sagemaker.BatchReplaceClusterNodesInput{ClusterName: aws.String("eks"), NodeIds: []string{*target.InstanceId}}); err != nil {
		t.Fatal(err)
	}
	var replacement string
	eventually(t, 90*time.Second, "the replacement's Node Schedulable, the old one gone", func() (bool, string) {
		for _, n := range e.nodes("eks") {
			if *n.NodeLogicalId == "workers-1" && *n.InstanceId != *target.InstanceId && n.InstanceStatus.Status == types.ClusterInstanceStatusRunning {
				replacement = *n.InstanceId
			}
		}
		if replacement == "" {
			return false, "no replacement Running"
		}
		if _, err := cs.CoreV1().Nodes().Get(ctx, eks.NodeName(*target.InstanceId), metav1.GetOptions{}); err == nil {
			return false, "the old Node is still there"
		}
		kn, err := cs.CoreV1().Nodes().Get(ctx, eks.NodeName(replacement), metav1.GetOptions{})
		return err == nil && kn.Labels[eks.LabelHealth] == eks.Schedulable && !kn.Spec.Unschedulable, fmt.Sprint(err)
	})
	eventually(t, 10*time.Second, "the repair's timeline", func() (bool, string) {
		ev := e.events("eks")
		return strings.Contains(ev, "labelled UnschedulablePendingReplacement, tainted and cordoned") && strings.Contains(ev, "done in"), ev
	})
	// No pod is left on the deleted Node (the DaemonSet's, which the drain left): hale deleted
	// them with it, rather than leave them Running on no Node until the pod garbage collector.
	eventually(t, 5*time.Second, "no pod bound to the deleted Node", func() (bool, string) {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + eks.NodeName(*target.InstanceId)})
		return err == nil && len(pods.Items) == 0, fmt.Sprint(pods, err)
	})
	// The Deployment kept its replicas through the replacement.
	eventually(t, 60*time.Second, "the Deployment's 2 replicas available after the replacement", available)
	// The job was restarted once, and runs again on healthy nodes.
	eventually(t, 60*time.Second, "the job restarted and Running", func() (bool, string) {
		n, nodes := jobPods()
		got, err := dyn.Resource(eks.PyTorchJobs).Namespace("default").Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		evs, _ := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=train,reason=AutoResume"})
		return n == 2 && got.GetAnnotations()[eks.AnnotationResumeCount] == "1" && len(evs.Items) == 1 && !slices.Contains(nodes, eks.NodeName(*target.InstanceId)),
			fmt.Sprintf("running %d on %v, count %q, events %d", n, nodes, got.GetAnnotations()[eks.AnnotationResumeCount], len(evs.Items))
	})
	// Its pods all Running again is the job resumed: on the repair's timeline (and in
	// hale_repair_fault_to_job_resumed_seconds), and no longer waited for.
	eventually(t, 30*time.Second, "the job resumed on the repair's timeline", func() (bool, string) {
		rs := e.repairsOf("eks", "workers-1")
		if len(rs) == 0 {
			return false, "no repair of workers-1"
		}
		rp := rs[len(rs)-1]
		return slices.ContainsFunc(rp.Timeline, func(s store.RepairStep) bool { return s.What == "job default/train resumed" }) && len(rp.ResumeJobs) == 0,
			fmt.Sprintf("%+v, waiting for %v", rp.Timeline, rp.ResumeJobs)
	})

	// An operator's label asks for a reboot: the Node keeps its name and is Schedulable again.
	other := nodeOf["workers-2"]
	kn, err := cs.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kn.Labels[eks.LabelHealth] = eks.UnschedulablePendingReboot
	if _, err := cs.CoreV1().Nodes().Update(ctx, kn, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the labelled node rebooted and Schedulable", func() (bool, string) {
		ev := e.events("eks")
		kn, err := cs.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{})
		return err == nil && kn.Labels[eks.LabelHealth] == eks.Schedulable && strings.Contains(ev, "is labelled "+eks.LabelHealth+"=UnschedulablePendingReboot by an operator") &&
			strings.Count(ev, "done in") == 2, ev
	})

	// The job's one retry was spent: this repair did not restart it again.
	eventually(t, 10*time.Second, "the exhausted retry said on the job", func() (bool, string) {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=train,reason=AutoResumeExhausted"})
		return err == nil && len(evs.Items) >= 1, fmt.Sprint(err)
	})
	if got, _ := dyn.Resource(eks.PyTorchJobs).Namespace("default").Get(ctx, "train", metav1.GetOptions{}); got.GetAnnotations()[eks.AnnotationResumeCount] != "1" {
		t.Errorf("the job was restarted beyond its retry count: %v", got.GetAnnotations())
	}

	// The condition named for the action was set for the repair and cleared after it.
	if kn, err := cs.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{}); err == nil {
		found := false
		for _, c := range kn.Status.Conditions {
			if string(c.Type) == eks.UnschedulablePendingReboot {
				found = c.Status == corev1.ConditionFalse && c.Reason == "Repaired"
			}
		}
		if !found {
			t.Errorf("%s: no cleared %s condition: %+v", other, eks.UnschedulablePendingReboot, kn.Status.Conditions)
		}
		if kn.Labels[eks.LabelFaultType] != "" || kn.Labels[eks.LabelFaultReason] != "" || kn.Annotations[eks.AnnotationFaultDetails] == "" {
			t.Errorf("%s after its repair: fault labels %v, fault-details %q (want the labels gone, the details kept)", other, kn.Labels, kn.Annotations[eks.AnnotationFaultDetails])
		}
	}

	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("eks")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("eks", 60*time.Second)
	eventually(t, 10*time.Second, "no Node left", func() (bool, string) {
		ns, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: eks.LabelClusterName + "=eks"})
		return err == nil && len(ns.Items) == 0, fmt.Sprint(ns, err)
	})
}

// startEks starts a server with the control plane hale runs itself (--kubernetes local,
// registered as hale-local), its nodes' kubelets real or simulated (server.Kubelets*), and
// returns it with an administrator's clients of that plane.
func startEks(t *testing.T, kubelets string) (*env, *kubernetes.Clientset, dynamic.Interface) {
	o := options(t, t.TempDir())
	_, file, _, _ := runtime.Caller(0)
	o.Kubernetes, o.KubernetesBin = "local", filepath.Join(filepath.Dir(file), "..", "..", "bin", "k8s")
	if kubelets == server.KubeletsReal {
		realKubelets(&o)
		o.EksEvictTimeout = 10 * time.Second
	}
	e, cs := startEksWith(t, o)
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(o.DataDir, "kubernetes", "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	return e, cs, dynamic.NewForConfigOrDie(rc)
}

// startEksWith starts a server with options o (a control plane of its own) and returns it with
// an administrator's client of that plane.
func startEksWith(t *testing.T, o server.Options) (*env, *kubernetes.Clientset) {
	o.DeepHealthCheckDuration = 2 * time.Second
	e := &env{Env: servertest.Start(t, o), t: t, scripts: o.ObjectStore}
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(o.DataDir, "kubernetes", "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	return e, kubernetes.NewForConfigOrDie(rc)
}

// createJob creates autoResumeJob (train, in default).
func createJob(t *testing.T, dyn dynamic.Interface) {
	pj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(autoResumeJob), &pj.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(eks.PyTorchJobs).Namespace("default").Create(context.Background(), pj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runningPods counts the Running pods the selector picks (not being deleted) and names their
// nodes.
func runningPods(cs kubernetes.Interface, selector string) (running int, nodes []string) {
	pods, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return 0, nil
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running++
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	return running, nodes
}

func nodeIP(kn *corev1.Node) string {
	for _, a := range kn.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

func hasTaint(kn *corev1.Node, key, value string) bool {
	for _, t := range kn.Spec.Taints {
		if t.Key == key && t.Value == value {
			return true
		}
	}
	return false
}

// TestEksNodeRecoveryNone, on real kubelets: every Node of a p5 group carries EC2's network
// topology labels; a
// deep health check leaves each Node deep-health-check-status=Passed and Schedulable. On an
// Eks cluster with NodeRecovery None, an application error (Xid
// 13) under an auto-resume PyTorchJob changes nothing (no label, the job's pods stay, no
// AutoResume); a GPU lost (Xid 79) labels the Node UnschedulablePendingReplacement, taints and
// cordons it and evicts its pods, the job restarts on the healthy nodes, and the instance
// stays, labelled, for an operator.
func TestEksNodeRecoveryNone(t *testing.T) {
	parallel(t)
	e, cs, dyn := startEks(t, server.KubeletsReal)
	ctx := context.Background()
	lc := e.script("eks-none", "on_create.sh", recordScript)
	g := types.ClusterInstanceGroupSpecification{InstanceGroupName: aws.String("workers"), InstanceType: types.ClusterInstanceTypeMlP548xlarge,
		InstanceCount: aws.Int32(3), ExecutionRole: aws.String(role),
		LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(lc), OnCreate: aws.String("on_create.sh")}}
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("manual"), InstanceGroups: []types.ClusterInstanceGroupSpecification{g},
		NodeRecovery: types.ClusterNodeRecoveryNone,
		Orchestrator: localEks()}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("manual", types.ClusterStatusInservice, 90*time.Second)
	// A p5 has EC2 topology: each Node carries its network nodes, top layer first.
	for _, n := range e.storeNodes("manual") {
		kn, err := cs.CoreV1().Nodes().Get(ctx, eks.NodeName(n.InstanceID), metav1.GetOptions{})
		if err != nil || len(n.Details.NetworkNodes) < 3 {
			t.Fatalf("%s: %v, network nodes %v", n.LogicalID, err, n.Details.NetworkNodes)
		}
		for i, id := range n.Details.NetworkNodes {
			if k := fmt.Sprintf("%s%d", eks.LabelNetworkNodeLayer, i+1); kn.Labels[k] != id {
				t.Errorf("%s: %s = %q, want %q", kn.Name, k, kn.Labels[k], id)
			}
		}
	}

	// A deep health check (InstanceStress) holds each Node Unschedulable, tainted, with
	// deep-health-check-status InProgress, and leaves it Passed and Schedulable.
	if _, err := e.SDK.StartClusterHealthCheck(ctx, &sagemaker.StartClusterHealthCheckInput{ClusterName: aws.String("manual"),
		DeepHealthCheckConfigurations: []types.InstanceGroupHealthCheckConfiguration{{InstanceGroupName: aws.String("workers"),
			DeepHealthChecks: []types.DeepHealthCheckType{types.DeepHealthCheckTypeInstanceStress}}}}); err != nil {
		t.Fatal(err)
	}
	// The limit bounds a failure: three nodes' checks and labels took over a minute in a
	// parallel run on two busy CPUs.
	eventually(t, 2*time.Minute, "every Node Passed and Schedulable", func() (bool, string) {
		ns, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: eks.LabelClusterName + "=manual"})
		if err != nil || len(ns.Items) != 3 {
			return false, fmt.Sprint(err)
		}
		passed, nodes := 0, ""
		for _, kn := range ns.Items {
			if kn.Labels[eks.LabelDeepHealth] == "Passed" && kn.Labels[eks.LabelHealth] == eks.Schedulable && !kn.Spec.Unschedulable && !hasTaint(&kn, eks.TaintHealth, eks.Unschedulable) {
				passed++
			}
			nodes += fmt.Sprintf("\n  %s: %s=%q %s=%q unschedulable=%v", kn.Name, eks.LabelDeepHealth, kn.Labels[eks.LabelDeepHealth],
				eks.LabelHealth, kn.Labels[eks.LabelHealth], kn.Spec.Unschedulable)
		}
		// What a failure needs to be understood: each Node's labels, and what hale did.
		return passed == 3, fmt.Sprintf("%d passed%s\nevents:\n%s", passed, nodes, tail(e.events("manual"), 12))
	})
	// The check's log says the Node was held Unschedulable meanwhile (too quick to poll for).
	for _, n := range e.storeNodes("manual") {
		if l := e.logStream("manual", "DeepHealthCheckResults/"+n.InstanceID); !strings.Contains(l, "deep-health-check-status InProgress") {
			t.Errorf("%s: the deep health check did not hold the Node:\n%s", n.LogicalID, l)
		}
	}
	createJob(t, dyn)
	const selector = "training.kubeflow.org/job-name=train"
	eventually(t, 60*time.Second, "the job's 2 pods Running", func() (bool, string) {
		n, nodes := runningPods(cs, selector)
		return n == 2, fmt.Sprint(nodes)
	})
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]bool{}
	for _, p := range pods.Items {
		before[string(p.UID)] = true
	}
	nodeName := pods.Items[0].Spec.NodeName
	var target *store.Node
	for _, n := range e.storeNodes("manual") {
		if eks.NodeName(n.InstanceID) == nodeName {
			target = n
		}
	}
	if target == nil {
		t.Fatalf("no hale node behind %s", nodeName)
	}

	// An application error: recorded, no node action, the job untouched.
	e.inject(target.InstanceID, local.Fault{Xid: 13, LoseGPU: -1})
	eventually(t, 20*time.Second, "the Xid 13 recorded with no node action", func() (bool, string) {
		ev := e.events("manual")
		return strings.Contains(ev, "No node action"), ev
	})
	kn, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil || kn.Labels[eks.LabelHealth] != eks.Schedulable || kn.Spec.Unschedulable {
		t.Errorf("an application error changed the Node: %v %v", kn.Labels, err)
	}
	pods, _ = cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
	for _, p := range pods.Items {
		if !before[string(p.UID)] {
			t.Errorf("an application error restarted the job: pod %s is new", p.Name)
		}
	}
	if evs, _ := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=train,reason=AutoResume"}); len(evs.Items) > 0 {
		t.Errorf("an application error resumed the job: %s", evs.Items[0].Message)
	}

	// A lost GPU: labelled, tainted, cordoned, evicted; the job restarts elsewhere; nothing more.
	e.inject(target.InstanceID, xid(79))
	eventually(t, 60*time.Second, "the Node labelled and cordoned, the repair held, the job Running elsewhere", func() (bool, string) {
		kn, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		rs := e.repairsOf("manual", target.LogicalID)
		if kn.Labels[eks.LabelHealth] != eks.UnschedulablePendingReplacement || !kn.Spec.Unschedulable || !hasTaint(kn, eks.TaintHealth, eks.Unschedulable) {
			// What a failure needs: the Node, hale's repairs of it and its events.
			return false, fmt.Sprintf("labels %v, taints %v; repairs %s; events:\n%s", kn.Labels, kn.Spec.Taints, repairStates(rs), tail(e.events("manual"), 12))
		}
		if len(rs) != 1 || rs[0].State != store.RepairHeld {
			return false, "repairs " + repairStates(rs)
		}
		n, nodes := runningPods(cs, selector)
		return n == 2 && !slices.Contains(nodes, nodeName), fmt.Sprintf("job Running %d on %v", n, nodes)
	})
	if ev := e.events("manual"); !strings.Contains(ev, "NodeRecovery is None") {
		t.Errorf("no event says what to do:\n%s", ev)
	}
	if evs, _ := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=train,reason=AutoResume"}); len(evs.Items) != 1 {
		t.Errorf("the job was resumed %d times for one fault", len(evs.Items))
	}
	if after := e.nodeOf("manual", target.LogicalID); after.InstanceID != target.InstanceID {
		t.Errorf("NodeRecovery None replaced the node: %s", after.InstanceID)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("manual")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("manual", 60*time.Second)
}

// autoResumeJob is a PyTorchJob with HyperPod's auto-resume annotation (one retry), a master and
// a worker on different nodes.
const autoResumeJob = `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: train
  namespace: default
  annotations:
    sagemaker.amazonaws.com/enable-job-auto-resume: "true"
    sagemaker.amazonaws.com/job-max-retry-count: "1"
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
            image: registry.hale.internal/hale/busybox:bookworm
            command: [sh, -c, "trap 'exit 0' TERM; while :; do sleep 1; done"]
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template: *pod
`

// TestEksOnARegisteredCluster: a Kubernetes cluster hale does not run (a second control plane
// started by the test, on the address the server's nodes reach) registered through the
// endpoint, as hale kube register does, works as the local one with real kubelets: an Eks
// cluster on its ARN joins as Nodes its kubelets register with certificates from that cluster's
// own signers (hale's requests, approved by hale's narrow ServiceAccount, then deleted), labelled
// by hale; a pod pulls its image from hale's registry, kubectl logs reaches its kubelet, and a
// pod on the other node reaches it by its Service's name (that cluster's CoreDNS, and kube-proxy
// with its ServiceAccount token); a replacement deletes the old Node and joins a new one.
func TestEksOnARegisteredCluster(t *testing.T) {
	parallel(t)
	o := options(t, t.TempDir())
	realKubelets(&o)
	o.EksEvictTimeout = 10 * time.Second
	e, _ := startEksWith(t, o)
	ctx := context.Background()
	local, err := url.Parse(e.App.KubernetesServer())
	if err != nil {
		t.Fatal(err)
	}
	// hale's own control plane serves the registry on that address; this one needs none.
	plane, err := kubeplane.Start(ctx, kubeplane.Config{Bin: o.KubernetesBin, Dir: t.TempDir(), Address: local.Hostname(), NoRegistry: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	admin, err := os.ReadFile(plane.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(ctx, client.Options{Profile: "hale", EndpointURL: e.endpoint(), DataDir: e.Options.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(server.KubeRegistration{Name: "training", Kubeconfig: string(admin)})
	body, err := c.Post(ctx, server.KubePath, req)
	var info server.KubeClusterInfo
	if err != nil || json.Unmarshal(body, &info) != nil {
		t.Fatalf("registering: %s %v", body, err)
	}
	cs, err := plane.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	lc := e.script("eks-outside", "on_create.sh", recordScript)
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("outside"),
		Orchestrator: &types.ClusterOrchestrator{Eks: &types.ClusterOrchestratorEksConfig{ClusterArn: aws.String(info.ClusterArn)}},
		InstanceGroups: []types.ClusterInstanceGroupSpecification{{InstanceGroupName: aws.String("workers"), InstanceType: types.ClusterInstanceTypeMlG52xlarge,
			InstanceCount: aws.Int32(2), ExecutionRole: aws.String(role),
			LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(lc), OnCreate: aws.String("on_create.sh")}}}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("outside", types.ClusterStatusInservice, 120*time.Second)
	nodes := e.nodes("outside")
	var names []string
	for _, n := range nodes {
		kn, err := cs.CoreV1().Nodes().Get(ctx, eks.NodeName(*n.InstanceId), metav1.GetOptions{})
		if err != nil || kn.Labels[eks.LabelClusterName] != "outside" || kn.Labels[eks.LabelHealth] != eks.Schedulable {
			t.Fatalf("%s on the registered cluster: %v %v", *n.InstanceId, kn, err)
		}
		if _, fake := kn.Annotations["kwok.x-k8s.io/node"]; fake || kn.Status.NodeInfo.KubeletVersion != kubeplane.Version || kn.Spec.PodCIDR == "" {
			t.Errorf("%s: not registered by a real kubelet with a pod CIDR: %v %+v %q", kn.Name, kn.Annotations, kn.Status.NodeInfo, kn.Spec.PodCIDR)
		}
		names = append(names, kn.Name)
	}
	if csrs, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); err != nil || len(csrs.Items) != 0 {
		t.Errorf("hale's certificate requests are left on the cluster: %v %v", csrs, err)
	}

	// A pod on one node serves; one on the other reaches it by its Service's name.
	hello := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default", Labels: map[string]string{"app": "hello"}},
		Spec: corev1.PodSpec{NodeName: names[1], Containers: []corev1.Container{{Name: "hello", Image: containerimage.BusyboxImage,
			Command: []string{"sh", "-c", "echo hello from $(hostname); busybox mkdir -p /www && echo pong > /www/ping && exec busybox httpd -f -p 8080 -h /www"}}}}}
	caller := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "caller", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: names[0], Containers: []corev1.Container{{Name: "caller", Image: containerimage.BusyboxImage,
			Command: []string{"sh", "-c", "exec sleep 3600"}}}}}
	if _, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "hello"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{hello, caller} {
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 90*time.Second, "the pods Running", func() (bool, string) {
		n, _ := runningPods(cs, "")
		return n == 2, fmt.Sprint(n)
	})
	eventually(t, 20*time.Second, "kubectl logs through the node's kubelet", func() (bool, string) {
		logs, err := cs.CoreV1().Pods("default").GetLogs("hello", &corev1.PodLogOptions{}).Do(ctx).Raw()
		return err == nil && strings.Contains(string(logs), "hello from hello"), fmt.Sprintf("%q %v", logs, err)
	})
	kubectl := func(args ...string) (string, error) {
		out, err := exec.Command(filepath.Join(o.KubernetesBin, "kubectl"), append([]string{"--kubeconfig", plane.AdminKubeconfig()}, args...)...).CombinedOutput()
		return string(out), err
	}
	eventually(t, 60*time.Second, "the Service answers by its name from the other node", func() (bool, string) {
		out, err := kubectl("exec", "caller", "--", "sh", "-c", `printf 'GET /ping HTTP/1.0\r\n\r\n' | nc -w 3 hello.default.svc.cluster.local 80`)
		return err == nil && strings.HasSuffix(strings.TrimSpace(out), "pong"), fmt.Sprintf("%q %v", out, err)
	})

	old := *nodes[0].InstanceId
	if _, err := e.SDK.BatchReplaceClusterNodes(ctx, &sagemaker.BatchReplaceClusterNodesInput{ClusterName: aws.String("outside"), NodeIds: []string{old}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 120*time.Second, "the old Node gone and a new one Schedulable", func() (bool, string) {
		if _, err := cs.CoreV1().Nodes().Get(ctx, eks.NodeName(old), metav1.GetOptions{}); err == nil {
			return false, "the old Node is still there"
		}
		ns, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: eks.LabelClusterName + "=outside," + eks.LabelHealth + "=" + eks.Schedulable})
		return err == nil && len(ns.Items) == 2, fmt.Sprint(err)
	})
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("outside")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("outside", 60*time.Second)
	eventually(t, 10*time.Second, "no Node left", func() (bool, string) {
		ns, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: eks.LabelClusterName + "=outside"})
		return err == nil && len(ns.Items) == 0, fmt.Sprint(ns, err)
	})
}

// localEksArn is the Kubernetes cluster the tests' servers run and register (hale-local).
const localEksArn = "arn:aws:eks:us-west-2:123456789012:cluster/hale-local"

// localEks is CreateCluster's Orchestrator for an Eks cluster on the tests' control plane.
func localEks() *types.ClusterOrchestrator {
	return &types.ClusterOrchestrator{Eks: &types.ClusterOrchestratorEksConfig{ClusterArn: aws.String(localEksArn)}}
}
