package agentserver_test

import (
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
)

// A real agent samples its node at once when its session opens: the server keeps that sample
// (the node's memory and load read from /proc, its instance type's 4 simulated GPUs under
// DCGM's fields) while the session lasts, and drops it when the agent goes.
func TestAgentSampleKeptWhileItsSessionLasts(t *testing.T) {
	f := newFixture(t, 1, 100*time.Millisecond)
	id := "i-00000000000000000"
	stop := f.startAgent(t, id, t.TempDir())
	var got agentserver.NodeSample
	waitFor(t, "a sample", func() bool {
		s := f.srv.NodeSamples()
		if len(s) == 1 {
			got = s[0]
		}
		return len(s) == 1
	})
	m := got.Metrics
	if got.InstanceID != id || got.ClusterID != f.cluster {
		t.Errorf("sample of %s in %s, want %s in %s", got.InstanceID, got.ClusterID, id, f.cluster)
	}
	if m.MemoryTotalBytes == 0 || m.MemoryAvailableBytes == 0 || m.MemoryAvailableBytes > m.MemoryTotalBytes || m.RootSizeBytes == 0 || len(m.Cpu) != len(agentproto.CPUModes) {
		t.Errorf("the node's counters are not read: %v", m)
	}
	if len(m.Gpus) != 4 {
		t.Fatalf("%d GPUs sampled, want ml.g5.12xlarge's 4", len(m.Gpus))
	}
	for _, g := range m.Gpus {
		if g.Uuid == "" || g.FbUsedMib+g.FbFreeMib != 24576 || g.GpuTempC <= 0 || g.PowerUsageW <= 0 || g.LastXid != 0 || !g.Simulated {
			t.Errorf("GPU %d: %v", g.Index, g)
		}
	}
	stop()
	waitFor(t, "the sample dropped with the session", func() bool { return len(f.srv.NodeSamples()) == 0 })
}

// An agent older than capability 10 sends no samples and is served as before (it has none); a
// sample older than agentserver.StaleSamples of its interval is not shown though its session
// lasts (the agent stopped sampling).
func TestOldAgentsAndStaleSamples(t *testing.T) {
	f := newFixture(t, 2, time.Second)
	old, _, err := f.hello(t, "i-00000000000000000", 9)
	if err != nil {
		t.Fatalf("an agent of capability 9 is refused: %v", err)
	}
	if err := old.Send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Heartbeat{Heartbeat: &agentproto.Heartbeat{Seq: 1}}}); err != nil {
		t.Fatal(err)
	}
	stream, _, err := f.hello(t, "i-00000000000000001", agentproto.CapabilityVersion)
	if err != nil {
		t.Fatal(err)
	}
	const interval = 100 * time.Millisecond
	sent := time.Now() // before the server can have it: it is shown for at least 3 intervals from here
	if err := stream.Send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Metrics{Metrics: &agentproto.NodeMetrics{
		SampledUnixMs: time.Now().UnixMilli(), IntervalMs: uint32(interval / time.Millisecond), Load1: 1}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sample", func() bool {
		s := f.srv.NodeSamples()
		return len(s) == 1 && s[0].InstanceID == "i-00000000000000001"
	})
	waitFor(t, "the sample stale", func() bool { return len(f.srv.NodeSamples()) == 0 })
	if d := time.Since(sent); d < agentserver.StaleSamples*interval {
		t.Errorf("the sample went after %s, before %d intervals", d, agentserver.StaleSamples)
	}
	if !f.srv.Connected("i-00000000000000001") || !f.srv.Connected("i-00000000000000000") {
		t.Error("a session ended")
	}
}
