package agent

import (
	"testing"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/health"
)

// Xids the agent's monitors report count on their GPU's simulated metrics: the last Xid and
// the count, a double-bit ECC error for Xid 48; a GPU without Xids stays at zero; and each
// GPU's memory adds up to its instance type's.
func TestXidsCountOnTheirGPU(t *testing.T) {
	a := newTestAgent(t, "ml.g5.12xlarge") // 4 A10G GPUs of 24 GiB
	devs, err := a.accelerators()
	if err != nil || len(devs) != 4 {
		t.Fatalf("accelerators: %v %v", devs, err)
	}
	// As the kernel log monitor reports them: classified lines naming GPU 2's PCI address.
	for _, line := range []string{
		"NVRM: Xid (PCI:" + SimulatedPCI(2) + "): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
		"NVRM: Xid (PCI:" + SimulatedPCI(2) + "): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
	} {
		f, ok := health.Default().ClassifyLine(line)
		if !ok {
			t.Fatalf("not classified: %s", line)
		}
		a.report(f, "kernel-log")
	}
	m := a.sampleNode()
	if len(m.Gpus) != 4 {
		t.Fatalf("%d GPUs sampled, want 4", len(m.Gpus))
	}
	for _, g := range m.Gpus {
		want := struct {
			last       int32
			count, dbe uint64
		}{}
		if g.Index == 2 {
			want.last, want.count, want.dbe = 79, 2, 1
		}
		if g.LastXid != want.last || g.XidCount != want.count || g.EccDbeVolTotal != want.dbe {
			t.Errorf("GPU %d: last Xid %d, %d Xids, %d DBE; want %+v", g.Index, g.LastXid, g.XidCount, g.EccDbeVolTotal, want)
		}
		if g.FbUsedMib+g.FbFreeMib != 24576 || g.Device == "" || g.Uuid != devs[g.Index].Uuid {
			t.Errorf("GPU %d: %v", g.Index, g)
		}
	}
}

// A simulated GPU's volatile ECC count starts again with its driver (the agent of a rebooted
// node, a reset of the GPU), as DCGM's does; its lifetime (aggregate) count stays across the
// reboot; an NVLink error (Xid 74) counts in its NVLink error counters; the agent samples the
// root and its disk paths with their free space.
func TestVolatileCountsResetAndAggregatesStay(t *testing.T) {
	a := newTestAgent(t, "ml.g5.12xlarge")
	a.cfg.DiskPaths = []string{"/", t.TempDir()}
	if _, err := a.accelerators(); err != nil {
		t.Fatal(err)
	}
	xid := func(a *Agent, n string) {
		f, ok := health.Default().ClassifyLine("NVRM: Xid (PCI:" + SimulatedPCI(1) + "): " + n + ", pid='<unknown>', name=<unknown>, injected")
		if !ok {
			t.Fatalf("Xid %s not classified", n)
		}
		a.report(f, "kernel-log")
	}
	gpu1 := func(a *Agent) *agentproto.GPUMetrics { return a.sampleNode().Gpus[1] }
	xid(a, "48")
	xid(a, "74")
	if g := gpu1(a); g.EccDbeVolTotal != 1 || g.EccDbeAggTotal != 1 || g.NvlinkRecoveryErrors != 1 {
		t.Fatalf("after Xid 48 and 74: %v", g)
	}
	// The node rebooted: a new agent on the same state directory.
	again := newTestAgent(t, "ml.g5.12xlarge")
	again.cfg.StateDir = a.cfg.StateDir
	if g := gpu1(again); g.EccDbeVolTotal != 0 || g.EccDbeAggTotal != 1 || g.NvlinkRecoveryErrors != 0 || g.LastXid != 0 {
		t.Errorf("after a reboot: volatile %d, aggregate %d, NVLink %d, last Xid %d; want 0, 1, 0, 0", g.EccDbeVolTotal, g.EccDbeAggTotal, g.NvlinkRecoveryErrors, g.LastXid)
	}
	xid(again, "48")
	again.gpuReset(1)
	if g := gpu1(again); g.EccDbeVolTotal != 0 || g.EccDbeAggTotal != 2 || g.XidCount != 1 {
		t.Errorf("after a GPU reset: volatile %d, aggregate %d, Xids %d; want 0, 2, 1", g.EccDbeVolTotal, g.EccDbeAggTotal, g.XidCount)
	}
	fs := again.sampleNode().Filesystems
	if len(fs) != 1 { // again has no disk paths
		t.Errorf("file systems %v, want the root", fs)
	}
	fs = a.sampleNode().Filesystems
	if len(fs) != 2 || fs[0].Mountpoint != "/" || fs[0].SizeBytes == 0 || fs[0].FreeBytes < fs[0].AvailBytes || fs[0].Fstype == "" {
		t.Errorf("file systems %v, want the root (labelled, free >= available) and the disk path", fs)
	}
}
