package eks

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/haleproject/hale/internal/runpolicy"
	"github.com/haleproject/hale/internal/store"
)

// A job whose run policy does not parse is suspended, with an event on it that names the field
// and the rule it breaks; nothing else is done to it.
func TestBadRunPolicySuspendsTheJob(t *testing.T) {
	pj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
		"metadata": map[string]any{"name": "train", "namespace": "default", "uid": "u-1",
			"annotations": map[string]any{AnnotationRunPolicy: `[{"name":"p","logPattern":"step","expectedRecurringFrequencyInSeconds":0}]`}},
		"spec": map[string]any{}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{PyTorchJobs: "PyTorchJobList"}, pj)
	cs := fake.NewClientset()
	o := New(Config{})
	o.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	o.holdToPolicy(ctx, cs, dyn, &store.Cluster{ID: "c"}, pj)

	got, err := dyn.Resource(PyTorchJobs).Namespace("default").Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedBool(got.Object, "spec", "runPolicy", "suspend"); !s {
		t.Errorf("the job is not suspended: %v", got.Object["spec"])
	}
	evs, _ := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if len(evs.Items) != 1 || evs.Items[0].Reason != "RunPolicyInvalid" ||
		!strings.Contains(evs.Items[0].Message, "logMonitoringConfiguration[0]: the rule checks nothing") {
		t.Errorf("events: %+v", evs.Items)
	}
}

// The restarts the policy made are kept on the job, by rung, and read back.
func TestRestartsAnnotation(t *testing.T) {
	m := map[runpolicy.Rung]int{runpolicy.InPlace: 2, runpolicy.WholeJob: 1}
	s := formatRestarts(m)
	if s != "in-place=2,whole-job=1" {
		t.Errorf("formatRestarts = %q", s)
	}
	back := parseRestarts(s)
	if back[runpolicy.InPlace] != 2 || back[runpolicy.WholeJob] != 1 || len(parseRestarts("")) != 0 {
		t.Errorf("parseRestarts(%q) = %v", s, back)
	}
}
