package agent

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/deviceplugin"
	"github.com/haleproject/hale/internal/health"
)

// The node's GPUs for its kubelet (issue 28): on a node whose kubelet is real, the agent is
// its nvidia.com/gpu device plugin (internal/deviceplugin). A GPU is Unhealthy to the kubelet
// when it is gone from the bus or its device file is, or when the agent's monitors reported a
// finding on it that asks for more than nothing (a Xid hale resets, reboots or replaces for):
// NVIDIA's plugin, too, takes a GPU with a critical Xid out of the Node's allocatable, so that
// no new pod lands on it while hale repairs it. A successful GPU reset gives it back; a reboot
// starts the agent afresh (the kernel log's Xids before it are not read again).

// gpuFaults is the GPUs the monitors found faulty in this agent's life, by index.
type gpuFaults struct {
	mu  sync.Mutex
	bad map[int]bool
}

// startDevicePlugin serves the node's GPUs to its kubelet once the kubelet's registration
// socket appears in cfg.DevicePluginDir; a node without GPUs, or an agent without the
// directory, serves nothing.
func (a *Agent) startDevicePlugin(ctx context.Context) {
	if a.cfg.DevicePluginDir == "" || len(a.pluginDevices()) == 0 {
		return
	}
	// The driver's control device, where deviceNodes makes it for simulated GPUs (only in a
	// node's own /dev) or where NVIDIA's driver has it.
	ctlDir := a.cfg.DeviceDir
	if a.nvml != nil {
		ctlDir = "/dev"
	}
	var shared []string
	if ctlDir != "" {
		shared = []string{filepath.Join(ctlDir, "nvidiactl")}
	}
	a.plugin = deviceplugin.New(deviceplugin.Config{Dir: a.cfg.DevicePluginDir, Devices: a.pluginDevices, Shared: shared, Log: a.log})
	go a.plugin.Run(ctx)
}

// pluginDevices is the node's GPUs as the device plugin reports them.
func (a *Agent) pluginDevices() []deviceplugin.Device {
	var devs []*agentproto.Accelerator
	if a.nvml != nil {
		devs = a.nvml.accelerators()
	} else {
		devs, _ = a.simulatedDevices()
	}
	a.faults.mu.Lock()
	defer a.faults.mu.Unlock()
	var out []deviceplugin.Device
	for _, d := range devs {
		if d.Kind != "gpu" {
			continue
		}
		i := int(d.Index)
		ok := onBus(d) && !a.faults.bad[i]
		out = append(out, deviceplugin.Device{ID: d.Uuid, Index: i, Paths: []string{d.DevicePath}, Healthy: ok})
	}
	return out
}

// gpuFound records a finding on a GPU: one that asks for an action makes it Unhealthy to the
// kubelet.
func (a *Agent) gpuFound(gpu int, action health.Action) {
	if gpu < 0 || action.Severity() < health.ResetGPU.Severity() {
		return
	}
	a.faults.mu.Lock()
	if a.faults.bad == nil {
		a.faults.bad = map[int]bool{}
	}
	a.faults.bad[gpu] = true
	a.faults.mu.Unlock()
	if a.plugin != nil {
		a.plugin.Notify()
	}
}

// gpuReset forgets a GPU's faults after it was reset in place.
func (a *Agent) gpuReset(gpu int) {
	a.resetGPUCounts(gpu)
	if a.nvml == nil { // a simulated GPU's throttling ends with its reset
		os.Remove(filepath.Join(SimulatedDriverDir, "throttle-"+strconv.Itoa(gpu)))
	}
	a.faults.mu.Lock()
	delete(a.faults.bad, gpu)
	a.faults.mu.Unlock()
	if a.plugin != nil {
		a.plugin.Notify()
	}
}
