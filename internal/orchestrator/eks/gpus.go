package eks

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/haleproject/hale/internal/deviceplugin"
	"github.com/haleproject/hale/internal/store"
)

// gpusShort says why a Node whose kubelet is real cannot be declared healthy for its GPUs yet
// ("" when it can): its kubelet offers fewer nvidia.com/gpu than the node's agent found GPUs,
// because the node's device plugin (the agent) reports the others Unhealthy, or has not
// registered with the kubelet yet. A node back from a repair whose GPU still fails would
// otherwise be Schedulable with pods asking for all its GPUs Pending on it for good (issue 28:
// a replaced GPU the device plugin still reports unhealthy is not declared healthy).
func gpusShort(kn *corev1.Node, n *store.Node) string {
	want := 0
	if inv := n.Details.Inventory; inv != nil {
		for _, a := range inv.Accelerators {
			if a.Kind == "gpu" {
				want++
			}
		}
	}
	if want == 0 {
		return ""
	}
	q := kn.Status.Allocatable[deviceplugin.ResourceName]
	if have := q.Value(); have < int64(want) {
		return fmt.Sprintf("its Node %s offers %d of the node's %d GPUs (%s allocatable): the device plugin reports the others Unhealthy, or has not registered with the kubelet yet",
			kn.Name, have, want, deviceplugin.ResourceName)
	}
	return ""
}
