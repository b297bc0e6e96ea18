package agent

import (
	"testing"

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
