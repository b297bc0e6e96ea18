//go:build e2e && kube

package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haleproject/hale/internal/orchestrator/eks"
	"github.com/haleproject/hale/internal/provider/local"
	"github.com/haleproject/hale/internal/store"
)

// TestEksGPUs: a real kubelet learns a node's GPUs from hale's device plugin (the node's agent)
// as nvidia.com/gpu (issue 28): a g5.12xlarge's Node offers 4; a container that asks for 2
// gets exactly 2 of the node's /dev/nvidia* (and nvidiactl) and NVIDIA_VISIBLE_DEVICES naming
// them. A Xid 79 hale acts on, and a GPU gone from the bus, each take a GPU out of the Node's
// allocatable (capacity stays). A reboot does not bring the lost GPU back: the node is not
// declared healthy, and its replacement is Schedulable only once its kubelet offers all 4
// GPUs. NodeRecovery is None, so the operator's reboot is the only repair.
func TestEksGPUs(t *testing.T) {
	parallel(t)
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("%v: scripts/setup.sh installs busybox-static", err)
	}
	dir := t.TempDir()
	o := options(t, dir)
	realKubelets(&o)
	o.EksEvictTimeout = 10 * time.Second
	e, cs := startEksWith(t, o)
	ctx := context.Background()
	lc := e.exampleScripts("eks-base-config")
	g := types.ClusterInstanceGroupSpecification{InstanceGroupName: aws.String("gpus"), InstanceType: types.ClusterInstanceTypeMlG512xlarge,
		InstanceCount: aws.Int32(1), ExecutionRole: aws.String(role),
		LifeCycleConfig: &types.ClusterLifeCycleConfig{SourceS3Uri: aws.String(lc), OnCreate: aws.String("on_create.sh")}}
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("gpus"), InstanceGroups: []types.ClusterInstanceGroupSpecification{g},
		NodeRecovery: types.ClusterNodeRecoveryNone,
		Orchestrator: localEks()}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("gpus", types.ClusterStatusInservice, 240*time.Second)
	n := e.storeNodes("gpus")[0]
	id, name := n.InstanceID, eks.NodeName(n.InstanceID)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := e.onNode(id, "tail -n 20 /var/log/kubelet.log; ls -l /dev/nvidia* /var/lib/kubelet/device-plugins")
			t.Logf("node %s:\n%s", id, out)
		}
	})
	gpus := func() (capacity, allocatable int64) {
		kn, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return -1, -1
		}
		c, a := kn.Status.Capacity["nvidia.com/gpu"], kn.Status.Allocatable["nvidia.com/gpu"]
		return c.Value(), a.Value()
	}
	if c, a := gpus(); c != 4 || a != 4 {
		t.Fatalf("the Node of an InService g5.12xlarge offers nvidia.com/gpu capacity %d, allocatable %d; want 4 and 4", c, a)
	}
	e.importBusybox(id, bb)

	// Two of the four, and only those, in the container.
	two := busyboxPod("two", "", `ls /dev | grep nvidia | tr '\n' ' '; echo; echo "visible=$NVIDIA_VISIBLE_DEVICES"; sleep 3600`)
	two.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, two, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var logs string
	eventually(t, 90*time.Second, "the 2-GPU pod's devices listed", func() (bool, string) {
		b, err := cs.CoreV1().Pods("default").GetLogs("two", &corev1.PodLogOptions{}).Do(ctx).Raw()
		logs = string(b)
		return err == nil && strings.Contains(logs, "visible="), fmt.Sprintf("%q %v", logs, err)
	})
	devs := strings.Fields(strings.SplitN(logs, "\n", 2)[0])
	sort.Strings(devs)
	uuids := map[string]bool{}
	for _, a := range n.Details.Inventory.Accelerators {
		uuids[a.UUID] = true
	}
	visible := strings.Split(strings.TrimSpace(strings.SplitN(logs, "visible=", 2)[1]), ",")
	if len(devs) != 3 || devs[2] != "nvidiactl" || !strings.HasPrefix(devs[0], "nvidia") || len(visible) != 2 || !uuids[visible[0]] || !uuids[visible[1]] || visible[0] == visible[1] {
		t.Errorf("a container given 2 GPUs sees /dev: %v and NVIDIA_VISIBLE_DEVICES %v; want 2 GPUs and nvidiactl, named by 2 of the node's UUIDs", devs, visible)
	}

	// A Xid 79 on GPU 1 (hale replaces for it; NodeRecovery None leaves that to an operator),
	// then GPU 2 off the bus: allocatable 3, then 2, capacity 4.
	start := time.Now()
	e.inject(id, local.Fault{Xid: 79, GPU: 1, LoseGPU: -1})
	eventually(t, 30*time.Second, "the Xid 79 GPU Unhealthy to the kubelet", func() (bool, string) {
		c, a := gpus()
		return c == 4 && a == 3, fmt.Sprintf("capacity %d, allocatable %d", c, a)
	})
	t.Logf("Xid 79 → the Node's allocatable nvidia.com/gpu 3 of 4: %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	e.inject(id, local.Fault{LoseGPU: 2})
	eventually(t, 30*time.Second, "the lost GPU Unhealthy to the kubelet", func() (bool, string) {
		c, a := gpus()
		return c == 4 && a == 2, fmt.Sprintf("capacity %d, allocatable %d", c, a)
	})
	t.Logf("GPU off the bus → allocatable 2 of 4: %s", time.Since(start).Round(time.Millisecond))
	// The operator reboots it, once hale holds the Xid's repair for them (a request while that
	// repair still drains is part of it): the Xid's GPU comes back, the lost one does not, and
	// the node is not declared healthy with 3 of its 4 GPUs: its checks fail, and it is
	// replaced. When hale says the replacement is Schedulable, its kubelet offers all 4 GPUs
	// (Join waits for the device plugin's).
	eventually(t, 2*time.Minute, "the Xid 79's repair held for the operator", func() (bool, string) {
		rs := e.repairsOf("gpus", n.LogicalID)
		return len(rs) == 1 && rs[0].State == store.RepairHeld, fmt.Sprint(len(rs), " repairs")
	})
	if out, err := e.SDK.BatchRebootClusterNodes(ctx, &sagemaker.BatchRebootClusterNodesInput{ClusterName: aws.String("gpus"), NodeIds: []string{id}}); err != nil || len(out.Failed) > 0 {
		t.Fatalf("BatchRebootClusterNodes: %v %+v", err, out)
	}
	rp := e.waitRepair(t, "gpus", n.LogicalID, 1, 4*time.Minute)
	var steps []string
	for _, s := range rp.Timeline {
		steps = append(steps, s.What)
	}
	timeline := strings.Join(steps, "; ")
	if rp.State != store.RepairDone || rp.NewInstanceID == "" || !strings.Contains(timeline, "not healthy after the reboot") || !strings.Contains(timeline, "gpu.count_mismatch") {
		t.Fatalf("the rebooted node with a GPU gone: repair %s, new instance %q: %s; want it found unhealthy and replaced", rp.State, rp.NewInstanceID, timeline)
	}
	kn, err := cs.CoreV1().Nodes().Get(ctx, eks.NodeName(rp.NewInstanceID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, a := kn.Status.Capacity["nvidia.com/gpu"], kn.Status.Allocatable["nvidia.com/gpu"]
	if kn.Labels[eks.LabelHealth] != eks.Schedulable || c.Value() != 4 || a.Value() != 4 {
		t.Errorf("the replacement's Node when its repair ended: %s, nvidia.com/gpu capacity %d allocatable %d; want Schedulable with 4 of 4",
			kn.Labels[eks.LabelHealth], c.Value(), a.Value())
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("gpus")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("gpus", 90*time.Second)
}
