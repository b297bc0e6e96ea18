//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/provider/static"
)

// TestStaticPartitionCostsNoHost: three of six workers on own machines are cut from the server
// (their links on the bed's bridge down: no heartbeats, no SSH) while they keep running, for
// about 35 s. That is a network fault, not three dead machines: nothing is replaced, rebooted or
// quarantined (the spare host stays Available), one Error event names the nodes and what they
// share, and once the links are back the pause ends by itself and every node is Running on
// its own host. Before, each cut worker's death was confirmed by an SSH that failed too: the
// spare took one, the pool ran dry, and the cut hosts were quarantined.
func TestStaticPartitionCostsNoHost(t *testing.T) {
	parallel(t)
	e, bed, sp, _ := startStatic(t, 8, nil)
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("cut"), InstanceGroups: staticGroups(1, 0, 6),
		NodeRecovery: types.ClusterNodeRecoveryAutomatic}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("cut", types.ClusterStatusInservice, 4*time.Minute)
	before := map[string]string{}
	var cut []static.HostStatus
	for _, n := range e.nodes("cut") {
		before[aws.ToString(n.NodeLogicalId)] = aws.ToString(n.InstanceId)
		if aws.ToString(n.InstanceGroupName) == "worker" && len(cut) < 3 {
			cut = append(cut, hostOf(sp, aws.ToString(n.InstanceId)))
		}
	}
	link := func(state string) {
		for _, h := range cut {
			// The bed's host i is at NET.(10+i), its veth on the bridge <bridge>v<i>.
			last, _ := strconv.Atoi(h.Address[strings.LastIndex(h.Address, ".")+1:])
			veth := fmt.Sprintf("%sv%d", bed.bridge, last-10)
			if out, err := exec.Command("ip", "link", "set", "dev", veth, state).CombinedOutput(); err != nil {
				t.Fatalf("ip link set %s %s: %v %s", veth, state, err, out)
			}
		}
	}
	link("down")
	t.Cleanup(func() { link("up") })
	waitFor(t, time.Minute, "the partition's Error event", func() bool { return strings.Contains(e.events("cut"), "a network fault (a partition)") })
	time.Sleep(30 * time.Second) // far past the silence threshold, the confirmation and a launch
	ev := e.events("cut")
	for _, bad := range []string{"is being replaced", "is rebooting", "quarantined"} {
		if strings.Contains(ev, bad) {
			t.Errorf("during the partition: %q in the events:\n%s", bad, ev)
		}
	}
	for _, h := range sp.Hosts() {
		if h.State == static.Quarantined || h.State == static.InUse && before[h.LogicalID] != h.InstanceID {
			t.Errorf("during the partition host %s is %s (%s)", h.Address, h.State, h.Reason)
		}
	}
	link("up")
	eventually(t, 2*time.Minute, "the pause over and every node Running", func() (bool, string) {
		ev := e.events("cut")
		if !strings.Contains(ev, "the network fault ended without a repair") {
			return false, ev
		}
		for _, n := range e.nodes("cut") {
			if n.InstanceStatus.Status != types.ClusterInstanceStatusRunning {
				return false, ev
			}
		}
		return true, ""
	})
	for _, n := range e.nodes("cut") {
		if l := aws.ToString(n.NodeLogicalId); before[l] != aws.ToString(n.InstanceId) {
			t.Errorf("node %s was %s, is %s", l, before[l], aws.ToString(n.InstanceId))
		}
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("cut")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("cut", 2*time.Minute)
}
