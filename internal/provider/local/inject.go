package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/health"
)

// Fault is a fault to inject into a local node (hale debug inject-fault). Exactly one kind is
// set. Each breaks the node the way hardware breaks, through the paths the agent's monitors
// read: a kernel line in the node's /var/log/messages, a dead process, a device gone from the
// node, a full disk.
type Fault struct {
	Xid        int    // an NVRM Xid line for GPU (below)
	GPU        int    // the GPU of an Xid line
	Text       string // the Xid line's text (default: the catalog's meaning)
	LogLine    string // kernel log lines, as given (several: one per line), written at once
	KillAgent  bool   // SIGKILL the node's agent (its heartbeats stop)
	KillSlurmd bool   // SIGKILL slurmd (the agent starts it again; Slurm notices)
	LoseGPU    int    // -1 for none: the GPU's device disappears and stays gone across reboots
	FillDisk   bool   // fill the node's own disk (NodeDisk)
	// Throttle makes GPU (above) hold its clocks down: "thermal" (hot, 92 C) or "power". The
	// simulated driver's state is the node's agent.SimulatedDriverDir, which a reboot empties
	// and a reset of the GPU clears. No Xid is written: the driver prints none for throttling.
	Throttle string
	// StopJob stops (SIGSTOP) the processes of the node's job steps: a rank that no longer
	// takes part in its collectives, so the job hangs while every node check passes.
	StopJob bool
}

// ErrNotLocalNode: the node is not one of the local provider's (the static provider's nodes
// take kernel lines through the server: hale debug inject-fault does that).
var ErrNotLocalNode = errors.New("not a local-provider node")

// XidLine is the NVRM line of f's Xid on f's GPU, as the driver prints it.
func XidLine(f Fault) string {
	text := f.Text
	if text == "" {
		text = "injected by hale debug inject-fault"
		if e, ok := health.Default().Xid(f.Xid); ok {
			text = e.Meaning
		}
	}
	return fmt.Sprintf("NVRM: Xid (PCI:%s): %d, pid='<unknown>', name=<unknown>, %s", agent.SimulatedPCI(f.GPU), f.Xid, text)
}

// InjectFault applies f to the local node id of the provider rooted at root (DATA_DIR/local)
// and says what it did.
func InjectFault(root, id string, f Fault) (string, error) {
	dir := filepath.Join(root, "instances", id)
	nodeRoot := filepath.Join(dir, "root")
	if _, err := os.Stat(filepath.Join(dir, "instance.json")); err != nil {
		return "", fmt.Errorf("%w: node %s is not under %s", ErrNotLocalNode, id, root)
	}
	var setup NodeSetup
	if b, err := os.ReadFile(filepath.Join(dir, "setup.json")); err == nil {
		json.Unmarshal(b, &setup)
	}
	switch {
	case f.Xid > 0:
		what, err := kernelLine(nodeRoot, setup.Hostname, XidLine(f))
		if e, ok := health.Default().Xid(f.Xid); err == nil && ok && (e.Action == health.Reboot || e.Action == health.Replace) {
			if ended := endGPUProcesses(dir, f.GPU); len(ended) > 0 {
				what += fmt.Sprintf("; the GPU's job processes died with it (pids %v)", ended)
			}
		}
		return what, err
	case f.LogLine != "":
		return kernelLine(nodeRoot, setup.Hostname, f.LogLine)
	case f.KillAgent:
		pid, err := pidFile(filepath.Join(dir, "agent.pid"))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("killed the agent of %s (pid %d)", id, pid), syscall.Kill(pid, syscall.SIGKILL)
	case f.KillSlurmd:
		pid, err := pidFile(filepath.Join(nodeRoot, "var/spool/slurmd/slurmd.pid"))
		if err != nil {
			return "", fmt.Errorf("no slurmd on %s: %w", id, err)
		}
		// The pid file holds the node's own number for slurmd (its PID namespace's).
		if pid, err = NodeHostPID(dir, pid); err != nil {
			return "", fmt.Errorf("slurmd of %s: %w", id, err)
		}
		return fmt.Sprintf("killed slurmd on %s (pid %d)", id, pid), syscall.Kill(pid, syscall.SIGKILL)
	case f.LoseGPU >= 0:
		return loseGPU(dir, filepath.Join(nodeRoot, "var/lib/hale-agent"), f.LoseGPU)
	case f.StopJob:
		var stopped []int
		for _, pid := range stepProcesses(dir) {
			if syscall.Kill(pid, syscall.SIGSTOP) == nil {
				stopped = append(stopped, pid)
			}
		}
		if len(stopped) == 0 {
			return "", fmt.Errorf("no job step runs on %s", id)
		}
		return fmt.Sprintf("stopped the job step processes of %s (pids %v): its job hangs, and every node check still passes", id, stopped), nil
	case f.Throttle != "":
		if f.Throttle != "thermal" && f.Throttle != "power" {
			return "", fmt.Errorf("throttle %q: give thermal or power", f.Throttle)
		}
		pid, err := pidFile(filepath.Join(dir, "agent.pid"))
		if err != nil {
			return "", err
		}
		file := fmt.Sprintf("%s/throttle-%d", agent.SimulatedDriverDir, f.GPU)
		if out, err := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--mount", "--", "sh", "-c",
			"echo "+f.Throttle+" > "+file).CombinedOutput(); err != nil {
			return "", fmt.Errorf("throttling GPU %d of %s: %v: %s", f.GPU, id, err, out)
		}
		return fmt.Sprintf("GPU %d of %s throttles its clocks (%s) until it is reset or the node reboots", f.GPU, id, f.Throttle), nil
	case f.FillDisk:
		pid, err := pidFile(filepath.Join(dir, "agent.pid"))
		if err != nil {
			return "", err
		}
		// The disk is a file system of the node's mount namespace: fill it from inside.
		out, _ := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--mount", "--", "sh", "-c",
			"cat /dev/zero > "+NodeDisk+"/.hale-fill 2>/dev/null; df -h "+NodeDisk+" | tail -1").CombinedOutput()
		return fmt.Sprintf("filled %s on %s: %s", NodeDisk, id, strings.TrimSpace(string(out))), nil
	}
	return "", errors.New("no fault given")
}

// kernelLine appends lines to the node's kernel log as syslog writes them, in one write (as a
// driver prints the lines of one exception in the same instant).
func kernelLine(nodeRoot, hostname, lines string) (string, error) {
	path := filepath.Join(nodeRoot, strings.TrimPrefix(NodeKernelLog, "/"))
	fl, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", err
	}
	defer fl.Close()
	head := fmt.Sprintf("%s %s kernel: ", time.Now().Format(time.Stamp), hostname)
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(lines, "\n"), "\n") {
		b.WriteString(head + l + "\n")
	}
	if _, err := fl.WriteString(b.String()); err != nil {
		return "", err
	}
	return "wrote to " + NodeKernelLog + ": " + strings.TrimSuffix(b.String(), "\n"), nil
}

func pidFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s: no pid", path)
	}
	return pid, nil
}

// loseGPU takes a simulated GPU away: its device file goes, and it is marked unhealthy in the
// node's device list so that it stays gone after a reboot (a replacement is a new machine).
// loseGPUStep, set by a test, runs between loseGPU's two steps (the state a monitor may read).
var loseGPUStep func()

func loseGPU(dir, stateDir string, i int) (string, error) {
	path := filepath.Join(stateDir, agent.SimulatedDevicesFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("the node has no simulated accelerators: %w", err)
	}
	var devs []*agentproto.Accelerator
	if err := json.Unmarshal(b, &devs); err != nil {
		return "", err
	}
	for _, d := range devs {
		if int(d.Index) != i {
			continue
		}
		// The device file goes first, then the device's health: a GPU off the bus is gone
		// (gpu.count_mismatch). The other order let the agent's device monitor, polling between
		// the two steps, see it present and unhealthy (gpu.device_unhealthy) instead (full87).
		if rel, ok := strings.CutPrefix(d.DevicePath, "/var/lib/hale-agent/"); ok {
			os.Remove(filepath.Join(stateDir, rel))
		} else if d.DevicePath != "" {
			// In the node's own /dev, which only its mount namespace has: reach it through the
			// agent's root. A node that is down has no /dev to take the file from.
			if pid, err := pidFile(filepath.Join(dir, "agent.pid")); err == nil {
				os.Remove(filepath.Join("/proc", strconv.Itoa(pid), "root", d.DevicePath))
			}
		}
		if loseGPUStep != nil {
			loseGPUStep()
		}
		d.Healthy = false
		out, _ := json.MarshalIndent(devs, "", "  ")
		if err := os.WriteFile(path+".tmp", out, 0o644); err != nil {
			return "", err
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			return "", err
		}
		return fmt.Sprintf("GPU %d (%s) is gone from the node", i, d.Uuid), nil
	}
	return "", fmt.Errorf("the node has no GPU %d", i)
}

// endGPUProcesses does to a node's job processes what a GPU that fails hard does to the CUDA
// processes on it: they die (the driver tears their contexts down, and the next CUDA call
// fails). A job process is one started by the slurmstepd of a job step; it uses the GPU when its
// CUDA_VISIBLE_DEVICES names it or is unset (every GPU is visible). The node's daemons live on.
func endGPUProcesses(dir string, gpu int) []int {
	var ended []int
	for _, pid := range stepProcesses(dir) {
		if seesGPU(pid, gpu) && syscall.Kill(pid, syscall.SIGKILL) == nil {
			ended = append(ended, pid)
		}
	}
	return ended
}

// stepProcesses are the processes of the node's job steps: those under a slurmstepd of a step
// (not a batch script's or an extern step's), the application's ranks and their children.
func stepProcesses(dir string) []int {
	var rec record
	b, err := os.ReadFile(filepath.Join(dir, "instance.json"))
	if err != nil || json.Unmarshal(b, &rec) != nil {
		return nil
	}
	steps := map[int]bool{}
	parent := map[int]int{}
	pids := netnsPIDs(rec.Netns)
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
		if strings.HasPrefix(s[strings.IndexByte(s, '(')+1:], "slurmstepd") {
			// Only job steps ("slurmstepd: [J.S]") run the application; the batch script and the
			// extern step are not CUDA processes.
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			c := string(cmd)
			steps[pid] = !strings.Contains(c, ".batch]") && !strings.Contains(c, ".extern]")
		}
	}
	var out []int
	for _, pid := range pids {
		if _, step := steps[pid]; !step && underStep(pid, parent, steps) {
			out = append(out, pid)
		}
	}
	return out
}

func underStep(pid int, parent map[int]int, steps map[int]bool) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		pid = parent[pid]
		if steps[pid] {
			return true
		}
	}
	return false
}

func seesGPU(pid, gpu int) bool {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, "CUDA_VISIBLE_DEVICES="); ok {
			for _, d := range strings.Split(v, ",") {
				if strings.TrimSpace(d) == strconv.Itoa(gpu) {
					return true
				}
			}
			return false
		}
	}
	return true
}
