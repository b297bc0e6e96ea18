package slurm_test

import (
	"sort"
	"sync"
	"testing"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/harness"
	"github.com/haleproject/hale/internal/orchestrator"
	"github.com/haleproject/hale/internal/orchestrator/orchestratortest"
	"github.com/haleproject/hale/internal/orchestrator/slurm"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmtest"
	"github.com/haleproject/hale/internal/provider"
	"github.com/haleproject/hale/internal/store"
)

// TestConformance runs the orchestrator conformance suite on the Slurm orchestrator, its
// Slurm scripted by slurmtest.Ctld: the daemons hale starts, slurmctld reading the slurm.conf
// hale writes to the controller node, the slurmds registering, scontrol answering as Slurm's.
func TestConformance(t *testing.T) {
	s, _ := slurmSubject()
	orchestratortest.Run(t, s)
}

// slurmSubject is the conformance suite's subject: a Slurm cluster as SageMaker spells one
// (a Controller group of one node, the Compute group "workers" in a partition of its own), on
// a scripted Slurm (one per harness: the cluster's Slurm outlives a restart of hale's server).
func slurmSubject() (orchestratortest.Subject, func(h *harness.Harness) *slurmtest.Ctld) {
	var mu sync.Mutex
	ctlds := map[*harness.Harness]*slurmtest.Ctld{}
	ctldOf := func(h *harness.Harness) *slurmtest.Ctld {
		mu.Lock()
		defer mu.Unlock()
		return ctlds[h]
	}
	s := orchestratortest.Subject{
		Setup: func(h *harness.Harness) {
			c := &slurmtest.Ctld{Now: h.Clock.Now, Up: func(id string) (int, bool) {
				mc := h.M.Live[id] // under h.M.Mu: Answer runs in Script, Configured in Members
				if mc == nil {
					return 0, false
				}
				return mc.Boots, !h.Clock.Now().Before(mc.UpAt)
			}}
			mu.Lock()
			ctlds[h] = c
			mu.Unlock()
			// A compute node's slurmd waits, in its bring-up, for a later round's apply.
			h.Concurrent = true
			h.M.Inventory = func(provider.LaunchSpec) *store.NodeInventory {
				return &store.NodeInventory{CPUs: 4, MemoryMiB: 8192, Kernel: "6.1.0-hale", AgentVersion: "harness"}
			}
			h.M.Script = func(mc *harness.Machine, cmd *agentproto.Command) *agentproto.CommandResult {
				return c.Answer(mc.Spec.InstanceID, cmd)
			}
			h.T.Cleanup(func() {
				if u := c.Unexpected(); len(u) > 0 {
					h.T.Errorf("commands the scripted Slurm does not know: %q", u)
				}
			})
		},
		New: func(*harness.Harness) orchestrator.Orchestrator { return slurm.New(slurm.Config{}) },
		Request: func(name string, workers int32) *api.CreateClusterRequest {
			ctl := harness.Spec("controller", 1)
			ctl.SlurmConfig = &api.ClusterSlurmConfig{NodeType: new(api.ClusterSlurmNodeTypeController)}
			w := harness.Spec("workers", workers)
			w.SlurmConfig = &api.ClusterSlurmConfig{NodeType: new(api.ClusterSlurmNodeTypeCompute), PartitionNames: []string{"batch"}}
			return &api.CreateClusterRequest{ClusterName: new(name), InstanceGroups: []api.ClusterInstanceGroupSpecification{ctl, w},
				Orchestrator: &api.ClusterOrchestrator{Slurm: &api.ClusterOrchestratorSlurmConfig{SlurmConfigStrategy: new(api.ClusterSlurmConfigStrategyManaged)}}}
		},
		Others: 1,
		Members: func(h *harness.Harness, _ string) []string {
			h.M.Mu.Lock()
			defer h.M.Mu.Unlock()
			host, nodes := ctldOf(h).Configured()
			if host == "" {
				return nil // no slurmctld runs
			}
			byAddr := map[string]string{}
			for id, mc := range h.M.Live {
				byAddr[mc.IP] = id
			}
			ids := []string{host}
			for name, addr := range nodes {
				id := byAddr[addr]
				if id == "" || provider.Hostname(addr) != name {
					id = name + " (no machine at " + addr + ")"
				}
				ids = append(ids, id)
			}
			sort.Strings(ids)
			return ids
		},
	}
	return s, ctldOf
}
