package eks

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

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
		return fmt.Sprintf("%s%d of the node's %d GPUs (%s allocatable): the device plugin has not registered the rest with the kubelet yet, or reports them Unhealthy",
			gpusShortPrefix(kn.Name), have, want, deviceplugin.ResourceName)
	}
	return ""
}

// gpusShortPrefix begins gpusShort's reasons for Node name, so that a repair's message that was
// one is known when it no longer holds.
func gpusShortPrefix(name string) string { return "its Node " + name + " offers " }

// resumeHeldForGPUs reports whether repair id's node (Node name) must wait before it is
// declared healthy again: its Node cannot be read, or gpusShort says why, which becomes the
// repair's message.
func (o *EKS) resumeHeldForGPUs(ctx context.Context, cs kubernetes.Interface, id, name string, n *store.Node) bool {
	kn, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return true
	}
	why := gpusShort(kn, n)
	if why == "" {
		return false
	}
	o.h.Store().Write(ctx, func(tx store.Tx) error {
		rp, err := tx.Repair(id)
		if err != nil || rp.State != store.RepairResuming || rp.Message == why {
			return err
		}
		rp.Message = why
		return tx.PutRepair(rp)
	})
	return true
}

// clearGPUsShort takes gpusShort's reason off a repair that no longer waits for its GPUs.
func clearGPUsShort(rp *store.Repair, name string) {
	if strings.HasPrefix(rp.Message, gpusShortPrefix(name)) {
		rp.Message = ""
	}
}
