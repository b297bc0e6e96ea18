package governance

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/haleproject/hale/api"
)

// Nominal quotas follow the API reference's examples and AWS's samples: Count instances give the
// type's whole capacity (4 x ml.m5.xlarge: cpu 16, memory 64 GiB; 1 x ml.g5.12xlarge: 48, 192 GiB,
// 4 GPUs); Accelerators alone give the GPUs' share of CPU and memory; VCpu alone, no GPUs.
func TestNominal(t *testing.T) {
	typ := func(s string) *api.ClusterInstanceType { return new(api.ClusterInstanceType(s)) }
	for _, c := range []struct {
		in   api.ComputeQuotaResourceConfig
		want Resources
	}{
		{api.ComputeQuotaResourceConfig{InstanceType: typ("ml.m5.xlarge"), Count: new(int32(4))}, Resources{CPU: 16, MemoryMiB: 65536}},
		{api.ComputeQuotaResourceConfig{InstanceType: typ("ml.g5.12xlarge"), Count: new(int32(1))}, Resources{CPU: 48, MemoryMiB: 196608, GPUs: 4}},
		{api.ComputeQuotaResourceConfig{InstanceType: typ("ml.g5.12xlarge"), Accelerators: new(int32(2))}, Resources{CPU: 24, MemoryMiB: 98304, GPUs: 2}},
		{api.ComputeQuotaResourceConfig{InstanceType: typ("ml.g5.12xlarge"), VCpu: new(float32(12))}, Resources{CPU: 12, MemoryMiB: 49152}},
		{api.ComputeQuotaResourceConfig{InstanceType: typ("ml.m5.xlarge"), VCpu: new(float32(4)), MemoryInGiB: new(float32(8))}, Resources{CPU: 4, MemoryMiB: 8192}},
		{api.ComputeQuotaResourceConfig{InstanceType: typ("ml.trn1.32xlarge"), Count: new(int32(1))}, Resources{CPU: 128, MemoryMiB: 524288, Neurons: 16}},
	} {
		got, err := Nominal(c.in)
		if err != nil || got != c.want {
			t.Errorf("Nominal(%s) = %+v, %v; want %+v", describe(c.in), got, err, c.want)
		}
	}
	for _, bad := range []api.ComputeQuotaResourceConfig{
		{InstanceType: typ("ml.m5.xlarge")},
		{InstanceType: typ("ml.m5.xlarge"), Accelerators: new(int32(1))},
		{InstanceType: typ("ml.nosuch.xlarge"), Count: new(int32(1))},
	} {
		if _, err := Nominal(bad); err == nil {
			t.Errorf("Nominal(%s): no error", describe(bad))
		}
	}
}

func describe(rc api.ComputeQuotaResourceConfig) string {
	return string(rc.GetInstanceType())
}

// A team's quota becomes its namespace, a ClusterQueue in cohort shared-pool whose nominal
// quota and borrowing limit follow the sharing strategy, and its LocalQueue; priority classes
// become WorkloadPriorityClasses.
func TestObjects(t *testing.T) {
	sched := &SchedulerConfig{Name: "policy", Status: api.SchedulerResourceStatusCreated, Versions: []SchedulerVersion{{Version: 1,
		Config: api.SchedulerConfig{PriorityClasses: []api.PriorityClass{{Name: new("training"), Weight: new(int32(70))}}}}}}
	quota := func(team string, count int32, sharing *api.ResourceSharingConfig, preempt api.PreemptTeamTasks) *Quota {
		return &Quota{Name: team + "-quota", Status: api.SchedulerResourceStatusCreated, Versions: []QuotaVersion{{Version: 1,
			Target: api.ComputeQuotaTarget{TeamName: new(team), FairShareWeight: new(int32(10))}, Activation: api.ActivationStateEnabled,
			Config: api.ComputeQuotaConfig{ComputeQuotaResources: []api.ComputeQuotaResourceConfig{{InstanceType: new(api.ClusterInstanceType("ml.g5.12xlarge")), Count: new(count)}},
				ResourceSharingConfig: sharing, PreemptTeamTasks: new(preempt)}}}}
	}
	objs, err := Objects(sched, []*Quota{
		quota("b", 1, &api.ResourceSharingConfig{Strategy: new(api.ResourceSharingStrategyDontLend)}, api.PreemptTeamTasksNever),
		quota("a", 2, nil, api.PreemptTeamTasksLowerPriority),
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	want := "ResourceFlavor /ml.g5.12xlarge, WorkloadPriorityClass /training-priority, " +
		"Namespace /hyperpod-ns-a, ClusterQueue /hyperpod-ns-a-clusterqueue, LocalQueue hyperpod-ns-a/hyperpod-ns-a-localqueue, " +
		"Namespace /hyperpod-ns-b, ClusterQueue /hyperpod-ns-b-clusterqueue, LocalQueue hyperpod-ns-b/hyperpod-ns-b-localqueue"
	if got := strings.Join(names, ", "); got != want {
		t.Fatalf("objects:\n %s\nwant\n %s", got, want)
	}
	if v, _, _ := unstructured.NestedInt64(objs[1].Object, "value"); v != 70 {
		t.Errorf("priority value %d, want 70", v)
	}
	// Team a: LendAndBorrow by default, borrowing 50% of 2 x (48 CPUs, 192 GiB, 4 GPUs).
	a := resourcesOf(t, objs[3])
	if a["cpu"] != "96000m/48000m/" || a["memory"] != "393216Mi/196608Mi/" || a["nvidia.com/gpu"] != "8/4/" {
		t.Errorf("team a's resources: %v", a)
	}
	if p, _, _ := unstructured.NestedString(objs[3].Object, "spec", "preemption", "withinClusterQueue"); p != "LowerPriority" {
		t.Errorf("team a's preemption: %s", p)
	}
	if c, _, _ := unstructured.NestedString(objs[3].Object, "spec", "cohortName"); c != Cohort {
		t.Errorf("cohort %q", c)
	}
	// Team b: DontLend borrows nothing and lends nothing; PreemptTeamTasks Never.
	b := resourcesOf(t, objs[6])
	if b["nvidia.com/gpu"] != "4/0/0" {
		t.Errorf("team b's GPUs: %v", b)
	}
	if p, _, _ := unstructured.NestedString(objs[6].Object, "spec", "preemption", "withinClusterQueue"); p != "Never" {
		t.Errorf("team b's preemption: %s", p)
	}
}

// resourcesOf maps a ClusterQueue's resources of its first flavor to nominal/borrowing/lending.
func resourcesOf(t *testing.T, cq *unstructured.Unstructured) map[string]string {
	t.Helper()
	groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	if len(groups) != 1 {
		t.Fatalf("%s: %d resource groups", cq.GetName(), len(groups))
	}
	flavors := groups[0].(map[string]any)["flavors"].([]any)
	out := map[string]string{}
	for _, r := range flavors[0].(map[string]any)["resources"].([]any) {
		m := r.(map[string]any)
		s := func(k string) string { v, _ := m[k].(string); return v }
		out[s("name")] = s("nominalQuota") + "/" + s("borrowingLimit") + "/" + s("lendingLimit")
	}
	return out
}
