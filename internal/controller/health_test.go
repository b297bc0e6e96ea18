package controller

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/store"
)

// feedLog sends a kernel log to the controller as a node's agent does: each line through the
// agent's classifier stream, each finding over the wire as observed at the given time.
func feedLog(t *testing.T, c *Controller, log string, observed time.Time) {
	t.Helper()
	s := health.Default().NewStream(health.Options{})
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		for _, f := range s.Line(line) {
			pf := agent.ProtoFinding(f, "kernel-log")
			pf.ObservedUnixMs = observed.UnixMilli()
			c.HandleFinding(context.Background(), joinCluster, "i-00000000000000901", pf)
		}
	}
}

// One Xid 13 exception, as a serving node's driver logs it (three Xid 13 lines and an Xid
// 43, failure-samples F01), goes through the live path (the agent's classifier, the server's
// policy) as one finding with all its lines, one event, and no repair of the healthy node.
// Only when the GPU fails for three different processes within the hour is it repaired.
func TestOneApplicationErrorRepairsNothing(t *testing.T) {
	c, _ := joinFixture(t, store.PhaseReady, time.Now().UTC())
	b, err := os.ReadFile("../health/testdata/samples/F01.txt")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	feedLog(t, c, string(b), now.Add(-30*time.Minute))
	fs, rs := findingsAndRepairs(t, c)
	if len(rs) != 0 {
		t.Fatalf("one application error opened a repair: %+v", rs[0])
	}
	if len(fs) != 1 || fs[0].Lines != 4 || fs[0].Decision != "Ignore" || fs[0].PID != 2924364 || strings.Count(fs[0].Evidence, "\n") != 3 {
		t.Fatalf("findings: %+v", fs)
	}
	_, ev := gpu1(t, c)
	if strings.Count(ev, "Health: gpu.xid.app_fault") != 1 || !strings.Contains(ev, "No node action: an application error; hale acts only when it recurs on GPU 0000:38:00 in 3 different jobs or processes within 1h") {
		t.Errorf("events:\n%s", ev)
	}
	// The same exception in two more programs on the same GPU: the third is the GPU's.
	burst := func(pid int) string {
		return fmt.Sprintf("NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 9, TPC 1, SM 1): Out Of Range Address\n"+
			"NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception: ESR 0x546fb0=0x11f000e\n"+
			"NVRM: Xid (PCI:0000:38:00): 43, pid=%d, name=python3, Ch 00000008", pid)
	}
	feedLog(t, c, burst(4001), now.Add(-20*time.Minute))
	if _, rs := findingsAndRepairs(t, c); len(rs) != 0 {
		t.Fatalf("two programs opened a repair: %+v", rs[0])
	}
	feedLog(t, c, burst(4002), now.Add(-10*time.Minute))
	fs, rs = findingsAndRepairs(t, c)
	if len(fs) != 3 || len(rs) != 1 || rs[0].Action != "Reboot" || rs[0].Fault != "gpu.xid.app_fault" {
		t.Fatalf("three programs: %d findings, repairs %+v", len(fs), rs)
	}
	if _, ev := gpu1(t, c); !strings.Contains(ev, "escalated: gpu.xid.app_fault recurred on GPU 0000:38:00 in 3 different jobs or processes within 1h (pid 4002, pid 2924364, pid 4001)") {
		t.Errorf("events:\n%s", ev)
	}
}

// The same program failing again and again on the same GPU repairs nothing: it is the
// program's error.
func TestOneProgramFailingRepeatedlyRepairsNothing(t *testing.T) {
	c, _ := joinFixture(t, store.PhaseReady, time.Now().UTC())
	now := time.Now().UTC()
	for i := 0; i < 5; i++ {
		feedLog(t, c, "NVRM: Xid (PCI:0000:38:00): 31, pid=77, name=python3, Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2a_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
			now.Add(time.Duration(i-5)*time.Minute))
	}
	if fs, rs := findingsAndRepairs(t, c); len(fs) != 5 || len(rs) != 0 {
		t.Fatalf("%d findings, repairs %+v", len(fs), rs)
	}
}

// A hardware fault the driver reports in several lines opens one repair with the catalog's
// action: the episode's own repair is no earlier one it "recurred" after.
func TestMultiLineHardwareFaultRepairsOnce(t *testing.T) {
	c, _ := joinFixture(t, store.PhaseReady, time.Now().UTC())
	feedLog(t, c, `NVRM: Xid (PCI:0000:10:00): 48, pid=1, name=python, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.
NVRM: Xid (PCI:0000:10:00): 48, pid=1, name=python, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 1.
NVRM: Xid (PCI:0000:10:00): 48, pid=1, name=python, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 7, subpartition 0.`, time.Now().UTC())
	fs, rs := findingsAndRepairs(t, c)
	if len(fs) != 1 || fs[0].Lines != 3 || len(rs) != 1 || rs[0].Action != "Reboot" {
		t.Fatalf("%d findings, repairs %+v", len(fs), rs)
	}
}

// NVML's critical-Xid event for the same Xid joins the kernel's lines of that exception.
func TestNVMLEventJoinsTheEpisode(t *testing.T) {
	c, _ := joinFixture(t, store.PhaseReady, time.Now().UTC())
	now := time.Now().UTC()
	feedLog(t, c, "NVRM: Xid (PCI:0000:10:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", now)
	f, ok := health.Default().ClassifyLine("NVRM: Xid (PCI:0000:10:00): 79, reported by NVML's critical Xid event")
	if !ok {
		t.Fatal("no finding")
	}
	pf := agent.ProtoFinding(f, "nvml")
	pf.ObservedUnixMs = now.Add(300 * time.Millisecond).UnixMilli()
	c.HandleFinding(context.Background(), joinCluster, "i-00000000000000901", pf)
	fs, rs := findingsAndRepairs(t, c)
	if len(fs) != 1 || fs[0].Lines != 2 || !strings.Contains(fs[0].Evidence, "NVML") || len(rs) != 1 {
		t.Fatalf("findings %+v, repairs %d", fs, len(rs))
	}
	if _, ev := gpu1(t, c); strings.Count(ev, "Health: gpu.bus_lost") != 1 {
		t.Errorf("events:\n%s", ev)
	}
}

// Three programs failing on one GPU seconds apart are three errors: the third reboots.
func TestThreeProcessesSecondsApart(t *testing.T) {
	c, _ := joinFixture(t, store.PhaseReady, time.Now().UTC())
	now := time.Now().UTC()
	for i, pid := range []int{2924364, 4001, 4002} {
		feedLog(t, c, fmt.Sprintf("NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception\n"+
			"NVRM: Xid (PCI:0000:38:00): 43, pid=%d, name=python3, Ch 00000008", pid), now.Add(time.Duration(i)*time.Second))
	}
	fs, rs := findingsAndRepairs(t, c)
	if len(rs) != 1 || rs[0].Action != "Reboot" {
		t.Fatalf("%d findings, repairs %+v", len(fs), rs)
	}
}
