package local

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/agentproto"
)

// A GPU that falls off the bus is gone before it is unhealthy: between loseGPU's steps the
// agent's device monitor must see its device file gone (gpu.count_mismatch), never a device
// present and unhealthy (gpu.device_unhealthy), which full87 saw with the steps the other way.
func TestLoseGPUIsGoneBeforeUnhealthy(t *testing.T) {
	state := t.TempDir()
	dev := filepath.Join(state, "dev", "nvidia0")
	os.MkdirAll(filepath.Dir(dev), 0o755)
	if err := os.WriteFile(dev, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	devs := []*agentproto.Accelerator{{Index: 0, Kind: "gpu", Uuid: "GPU-0", Healthy: true, DevicePath: "/var/lib/hale-agent/dev/nvidia0"}}
	b, _ := json.Marshal(devs)
	path := filepath.Join(state, agent.SimulatedDevicesFile)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	seen := false
	loseGPUStep = func() {
		seen = true
		var now []*agentproto.Accelerator
		b, _ := os.ReadFile(path)
		json.Unmarshal(b, &now)
		_, err := os.Stat(dev)
		if present := err == nil; present && !now[0].Healthy {
			t.Errorf("between the steps the GPU is present and unhealthy: a monitor would call it gpu.device_unhealthy")
		} else if present {
			t.Errorf("between the steps the GPU's device file is still there")
		}
	}
	t.Cleanup(func() { loseGPUStep = nil })
	if _, err := loseGPU(t.TempDir(), state, 0); err != nil {
		t.Fatal(err)
	}
	var after []*agentproto.Accelerator
	b, _ = os.ReadFile(path)
	json.Unmarshal(b, &after)
	if !seen || after[0].Healthy {
		t.Errorf("after loseGPU: step seen %v, healthy %v; want the device unhealthy", seen, after[0].Healthy)
	}
	if _, err := os.Stat(dev); !os.IsNotExist(err) {
		t.Errorf("the device file is still there: %v", err)
	}
}
