package agent

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/topology"
	"golang.org/x/sys/unix"
)

// SimulatedDevicesFile holds a node's simulated accelerators, in the agent's state directory:
// the devices of its instance type from the catalog, each with a UUID and a health flag that
// the fault injector can break. Nodes with real devices (NVML) do not use it.
const SimulatedDevicesFile = "accelerators.json"

// accelerators returns the node's devices: the simulated ones of its instance type, created on
// first use and kept across reboots (they are the machine's, like its disks).
func (a *Agent) accelerators() ([]*agentproto.Accelerator, error) {
	if a.nvml != nil {
		return a.nvml.accelerators(), nil
	}
	path := filepath.Join(a.cfg.StateDir, SimulatedDevicesFile)
	var devs []*agentproto.Accelerator
	b, err := os.ReadFile(path)
	if err == nil {
		if err := json.Unmarshal(b, &devs); err != nil {
			return nil, err
		}
		for _, d := range devs { // a node started with another DeviceDir (an older agent)
			if d.Simulated && d.Kind == "gpu" {
				d.DevicePath = a.devicePath(int(d.Index))
			}
		}
		return devs, a.deviceNodes(devs)
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
		d := &agentproto.Accelerator{Index: int32(i), Kind: it.Accelerators.Kind, Model: it.Accelerators.Model,
			Uuid:      fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]),
			MemoryMib: it.Accelerators.MemoryMiB, Simulated: true, Healthy: true}
		if d.Kind == "gpu" {
			d.DevicePath = a.devicePath(i)
		}
		devs = append(devs, d)
	}
	out, _ := json.MarshalIndent(devs, "", "  ")
	if err := writeFileAtomic(path, out, 0o644); err != nil {
		return nil, err
	}
	return devs, a.deviceNodes(devs)
}

// nvidiaMajor is the character device major number of NVIDIA GPUs (/dev/nvidia0 is 195, 0);
// nvidiaCtlMinor is /dev/nvidiactl's minor (NVIDIA's driver README, "Device files").
const (
	nvidiaMajor    = 195
	nvidiaCtlMinor = 255
)

// devicePath is the device file of simulated GPU i.
func (a *Agent) devicePath(i int) string {
	dir := a.cfg.DeviceDir
	if dir == "" {
		dir = filepath.Join(a.cfg.StateDir, "dev")
	}
	return filepath.Join(dir, fmt.Sprintf("nvidia%d", i))
}

// deviceNodes makes the simulated GPUs' device files: character devices with NVIDIA's numbers
// in the agent's own directory, so Slurm's gres.conf can name them as File= (it checks that
// they are devices) while nothing can open them.
func (a *Agent) deviceNodes(devs []*agentproto.Accelerator) error {
	if a.cfg.DeviceDir != "" && slices.ContainsFunc(devs, func(d *agentproto.Accelerator) bool { return d.Simulated && d.Kind == "gpu" }) {
		// The driver's control device, which CUDA opens first, beside the GPUs as on a machine.
		ctl := filepath.Join(a.cfg.DeviceDir, "nvidiactl")
		if _, err := os.Stat(ctl); err != nil {
			if err := mknodChar(ctl, nvidiaCtlMinor); err != nil {
				return err
			}
		}
	}
	for _, d := range devs {
		// A device the fault injector took away (unhealthy) stays gone across reboots, as a
		// GPU that fell off the bus does.
		if !d.Simulated || d.DevicePath == "" || !d.Healthy {
			continue
		}
		if _, err := os.Stat(d.DevicePath); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(d.DevicePath), 0o755); err != nil {
			return err
		}
		if err := mknodChar(d.DevicePath, uint32(d.Index)); err != nil {
			return err
		}
	}
	return nil
}

// mknodChar makes an NVIDIA character device file, mode 0666 as the driver's are.
func mknodChar(path string, minor uint32) error {
	if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, int(unix.Mkdev(nvidiaMajor, minor))); err != nil {
		return fmt.Errorf("simulated device %s: %w", path, err)
	}
	return os.Chmod(path, 0o666) // mknod applies the umask
}
