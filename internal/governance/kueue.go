package governance

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/topology"
)

// Kueue's API (kueue.x-k8s.io/v1beta2, Kueue v0.19) and the names HyperPod's task governance
// add-on gives its objects.
const (
	KueueGroup   = "kueue.x-k8s.io"
	KueueVersion = "v1beta2"
	// Cohort is the cohort every team's ClusterQueue is in: teams lend to and borrow from it.
	Cohort = "shared-pool"
	// LabelManaged marks the namespaces and ClusterQueues task governance manages;
	// LabelTeam is a team namespace's team.
	LabelManaged = "sagemaker.amazonaws.com/sagemaker-managed-queue"
	LabelTeam    = "sagemaker.amazonaws.com/quota-allocation-id"
	// LabelInstanceType is the Node label a ResourceFlavor selects its instance type's nodes by.
	LabelInstanceType = "node.kubernetes.io/instance-type"
	// The resources a quota covers (the device plugins' names).
	ResourceGPU    = "nvidia.com/gpu"
	ResourceNeuron = "aws.amazon.com/neurondevice"
	// DefaultBorrowLimit is LendAndBorrow's BorrowLimit when none is given: a team may borrow
	// half its quota again (the API reference, ResourceSharingConfig).
	DefaultBorrowLimit = 50
)

// The Kueue resources hale writes.
var (
	ClusterQueues           = schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: "clusterqueues"}
	LocalQueues             = schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: "localqueues"}
	ResourceFlavors         = schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: "resourceflavors"}
	WorkloadPriorityClasses = schema.GroupVersionResource{Group: KueueGroup, Version: KueueVersion, Resource: "workloadpriorityclasses"}
)

// Resource is the resource an object of Objects is applied as.
func Resource(kind string) schema.GroupVersionResource {
	switch kind {
	case "Namespace":
		return schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	case "ResourceFlavor":
		return ResourceFlavors
	case "WorkloadPriorityClass":
		return WorkloadPriorityClasses
	case "ClusterQueue":
		return ClusterQueues
	}
	return LocalQueues
}

// Namespace is a team's namespace; its jobs name LocalQueue(team) in the label
// kueue.x-k8s.io/queue-name.
func Namespace(team string) string { return "hyperpod-ns-" + team }

// ClusterQueue is a team's ClusterQueue.
func ClusterQueue(team string) string { return Namespace(team) + "-clusterqueue" }

// LocalQueue is the LocalQueue in a team's namespace.
func LocalQueue(team string) string { return Namespace(team) + "-localqueue" }

// PriorityClass is the WorkloadPriorityClass of a scheduler config's priority class; a job
// names it in the label kueue.x-k8s.io/priority-class.
func PriorityClass(name string) string { return name + "-priority" }

// Resources are amounts of cpu (cores), memory (MiB) and accelerators.
type Resources struct {
	CPU       float64
	MemoryMiB float64
	GPUs      float64
	Neurons   float64
}

// Plus is r and o together.
func (r Resources) Plus(o Resources) Resources {
	return Resources{CPU: r.CPU + o.CPU, MemoryMiB: r.MemoryMiB + o.MemoryMiB, GPUs: r.GPUs + o.GPUs, Neurons: r.Neurons + o.Neurons}
}

// Times is r scaled by f.
func (r Resources) Times(f float64) Resources {
	return Resources{CPU: r.CPU * f, MemoryMiB: r.MemoryMiB * f, GPUs: r.GPUs * f, Neurons: r.Neurons * f}
}

// Nominal is what one ComputeQuotaResourceConfig gives a team (the API reference,
// ComputeQuotaResourceConfig): Count instances of the type's whole capacity; else the
// Accelerators, VCpu and MemoryInGiB given, a missing one in proportion to the first given
// (accelerators only when Accelerators is: VCpu- or memory-only quotas have none).
func Nominal(rc api.ComputeQuotaResourceConfig) (Resources, error) {
	it, ok := topology.Lookup(string(rc.GetInstanceType()))
	if !ok {
		return Resources{}, fmt.Errorf("instance type %q is not in hale's catalog", rc.GetInstanceType())
	}
	whole := Resources{CPU: float64(it.VCPUs), MemoryMiB: float64(it.MemoryMiB)}
	accel := 0
	if a := it.Accelerators; a != nil {
		accel = a.Count
		if a.Kind == "neuron" {
			whole.Neurons = float64(a.Count)
		} else {
			whole.GPUs = float64(a.Count)
		}
	}
	scale := whole.Times
	if rc.Count != nil {
		return scale(float64(*rc.Count)), nil
	}
	var r Resources
	switch {
	case rc.Accelerators != nil:
		if accel == 0 {
			return Resources{}, fmt.Errorf("instance type %s has no accelerators", it.Name)
		}
		r = scale(float64(*rc.Accelerators) / float64(accel))
	case rc.VCpu != nil:
		r = scale(float64(*rc.VCpu) / whole.CPU)
		r.GPUs, r.Neurons = 0, 0
	case rc.MemoryInGiB != nil:
		r = scale(float64(*rc.MemoryInGiB) * 1024 / whole.MemoryMiB)
		r.GPUs, r.Neurons = 0, 0
	default:
		return Resources{}, fmt.Errorf("give Count, Accelerators, VCpu or MemoryInGiB for instance type %s", it.Name)
	}
	if rc.VCpu != nil {
		r.CPU = float64(*rc.VCpu)
	}
	if rc.MemoryInGiB != nil {
		r.MemoryMiB = float64(*rc.MemoryInGiB) * 1024
	}
	return r, nil
}

// Objects are the Kueue objects (and team namespaces) the scheduler config (nil: none) and the
// live quotas make, in the order they are applied: flavors and priority classes, then per team
// its namespace, ClusterQueue and LocalQueue.
func Objects(sched *SchedulerConfig, quotas []*Quota) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	flavors := map[string]bool{}
	for _, q := range quotas {
		for _, rc := range q.Current().Config.ComputeQuotaResources {
			flavors[string(rc.GetInstanceType())] = true
		}
	}
	for _, f := range sortedKeys(flavors) {
		out = append(out, kueueObject("ResourceFlavor", f, "", map[string]any{
			"nodeLabels": map[string]any{LabelInstanceType: f},
		}))
	}
	if sched != nil && !Gone(sched.Status) {
		for _, pc := range sched.Current().Config.PriorityClasses {
			o := kueueObject("WorkloadPriorityClass", PriorityClass(pc.GetName()), "", nil)
			o.Object["value"] = int64(pc.GetWeight())
			o.Object["description"] = fmt.Sprintf("HyperPod priority class %s, weight %d", pc.GetName(), pc.GetWeight())
			out = append(out, o)
		}
	}
	sort.Slice(quotas, func(i, j int) bool {
		return quotas[i].Current().Target.GetTeamName() < quotas[j].Current().Target.GetTeamName()
	})
	for _, q := range quotas {
		objs, err := teamObjects(q)
		if err != nil {
			return nil, fmt.Errorf("compute quota %s: %w", q.Name, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// teamObjects are a quota's namespace, ClusterQueue and LocalQueue.
func teamObjects(q *Quota) ([]*unstructured.Unstructured, error) {
	v := q.Current()
	team := v.Target.GetTeamName()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": Namespace(team), "labels": map[string]any{LabelManaged: "true", LabelTeam: team}}}}

	sharing := v.Config.ResourceSharingConfig
	strategy, borrowPct := api.ResourceSharingStrategyLendAndBorrow, int32(DefaultBorrowLimit)
	if sharing != nil {
		if sharing.Strategy != nil {
			strategy = *sharing.Strategy
		}
		if sharing.BorrowLimit != nil {
			borrowPct = *sharing.BorrowLimit
		}
	}
	absolute := map[string]Resources{}
	if sharing != nil {
		for _, rc := range sharing.AbsoluteBorrowLimits {
			r, err := Nominal(rc)
			if err != nil {
				return nil, err
			}
			absolute[string(rc.GetInstanceType())] = r
		}
	}
	byType := map[string]Resources{}
	for _, rc := range v.Config.ComputeQuotaResources {
		r, err := Nominal(rc)
		if err != nil {
			return nil, err
		}
		byType[string(rc.GetInstanceType())] = byType[string(rc.GetInstanceType())].Plus(r)
	}
	covered := []any{"cpu", "memory", ResourceGPU, ResourceNeuron}
	var flavors []any
	for _, f := range sortedKeys(byType) {
		nominal := byType[f]
		borrow, limited := Resources{}, true
		switch strategy {
		case api.ResourceSharingStrategyLendAndBorrow:
			if a, ok := absolute[f]; ok {
				borrow = a
			} else {
				borrow = nominal.Times(float64(borrowPct) / 100)
			}
		case api.ResourceSharingStrategyLend, api.ResourceSharingStrategyDontLend:
			// borrows nothing
		default:
			limited = false
		}
		res := func(name, nominal, borrow string) map[string]any {
			m := map[string]any{"name": name, "nominalQuota": nominal}
			if limited {
				m["borrowingLimit"] = borrow
			}
			if strategy == api.ResourceSharingStrategyDontLend {
				m["lendingLimit"] = "0"
			}
			return m
		}
		flavors = append(flavors, map[string]any{"name": f, "resources": []any{
			res("cpu", milli(nominal.CPU), milli(borrow.CPU)),
			res("memory", mebi(nominal.MemoryMiB), mebi(borrow.MemoryMiB)),
			res(ResourceGPU, whole(nominal.GPUs), whole(borrow.GPUs)),
			res(ResourceNeuron, whole(nominal.Neurons), whole(borrow.Neurons)),
		}})
	}
	within := "LowerPriority"
	if v.Config.PreemptTeamTasks != nil && *v.Config.PreemptTeamTasks == api.PreemptTeamTasksNever {
		within = "Never"
	}
	stop := "None"
	if v.Activation == api.ActivationStateDisabled {
		stop = "Hold" // admits nothing new; what runs goes on
	}
	cq := kueueObject("ClusterQueue", ClusterQueue(team), "", map[string]any{
		"cohortName":        Cohort,
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": Namespace(team)}},
		"queueingStrategy":  "BestEffortFIFO",
		"stopPolicy":        stop,
		"preemption": map[string]any{
			"withinClusterQueue":  within,
			"reclaimWithinCohort": "Any", // a lender takes its quota back from borrowers
			"borrowWithinCohort":  map[string]any{"policy": "Never"},
		},
		// Kueue's weight 0 means "borrows last, preempted first"; HyperPod's default weight is 0.
		"fairSharing":    map[string]any{"weight": strconv.Itoa(int(v.Target.GetFairShareWeight()))},
		"resourceGroups": []any{map[string]any{"coveredResources": covered, "flavors": flavors}},
	})
	cq.SetLabels(map[string]string{LabelManaged: "true"})
	lq := kueueObject("LocalQueue", LocalQueue(team), Namespace(team), map[string]any{"clusterQueue": ClusterQueue(team)})
	return []*unstructured.Unstructured{ns, cq, lq}, nil
}

func kueueObject(kind, name, namespace string, spec map[string]any) *unstructured.Unstructured {
	md := map[string]any{"name": name}
	if namespace != "" {
		md["namespace"] = namespace
	}
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": KueueGroup + "/" + KueueVersion, "kind": kind, "metadata": md}}
	if spec != nil {
		o.Object["spec"] = spec
	}
	return o
}

// milli, mebi and whole write quantities: CPU in millicores, memory in MiB, devices whole
// (rounded down: a quota never promises a part of a device).
func milli(cores float64) string { return strconv.FormatInt(int64(math.Round(cores*1000)), 10) + "m" }
func mebi(mib float64) string    { return strconv.FormatInt(int64(math.Round(mib)), 10) + "Mi" }
func whole(n float64) string     { return strconv.FormatInt(int64(math.Floor(n+1e-9)), 10) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
