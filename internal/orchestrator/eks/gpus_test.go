package eks

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haleproject/hale/internal/store"
)

// A node is healthy for its GPUs only when its kubelet offers all of them: one the device plugin
// reports Unhealthy (allocatable below the agent's count), or a plugin not registered yet (no
// allocatable at all), keeps it from being declared healthy; a node without GPUs never waits.
func TestGPUsShort(t *testing.T) {
	n := &store.Node{}
	n.Details.Inventory = &store.NodeInventory{Accelerators: []store.Accelerator{{Kind: "gpu"}, {Kind: "gpu"}, {Kind: "gpu"}, {Kind: "gpu"}}}
	node := func(gpus string) *corev1.Node {
		kn := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hyperpod-i-0"}}
		if gpus != "" {
			kn.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}
		}
		return kn
	}
	if why := gpusShort(node("4"), n); why != "" {
		t.Errorf("all 4 GPUs allocatable: %s", why)
	}
	if why := gpusShort(node("3"), n); !strings.Contains(why, "offers 3 of the node's 4 GPUs") {
		t.Errorf("one GPU Unhealthy: %q", why)
	}
	if why := gpusShort(node(""), n); !strings.Contains(why, "offers 0 of the node's 4 GPUs") {
		t.Errorf("no device plugin yet: %q", why)
	}
	if why := gpusShort(node(""), &store.Node{}); why != "" {
		t.Errorf("a node without GPUs: %q", why)
	}
}
