package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/haleproject/hale/internal/health"
)

// A machine that comes back from a reboot (a repair, a maintenance) with fewer CPUs or less
// memory than it had lost hardware: a DIMM or a CPU the firmware disabled at POST. The basic
// checks compare what the machine has now with the most it has had, kept in the agent's state
// directory (it lasts through reboots and agent restarts; a new instance starts its own), so
// such a node fails its checks instead of returning to service smaller than the rest. The
// machine's own past is the measure, not the instance type's figures: the OS never sees all
// of a type's nominal memory, and own machines registered under a type differ among
// themselves. An operator who shrank a machine on purpose removes the file (resources.json).

// resourcesFile names the high-water mark in the state directory.
const resourcesFile = "resources.json"

// memoryLostMiB is how much less MemTotal must be to count as lost memory: it varies between
// boots by a few MiB (the kernel's reservations), and a DIMM is gigabytes.
const memoryLostMiB = 1024

// machineHigh is the most CPUs and memory this machine has had.
type machineHigh struct {
	CPUs      int   `json:"cpus"`
	MemoryMiB int64 `json:"memory_mib"`
}

// resourceFindings compares the machine's CPUs and memory now with the most it has had, and
// raises the mark when nothing is lost (a lost part keeps failing until the node is replaced).
func (a *Agent) resourceFindings(cpus int, memMiB int64, say func(string, ...any)) []health.Finding {
	path := filepath.Join(a.cfg.StateDir, resourcesFile)
	var high machineHigh
	if b, err := os.ReadFile(path); err == nil {
		json.Unmarshal(b, &high)
	}
	say("CPUs: %d (the most this machine had: %d); memory: %d MiB (the most: %d MiB)", cpus, max(cpus, high.CPUs), memMiB, max(memMiB, high.MemoryMiB))
	cat := health.Default()
	var out []health.Finding
	if cpus > 0 && high.CPUs > cpus {
		out = append(out, cat.FaultFinding("node.resources_lost", fmt.Sprintf("%d CPUs online, %d before: a CPU or its cores lost since the machine last had them all", cpus, high.CPUs)))
	}
	if memMiB > 0 && high.MemoryMiB-memMiB >= memoryLostMiB {
		out = append(out, cat.FaultFinding("node.resources_lost", fmt.Sprintf("%d MiB of memory, %d MiB before: %d MiB lost (a DIMM)", memMiB, high.MemoryMiB, high.MemoryMiB-memMiB)))
	}
	if len(out) == 0 && (cpus > high.CPUs || memMiB > high.MemoryMiB) && cpus > 0 && memMiB > 0 {
		b, _ := json.Marshal(machineHigh{CPUs: max(cpus, high.CPUs), MemoryMiB: max(memMiB, high.MemoryMiB)})
		writeFileAtomic(path, b, 0o600)
	}
	return out
}

// machineResources is what the machine has now: the CPUs the agent may run on and MemTotal.
func machineResources() (int, int64) { return runtime.NumCPU(), memoryMiB() }
