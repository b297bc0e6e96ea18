package eks

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/store"
)

// Name is the orchestrator's short name: the Kind of its store records.
const Name orchestrator.Kind = "eks"

// HyperPod's Node labels, taint and annotation (research hyperpod-eks-health.md §1.3).
const (
	LabelComputeType       = "sagemaker.amazonaws.com/compute-type"
	LabelInstanceGroup     = "sagemaker.amazonaws.com/instance-group-name"
	LabelClusterName       = "sagemaker.amazonaws.com/cluster-name"
	LabelInstanceType      = "node.kubernetes.io/instance-type"
	LabelHealth            = "sagemaker.amazonaws.com/node-health-status"
	LabelDeepHealth        = "sagemaker.amazonaws.com/deep-health-check-status"
	LabelFaultType         = "sagemaker.amazonaws.com/fault-type"
	LabelFaultReason       = "sagemaker.amazonaws.com/fault-reason"
	AnnotationFaultDetails = "sagemaker.amazonaws.com/fault-details"
	// TaintHealth is the NoSchedule taint (value Unschedulable) on a node under repair or deep
	// health checks.
	TaintHealth = LabelHealth
	// kwokAnnotation marks a Node kwok plays the kubelet of (the local provider's nodes).
	kwokAnnotation = "kwok.x-k8s.io/node"
)

// The values of LabelHealth.
const (
	Schedulable                     = "Schedulable"
	Unschedulable                   = "Unschedulable"
	UnschedulablePendingReplacement = "UnschedulablePendingReplacement"
	UnschedulablePendingReboot      = "UnschedulablePendingReboot"
)

// Config configures the orchestrator.
type Config struct {
	// SimulatedKubelets: hale creates each node's Node itself, for kwok to play its kubelet (the
	// local provider, whose nodes run no kubelet). Otherwise the node's kubelet registers it, as
	// the lifecycle scripts of a real machine set up.
	SimulatedKubelets bool
	// NodeStack, when set, gives each node a real kubelet and containerd instead (kubelet.go);
	// SimulatedKubelets is then false.
	NodeStack NodeStack
	// EvictTimeout is how long a drain honours PodDisruptionBudgets before it deletes the pods
	// left (evictTimeout, 60 s, when zero; tests shorten it).
	EvictTimeout time.Duration
	// DrainPolicy is what a software update does with a node whose pods' PodDisruptionBudgets
	// allow no eviction for EvictTimeout: DrainForce (the default) deletes them; DrainSkip
	// leaves the node on its image, its pods running, and goes on with the others (patch.go).
	DrainPolicy string
	// Connect, when set, makes the clients of the registered cluster with that ARN in place of
	// those its kubeconfig gives (the conformance suite's API server of client-go's fakes).
	Connect func(arn string, k *store.KubeCluster) (kubernetes.Interface, dynamic.Interface, error)
}

// clientQPS and clientBurst are the request rate hale's client of a registered cluster keeps to.
const (
	clientQPS   = 50
	clientBurst = 100
)

// EKS orchestrates clusters whose Orchestrator is Eks on the Kubernetes cluster their ClusterArn
// names. Its zero value is not usable: use New.
type EKS struct {
	cfg Config
	h   orchestrator.Host
	log *slog.Logger

	mu      sync.Mutex
	clients map[string]kubernetes.Interface // by registered cluster ARN
	dynamic map[string]dynamic.Interface    // the same, for PyTorchJobs
	polls   orchestrator.Every              // each cluster's Nodes, read once per pollInterval
	routed  map[string]string               // the pod routes last set, by cluster (kubelet.go)
	gone    map[string]time.Time            // when a missing Node was last brought back, by instance (nodeGone)
	// policies are the PyTorchJobs held to a run policy now, by UID (runpolicy.go).
	policies map[string]bool
	// idle is the latest reading of each Node's pods for an auto-patch, by Node (patch.go).
	idle map[string]idleReading
	// govFailing is when the apply of each cluster's task governance began to fail (governance.go).
	govFailing map[string]time.Time
}

// The drain policies of software updates (Config.DrainPolicy).
const (
	DrainForce = "force"
	DrainSkip  = "skip"
)

// New returns the orchestrator, to be bound to a controller.
func New(cfg Config) *EKS {
	return &EKS{cfg: cfg, clients: map[string]kubernetes.Interface{}, dynamic: map[string]dynamic.Interface{}, polls: orchestrator.Every{Interval: pollInterval},
		routed: map[string]string{}, gone: map[string]time.Time{}, policies: map[string]bool{}, idle: map[string]idleReading{}, govFailing: map[string]time.Time{}}
}

var _ orchestrator.Orchestrator = (*EKS)(nil)

// Name implements orchestrator.Orchestrator.
func (o *EKS) Name() orchestrator.Kind { return Name }

// Display implements orchestrator.Orchestrator.
func (o *EKS) Display() string { return "Kubernetes" }

// Bind implements orchestrator.Orchestrator.
func (o *EKS) Bind(h orchestrator.Host) { o.h, o.log = h, h.Logger() }

// Manages implements orchestrator.Orchestrator: the clusters whose Orchestrator is Eks.
func (o *EKS) Manages(spec *api.CreateClusterRequest) bool {
	return spec.Orchestrator != nil && spec.Orchestrator.Eks != nil
}

// Drift implements orchestrator.Orchestrator: hale writes no configuration file on an Eks
// cluster's nodes.
func (o *EKS) Drift(context.Context, string) ([]string, error) { return nil, nil }

// AutoResume implements orchestrator.Orchestrator: srun's question does not arise on
// Kubernetes, where PyTorchJobs are resumed by their annotations.
func (o *EKS) AutoResume(_ context.Context, clusterID string, _ *agentproto.AutoResumeRequest) (*agentproto.AutoResumeResponse, error) {
	return nil, fmt.Errorf("auto-resume: cluster %s runs Kubernetes, where jobs resume by the sagemaker.amazonaws.com/enable-job-auto-resume annotation", clusterID)
}

// client is the clientset of the registered cluster the cluster is attached to, as hale's
// ServiceAccount.
func (o *EKS) client(tx store.Tx, cl *store.Cluster) (kubernetes.Interface, error) {
	arn := cl.Spec.Orchestrator.Eks.GetClusterArn()
	o.mu.Lock()
	c := o.clients[arn]
	o.mu.Unlock()
	if c != nil {
		return c, nil
	}
	k, err := tx.KubeCluster(arn)
	if err != nil {
		return nil, fmt.Errorf("the Kubernetes cluster %s: %w", arn, err)
	}
	connect := o.cfg.Connect
	if connect == nil {
		connect = connectKubeconfig
	}
	cs, dyn, err := connect(arn, k)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.clients[arn], o.dynamic[arn] = cs, dyn
	o.mu.Unlock()
	return cs, nil
}

// connectKubeconfig makes the clients of a registered cluster from its kubeconfig.
func connectKubeconfig(_ string, k *store.KubeCluster) (kubernetes.Interface, dynamic.Interface, error) {
	rc, err := clientcmd.RESTConfigFromKubeConfig(k.Kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	rc.Timeout = 10 * time.Second
	// client-go's default (5 requests a second, a burst of 10) made a 1,000-node cluster's
	// bring-up take 571 s and a repair under a 16-pod job wait 3 s on the limiter
	// (docs/performance.md, "Eks at 1,000 nodes"); at 50/100 they took 66 s and 1.5 s.
	rc.QPS, rc.Burst = clientQPS, clientBurst
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	return cs, dyn, nil
}

// dynamicClient is the cluster's client for custom resources (after client made it).
func (o *EKS) dynamicClient(cl *store.Cluster) dynamic.Interface {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.dynamic[cl.Spec.Orchestrator.Eks.GetClusterArn()]
}

// NodeName is a node's Node name, as HyperPod names it: hyperpod-<instance id>.
func NodeName(instanceID string) string { return "hyperpod-" + instanceID }
