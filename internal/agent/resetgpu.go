package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
)

// The ResetGPU command (agentproto.ResetGPU): NVIDIA's RESET_GPU in place. A node with the
// driver runs `nvidia-smi -r -i N` once no process holds the GPU (nvidia-smi refuses a GPU in
// use, and a reset under a running job would kill it); a virtual machine cannot reset a GPU it
// is passed through, nor a node without nvidia-smi. A simulated GPU (hale's local nodes) is
// reset by the agent: a healthy one is reset, one the fault injector took off the bus stays
// gone, as a real one does. An error in the result says why, and the server reboots the node.

// resetTimeout bounds nvidia-smi -r (it takes seconds; a hung driver must not hold the agent).
const resetTimeout = 90 * time.Second

// resetGPU resets the GPU the command names.
func (a *Agent) resetGPU(ctx context.Context, c *agentproto.ResetGPU) *agentproto.CommandResult {
	fail := func(format string, args ...any) *agentproto.CommandResult {
		return &agentproto.CommandResult{ExitCode: -1, Error: fmt.Sprintf(format, args...)}
	}
	if a.nvml == nil {
		return a.resetSimulated(c)
	}
	index := int(c.Index)
	if index < 0 {
		index = a.nvml.indexOf(c.Pci)
	}
	if index < 0 {
		return fail("no GPU at %s on this node", c.Pci)
	}
	if virtualMachine() {
		return fail("the node is a virtual machine: its GPUs cannot be reset in place")
	}
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return fail("no nvidia-smi on the node")
	}
	i := strconv.Itoa(index)
	apps := a.run(ctx, []string{smi, "--query-compute-apps=pid,process_name", "--format=csv,noheader", "-i", i}, "", nil, 30*time.Second, "")
	if apps.ExitCode != 0 || apps.Error != "" {
		return fail("nvidia-smi could not list GPU %d's processes: %s%s", index, apps.Error, strings.TrimSpace(string(apps.OutputTail)))
	}
	if held := strings.TrimSpace(string(apps.StdoutTail)); held != "" {
		return fail("processes hold GPU %d: %s", index, strings.ReplaceAll(held, "\n", "; "))
	}
	r := a.run(ctx, []string{smi, "-r", "-i", i}, "", nil, resetTimeout, "")
	if r.ExitCode != 0 && r.Error == "" {
		r.Error = fmt.Sprintf("nvidia-smi -r -i %d: exit code %d: %s", index, r.ExitCode, strings.TrimSpace(string(r.OutputTail)))
	}
	return r
}

// resetSimulated resets a simulated GPU (accelerators.json).
func (a *Agent) resetSimulated(c *agentproto.ResetGPU) *agentproto.CommandResult {
	fail := func(format string, args ...any) *agentproto.CommandResult {
		return &agentproto.CommandResult{ExitCode: -1, Error: fmt.Sprintf(format, args...)}
	}
	devs, err := a.accelerators()
	if err != nil {
		return fail("reading the node's devices: %v", err)
	}
	for _, d := range devs {
		if d.Kind != "gpu" || !(int(d.Index) == int(c.Index) || c.Index < 0 && SimulatedPCI(int(d.Index)) == c.Pci) {
			continue
		}
		if !d.Simulated {
			return fail("GPU %d is not simulated and the node has no NVIDIA driver", d.Index)
		}
		if !d.Healthy {
			return fail("GPU %d (%s) is off the bus: a reset cannot bring it back", d.Index, SimulatedPCI(int(d.Index)))
		}
		if pids := holders(d.DevicePath); len(pids) > 0 {
			return fail("processes hold GPU %d: %s", d.Index, strings.Join(pids, ", "))
		}
		out := fmt.Sprintf("GPU %s.0 was successfully reset (simulated).\n", SimulatedPCI(int(d.Index)))
		return &agentproto.CommandResult{StdoutTail: []byte(out), OutputTail: []byte(out)}
	}
	if c.Index >= 0 {
		return fail("no GPU %d on this node", c.Index)
	}
	return fail("no GPU at %s on this node", c.Pci)
}

// holders are the processes that have the device file open (their pids).
func holders(device string) []string {
	if device == "" {
		return nil
	}
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		if target, err := os.Readlink(fd); err == nil && target == device {
			pid := strings.Split(strings.TrimPrefix(fd, "/proc/"), "/")[0]
			if len(out) == 0 || out[len(out)-1] != pid {
				out = append(out, pid)
			}
		}
	}
	return out
}

// virtualMachine reports whether the node runs under a hypervisor (the CPU's hypervisor flag).
func virtualMachine() bool {
	b, err := os.ReadFile("/proc/cpuinfo")
	return err == nil && strings.Contains(string(b), " hypervisor")
}

// indexOf is the index of the GPU at a PCI address (as Xid lines name it), -1 when none.
func (m *nvmlMonitor) indexOf(pci string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.devs {
		if pci != "" && d.pci == pci {
			return d.index
		}
	}
	return -1
}
