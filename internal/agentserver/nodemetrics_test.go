package agentserver_test

import (
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/agentserver"
)

// A real agent samples its node at once when its session opens: the server keeps that sample
// (the node's memory and load read from /proc, its instance type's 4 simulated GPUs under
// DCGM's fields) while the session lasts, keeps it marked Ended when the agent goes, and the
// agent's next session supersedes it.
func TestAgentSampleKeptWhileItsSessionLasts(t *testing.T) {
	f := newFixture(t, 1, 100*time.Millisecond)
	id := "i-00000000000000000"
	dir := t.TempDir()
	stop := f.startAgent(t, id, dir)
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
	if got.Ended {
		t.Error("the sample of a session that lasts is marked ended")
	}
	stop()
	waitFor(t, "the sample kept, ended, after the session", func() bool {
		s := f.srv.NodeSamples()
		return len(s) == 1 && s[0].Ended && s[0].Metrics == m
	})
	stop = f.startAgent(t, id, dir)
	defer stop()
	waitFor(t, "the new session's sample", func() bool {
		s := f.srv.NodeSamples()
		return len(s) == 1 && !s[0].Ended && s[0].Metrics != m
	})
}

// sendSample sends a sample of one GPU with these counts, sampled every interval.
func sendSample(t *testing.T, stream agentproto.Agent_ConnectClient, interval time.Duration, xids, dbe uint64) {
	t.Helper()
	if err := stream.Send(&agentproto.AgentMessage{Msg: &agentproto.AgentMessage_Metrics{Metrics: &agentproto.NodeMetrics{
		SampledUnixMs: time.Now().UnixMilli(), IntervalMs: uint32(interval / time.Millisecond),
		Gpus: []*agentproto.GPUMetrics{{Index: 0, Uuid: "GPU-0", LastXid: 79, XidCount: xids, EccDbeVolTotal: dbe}}}}}); err != nil {
		t.Fatal(err)
	}
}

// shown is the instance's sample NodeSamples shows, nil when none.
func shown(f *fixture, id string) *agentserver.NodeSample {
	for _, s := range f.srv.NodeSamples() {
		if s.InstanceID == id {
			return &s
		}
	}
	return nil
}

// The last sample of a session that ended (a repair took the node away) is shown, marked ended,
// until it is agentserver.StaleSamples intervals old; the instance's next session (a reboot, an
// agent restart) continues its Xid count where it was, though its agent counts from 0; its
// volatile ECC count is the driver's, reset by the reboot or a GPU reset.
func TestEndedSessionsSampleAndCountersContinue(t *testing.T) {
	f := newFixture(t, 1, time.Second)
	id := "i-00000000000000000"
	cert, err := f.enroll(t, id, agentproto.CapabilityVersion)
	if err != nil {
		t.Fatal(err)
	}
	stream, _, err := f.session(t, id, cert)
	if err != nil {
		t.Fatal(err)
	}
	const interval = time.Second
	sent := time.Now()
	sendSample(t, stream, interval, 2, 1)
	waitFor(t, "the sample", func() bool { s := shown(f, id); return s != nil && !s.Ended })
	stream.CloseSend()
	waitFor(t, "the session to end", func() bool { return !f.srv.Connected(id) })
	if s := shown(f, id); s == nil || !s.Ended || s.Metrics.Gpus[0].XidCount != 2 || s.Metrics.Gpus[0].LastXid != 79 {
		t.Fatalf("after the session ended: %+v, want its last sample, ended", s)
	}
	waitFor(t, "the ended sample stale", func() bool { return shown(f, id) == nil })
	if d := time.Since(sent); d < agentserver.StaleSamples*interval {
		t.Errorf("the ended sample went after %s, before %d intervals", d, agentserver.StaleSamples)
	}

	stream, _, err = f.session(t, id, cert)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	for _, c := range []struct{ xids, dbe, wantXids, wantDbe uint64 }{
		{0, 0, 2, 0}, // the rebooted node's agent starts from 0: the Xid total stays, the volatile ECC count is the driver's, 0
		{1, 1, 3, 1}, // and count on
		{0, 0, 3, 0}, // a GPU reset zeroes the volatile ECC count within a session, as DCGM's
		{2, 0, 5, 0},
	} {
		sendSample(t, stream, 15*time.Second, c.xids, c.dbe)
		waitFor(t, "the new session's sample", func() bool {
			s := shown(f, id)
			return s != nil && !s.Ended && s.Metrics.Gpus[0].XidCount == c.wantXids && s.Metrics.Gpus[0].EccDbeVolTotal == c.wantDbe
		})
	}
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
