package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haleproject/hale/internal/agentproto"
)

// A simulated GPU is reset in place; one the fault injector took off the bus is not, and the
// error says why (the server then reboots the node).
func TestResetSimulatedGPU(t *testing.T) {
	a := newTestAgent(t, "ml.p5.48xlarge")
	r := a.resetGPU(context.Background(), &agentproto.ResetGPU{Index: 3, Pci: SimulatedPCI(3)})
	if r.Error != "" || r.ExitCode != 0 || !strings.Contains(string(r.StdoutTail), "was successfully reset") {
		t.Fatalf("reset of a healthy simulated GPU: %+v", r)
	}
	if r := a.resetGPU(context.Background(), &agentproto.ResetGPU{Index: -1, Pci: SimulatedPCI(2)}); r.Error != "" {
		t.Fatalf("reset by PCI address: %+v", r)
	}

	path := filepath.Join(a.cfg.StateDir, SimulatedDevicesFile)
	var devs []*agentproto.Accelerator
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &devs)
	}
	if err != nil {
		t.Fatal(err)
	}
	devs[3].Healthy = false // as the fault injector takes a GPU off the bus
	b, _ = json.Marshal(devs)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r = a.resetGPU(context.Background(), &agentproto.ResetGPU{Index: 3})
	if r.ExitCode == 0 || !strings.Contains(r.Error, "off the bus") {
		t.Fatalf("reset of a GPU off the bus: %+v", r)
	}
	if r := a.resetGPU(context.Background(), &agentproto.ResetGPU{Index: 42}); !strings.Contains(r.Error, "no GPU 42") {
		t.Fatalf("reset of a GPU the node lacks: %+v", r)
	}
}
