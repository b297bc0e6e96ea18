package eks_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/harness"
	"github.com/haleproject/hale/internal/nodestack"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/orchestrator/orchestratortest"
	"github.com/haleproject/hale/internal/store"
)

// fakeARN is the registered Kubernetes cluster the tests' clusters attach to.
const fakeARN = "arn:aws:eks:us-west-2:123456789012:cluster/fake"

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// apiServer is client-go's fake API server for one harness, with what the real one and its
// controllers do that the tests rely on, played by reactors:
//   - a Node is Ready when it is created (kwok's part for a simulated kubelet; a scripted
//     kubelet creates its Node so);
//   - a pod list honours the spec.nodeName field selector, as the API server does;
//   - a pod created gets a UID;
//   - an eviction deletes the pod, unless a PodDisruptionBudget blocks it (Blocked: 429);
//     a pod labelled respawn is then made again on its Node under a new name, as a
//     Deployment's that tolerates every taint is scheduled back onto the cordoned Node.
type apiServer struct {
	cs  *fake.Clientset
	dyn *dynamicfake.FakeDynamicClient
	now func() metav1.Time

	mu sync.Mutex
	// Blocked names pods (namespace/name) whose eviction a budget refuses.
	Blocked map[string]bool
	// Evicted names the pods evicted, in order.
	Evicted []string
}

func newAPIServer(now func() metav1.Time) *apiServer {
	a := &apiServer{cs: fake.NewClientset(), now: now, Blocked: map[string]bool{}}
	a.cs.PrependReactor("create", "nodes", func(act k8stesting.Action) (bool, runtime.Object, error) {
		kn := act.(k8stesting.CreateAction).GetObject().(*corev1.Node)
		if len(kn.Status.Conditions) == 0 {
			kn.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", LastTransitionTime: now(), LastHeartbeatTime: now()}}
		}
		return false, nil, nil // the tracker stores it
	})
	a.cs.PrependReactor("list", "pods", func(act k8stesting.Action) (bool, runtime.Object, error) {
		r := act.(k8stesting.ListAction).GetListRestrictions()
		if r.Fields == nil || r.Fields.Empty() {
			return false, nil, nil
		}
		obj, err := a.cs.Tracker().List(podsGVR, corev1.SchemeGroupVersion.WithKind("Pod"), act.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		out := &corev1.PodList{}
		for _, p := range obj.(*corev1.PodList).Items {
			if r.Fields.Matches(fields.Set{"spec.nodeName": p.Spec.NodeName}) && (r.Labels == nil || r.Labels.Matches(labels.Set(p.Labels))) {
				out.Items = append(out.Items, p)
			}
		}
		return true, out, nil
	})
	a.cs.PrependReactor("create", "pods", func(act k8stesting.Action) (bool, runtime.Object, error) {
		if act.GetSubresource() != "eviction" {
			if p, ok := act.(k8stesting.CreateAction).GetObject().(*corev1.Pod); ok && p.UID == "" {
				p.UID = uuid.NewUUID()
			}
			return false, nil, nil
		}
		ev := act.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		key := ev.Namespace + "/" + ev.Name
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.Blocked[key] {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
		}
		obj, err := a.cs.Tracker().Get(podsGVR, ev.Namespace, ev.Name)
		if err != nil {
			return true, nil, err
		}
		if err := a.cs.Tracker().Delete(podsGVR, ev.Namespace, ev.Name); err != nil {
			return true, nil, err
		}
		a.Evicted = append(a.Evicted, key)
		if p := obj.(*corev1.Pod); p.Labels["respawn"] != "" {
			again := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", p.Labels["respawn"], len(a.Evicted)), Namespace: p.Namespace,
				Labels: p.Labels, UID: uuid.NewUUID()}, Spec: p.Spec, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
			if err := a.cs.Tracker().Create(podsGVR, again, p.Namespace); err != nil {
				return true, nil, err
			}
		}
		return true, ev, nil
	})
	a.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{eks.PyTorchJobs: "PyTorchJobList"})
	return a
}

// node reads a Node (nil when there is none).
func (a *apiServer) node(name string) *corev1.Node {
	kn, err := a.cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return kn
}

// pod makes a pod bound to a Node.
func (a *apiServer) pod(t testing.TB, name, node string, labels map[string]string, shape func(*corev1.Pod)) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels, CreationTimestamp: metav1.Now()},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if shape != nil {
		shape(p)
	}
	if _, err := a.cs.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podNames are the names of the pods there are.
func (a *apiServer) podNames() []string {
	ps, _ := a.cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	var out []string
	for _, p := range ps.Items {
		out = append(out, p.Name)
	}
	return out
}

// kubelets are the ways an Eks node's kubelet is played in these tests.
type kubelets int

const (
	// simulated: hale creates the Node (eks.Config.SimulatedKubelets, kwok's part played by
	// the fake API server).
	simulated kubelets = iota
	// scripted: the node stack is configured (eks.Config.NodeStack) and the machines' agents
	// answer its commands; starting the kubelet daemon registers the Node, as a real kubelet
	// does, with its provider id, address and pod CIDR.
	scripted
)

// fakeStack is the node stack of hale's control plane: files for every node, no registry.
type fakeStack struct{}

func (fakeStack) NodeFiles(node nodestack.Node, hostname string) (map[string]nodestack.File, error) {
	return map[string]nodestack.File{"/var/lib/kubelet/config.yaml": {Content: []byte("hostname: " + hostname + "\n"), Mode: 0o644}}, nil
}
func (fakeStack) Registry() string { return "" }

// eksSubject is the conformance suite's subject: the Eks orchestrator, its kubelets played as
// k says, on client-go's fake API server (one per harness: the Kubernetes cluster outlives a
// restart of hale's server).
func eksSubject(k kubelets, cfg eks.Config) (orchestratortest.Subject, func(h *harness.Harness) *apiServer) {
	var mu sync.Mutex
	servers := map[*harness.Harness]*apiServer{}
	server := func(h *harness.Harness) *apiServer {
		mu.Lock()
		defer mu.Unlock()
		return servers[h]
	}
	s := orchestratortest.Subject{
		Setup: func(h *harness.Harness) {
			a := newAPIServer(func() metav1.Time { return metav1.NewTime(h.Clock.Now()) })
			mu.Lock()
			servers[h] = a
			mu.Unlock()
			err := h.Store.Write(context.Background(), func(tx store.Tx) error {
				return tx.PutKubeCluster(&store.KubeCluster{Name: "fake", ARN: fakeARN, Kubeconfig: []byte("the fake API server's (eks.Config.Connect)"),
					Local: true, CreatedAt: h.Clock.Now()})
			})
			if err != nil {
				h.T.Fatal(err)
			}
			if k == scripted {
				h.M.Script = kubeletScript(a)
			}
		},
		New: func(h *harness.Harness) orchestrator.Orchestrator {
			a := server(h)
			c := cfg
			c.SimulatedKubelets = k == simulated
			if k == scripted {
				c.NodeStack = fakeStack{}
			}
			c.Connect = func(string, *store.KubeCluster) (kubernetes.Interface, dynamic.Interface, error) {
				return a.cs, a.dyn, nil
			}
			return eks.New(c)
		},
		Request: func(name string, workers int32) *api.CreateClusterRequest {
			return &api.CreateClusterRequest{ClusterName: new(name), InstanceGroups: []api.ClusterInstanceGroupSpecification{harness.Spec("workers", workers)},
				Orchestrator: &api.ClusterOrchestrator{Eks: &api.ClusterOrchestratorEksConfig{ClusterArn: new(fakeARN)}}}
		},
		Members: func(h *harness.Harness, clusterID string) []string {
			ns, err := server(h).cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
			if err != nil {
				h.T.Fatal(err)
			}
			var ids []string
			for _, kn := range ns.Items {
				ids = append(ids, strings.TrimPrefix(kn.Name, "hyperpod-"))
			}
			return ids
		},
	}
	return s, server
}

// kubeletScript answers the node stack's commands on the machines: starting the kubelet
// registers the machine's Node (Ready, its provider id, InternalIP and a pod CIDR of its own),
// as a real kubelet and the node IPAM controller do.
func kubeletScript(a *apiServer) func(*harness.Machine, *agentproto.Command) *agentproto.CommandResult {
	cidrs := 0
	return func(mc *harness.Machine, cmd *agentproto.Command) *agentproto.CommandResult {
		d, ok := cmd.Kind.(*agentproto.Command_Daemon)
		if !ok || d.Daemon.GetName() != "kubelet" {
			return nil
		}
		cidrs++
		kn := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: eks.NodeName(mc.Spec.InstanceID), Labels: map[string]string{"kubernetes.io/hostname": eks.NodeName(mc.Spec.InstanceID)}},
			Spec:   corev1.NodeSpec{ProviderID: "hale://" + mc.Spec.InstanceID, PodCIDR: fmt.Sprintf("10.244.%d.0/24", cidrs)},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: mc.IP}}}}
		_, err := a.cs.CoreV1().Nodes().Create(context.Background(), kn, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) { // a kubelet restarted keeps its Node
			return &agentproto.CommandResult{ExitCode: 1, Error: err.Error()}
		}
		return &agentproto.CommandResult{}
	}
}
