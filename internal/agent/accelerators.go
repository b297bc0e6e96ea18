package agent

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/topology"
)

// SimulatedDevicesFile holds a node's simulated accelerators, in the agent's state directory:
// the devices of its instance type from the catalog, each with a UUID and a health flag that
// the fault injector can break. Nodes with real devices (NVML) do not use it.
const SimulatedDevicesFile = "accelerators.json"

// accelerators returns the node's devices: the simulated ones of its instance type, created on
// first use and kept across reboots (they are the machine's, like its disks).
func (a *Agent) accelerators() ([]*agentproto.Accelerator, error) {
	path := filepath.Join(a.cfg.StateDir, SimulatedDevicesFile)
	var devs []*agentproto.Accelerator
	b, err := os.ReadFile(path)
	if err == nil {
		return devs, json.Unmarshal(b, &devs)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	it, ok := topology.Lookup(a.cfg.InstanceType)
	if !ok || it.Accelerators == nil {
		return nil, nil
	}
	for i := 0; i < it.Accelerators.Count; i++ {
		u := make([]byte, 16)
		rand.Read(u)
		prefix := "GPU"
		if it.Accelerators.Kind == "neuron" {
			prefix = "NEURON"
		}
		devs = append(devs, &agentproto.Accelerator{Index: int32(i), Kind: it.Accelerators.Kind, Model: it.Accelerators.Model,
			Uuid:      fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]),
			MemoryMib: it.Accelerators.MemoryMiB, Simulated: true, Healthy: true})
	}
	out, _ := json.MarshalIndent(devs, "", "  ")
	return devs, writeFileAtomic(path, out, 0o644)
}
