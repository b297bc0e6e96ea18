package slurm_test

import (
	"context"
	"testing"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/harness"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/provider"
)

// A scale-down is over (the cluster InService with its nodes Running) only once slurmctld no
// longer has the removed node: before, the record of the node went with its instance while
// slurm.conf still listed it, until an apply a few rounds later, and sinfo showed a node the
// cluster no longer had (the conformance suite's members, now and then). Here the new files
// reach one of the remaining nodes only at the 30th try, which holds that apply back.
func TestScaleDownEndsWhenSlurmLetsTheNodeGo(t *testing.T) {
	s, ctldOf := slurmSubject()
	h := harness.New(t)
	s.Setup(h)
	h.Restart([]orchestrator.Orchestrator{s.New(h)})
	id := h.CreateWith(s.Request("c", 3))
	h.Until(id, 60, "created", h.Running(id, 4))
	resize := func(n int32) {
		t.Helper()
		in := s.Request("c", n)
		if _, err := h.Svc.UpdateCluster(context.Background(), &api.UpdateClusterRequest{ClusterName: new("c"), InstanceGroups: in.InstanceGroups}); err != nil {
			t.Fatal(err)
		}
	}
	resize(4)
	h.Until(id, 60, "scaled up", h.Running(id, 5))
	gone := h.Node(id, "workers-4")
	name := provider.Hostname(gone.Details.PrivateIP)
	if _, nodes := ctldOf(h).Configured(); nodes[name] == "" {
		t.Fatalf("slurmctld does not have the new node %s: %v", name, nodes)
	}

	slow := h.Node(id, "workers-1").InstanceID
	h.M.Mu.Lock()
	script, refused := h.M.Script, 0
	h.M.Script = func(mc *harness.Machine, cmd *agentproto.Command) *agentproto.CommandResult {
		if w := cmd.GetWriteFiles(); w != nil && mc.Spec.InstanceID == slow && refused < 30 && len(w.Files) > 0 && w.Files[0].Path == slurmconf.MungeKey {
			refused++
			return &agentproto.CommandResult{Error: "writing " + slurmconf.ConfPath + ": the disk is busy"}
		}
		return script(mc, cmd)
	}
	h.M.Mu.Unlock()
	resize(3)
	h.Until(id, 60, "scaled down", func() bool {
		if !h.Running(id, 4)() {
			return false
		}
		if _, nodes := ctldOf(h).Configured(); nodes[name] != "" {
			t.Fatalf("the cluster is InService with 3 workers Running, and slurmctld still has the removed node %s (%d writes refused); events:\n%s", name, refused, h.Events(id))
		}
		return true
	})
	h.M.Mu.Lock()
	defer h.M.Mu.Unlock()
	if refused < 30 {
		t.Errorf("the files were refused %d times, not 30: the apply was not held back", refused)
	}
}
