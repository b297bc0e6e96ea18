package agent

import (
	"os"
	"testing"

	"github.com/haleproject/hale/internal/health"
)

// The device plugin's view of the GPUs: a finding that asks for an action makes its GPU
// Unhealthy, one that asks for nothing (an application's Xid 13) does not; a GPU whose device
// file is gone is Unhealthy; a successful reset gives a GPU back.
func TestPluginDevicesHealth(t *testing.T) {
	a := newTestAgent(t, "ml.g5.12xlarge")
	devs, err := a.accelerators()
	if err != nil {
		t.Fatal(err)
	}
	healthy := func() []bool {
		var out []bool
		for _, d := range a.pluginDevices() {
			out = append(out, d.Healthy)
		}
		return out
	}
	if h := healthy(); len(h) != 4 || !h[0] || !h[1] || !h[2] || !h[3] {
		t.Fatalf("a new g5.12xlarge's GPUs: %v; want 4 healthy", h)
	}
	if d := a.pluginDevices()[2]; d.ID != devs[2].Uuid || len(d.Paths) != 1 || d.Paths[0] != devs[2].DevicePath {
		t.Fatalf("GPU 2 as the plugin names it: %+v", d)
	}
	a.report(health.Finding{Fault: "gpu.xid.application", Action: health.Ignore, GPU: 0, Xid: 13}, "kernel-log")
	a.report(health.Finding{Fault: "gpu.bus_lost", Action: health.Replace, GPU: 1, Xid: 79}, "kernel-log")
	if err := os.Remove(devs[2].DevicePath); err != nil {
		t.Fatal(err)
	}
	if h := healthy(); !h[0] || h[1] || h[2] || !h[3] {
		t.Fatalf("after a Xid 13 on GPU 0, a Xid 79 on GPU 1, GPU 2's device gone: %v; want healthy, Unhealthy, Unhealthy, healthy", h)
	}
	a.gpuReset(1)
	if h := healthy(); !h[1] {
		t.Fatalf("GPU 1 after a successful reset: %v", h)
	}
}
