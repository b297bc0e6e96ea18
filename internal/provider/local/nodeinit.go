package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// NodeInit is PID 1 of a local node's own PID namespace (hale node-init). It applies the
// node's setup.json (SetupNode: hostname, overlay root, a /proc mounted from inside the new
// PID namespace, so the node lists only its own processes), starts the agent (agentArgv, with
// --device-dir /dev: the node's /dev is its own) as its child, and then only reaps: orphans
// of the node (daemons whose parent exited) are re-parented to PID 1, which must wait for
// them. It stays when the agent exits: the agent is one process of the node, its crash or
// upgrade must not end the daemons and jobs (when PID 1 of a PID namespace ends, the kernel
// SIGKILLs every other process in it). A restarted agent enters the namespace with nsenter
// (AgentCommandIn). NodeInit returns only on a setup or start error.
func NodeInit(setupPath string, agentArgv []string) error {
	if os.Getpid() != 1 {
		return errors.New("node-init: not PID 1 of a new PID namespace (start it with unshare --pid --fork)")
	}
	s, err := SetupNode(setupPath)
	if err != nil {
		return err
	}
	if s.Root == nil {
		// A node on the host's root (no default image built) keeps the host's /sys, /dev and
		// /tmp, but gets the /proc of its PID namespace, as an image-booted node does in
		// kernelFileSystems: over the host's, in the node's mount namespace only.
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("node-init: proc on /proc: %w", err)
		}
	}
	// PID 1 gets no default signal actions: SIGTERM from inside the node would do nothing, from
	// the host it is ignored too. Ignore it explicitly so the intent is plain; the host ends a
	// node with SIGKILL (killNetns), which PID 1 cannot ignore from its parent namespace.
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	argv := append(append([]string{}, agentArgv...), "--device-dir", "/dev")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("node-init: start agent: %w", err)
	}
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.ECHILD {
			// Nothing left to reap for now; a later orphan is re-parented here again.
			time.Sleep(time.Second)
			continue
		}
		if pid == cmd.Process.Pid {
			fmt.Fprintf(os.Stderr, "node-init: agent (pid %d in the node) exited: %v\n", pid, ws)
		}
	}
}

// AgentCommandIn is the command line that runs argv inside a running node: in the PID, mount,
// network and UTS namespaces of its init (host pid initPID), with the node's root and working
// directory. nsenter forks for --pid (only children enter a PID namespace), so argv is
// nsenter's child, not the started process.
func AgentCommandIn(initPID int, argv ...string) []string {
	return append([]string{"nsenter", "--target", strconv.Itoa(initPID), "--pid", "--mount", "--net", "--uts", "--root", "--wd", "--"}, argv...)
}

// childPIDs lists the host pids of pid's children: /proc/PID/task/*/children, of every thread
// (a Go program such as node-init forks from whichever thread runs).
func childPIDs(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// isAgent says whether host pid runs hale agent: its second argument is the subcommand agent
// (the command lines of unshare, nsenter and node-init that start it hold the word agent too).
func isAgent(pid int) bool { return subcommand(pid) == "agent" }

// subcommand is the second argument of host pid's command line ("" if none or gone).
func subcommand(pid int) string {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	args := strings.Split(string(cmdline), "\x00")
	if len(args) < 2 {
		return ""
	}
	return args[1]
}

// findAgent waits (at most wait) for a hale agent among the descendants of host pid root, at
// most three generations down (unshare → node-init → agent; nsenter → agent; the started
// process itself when it execs into the agent, AgentCommand), and returns its
// host pid, with the node-init's when one is on the way.
func findAgent(root int, wait time.Duration) (agent, init int, err error) {
	deadline := time.Now().Add(wait)
	for {
		level := []int{root}
		for gen := 0; gen < 3; gen++ {
			var next []int
			for _, p := range level {
				if isNodeInit(p) {
					init = p
				}
				if isAgent(p) {
					return p, init, nil
				}
				next = append(next, childPIDs(p)...)
			}
			level = next
		}
		for _, p := range level {
			if isAgent(p) {
				return p, init, nil
			}
		}
		if time.Now().After(deadline) {
			return 0, init, fmt.Errorf("no agent under pid %d after %s", root, wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// isNodeInit says whether host pid runs hale node-init.
func isNodeInit(pid int) bool { return subcommand(pid) == "node-init" }

// healPIDFiles rewrites the instance's agent.pid and init.pid when the node runs but they do not
// name its processes: a server that died between starting a node and recording its agent (the
// agent appears below node-init only once the node is set up) left none, and the node's
// agent, which lives on and registers again, would otherwise count as not running. The agent
// is the process of the node's network namespace that runs hale agent for this instance.
func (p *Provider) healPIDFiles(r *record) {
	dir := p.dir(r.ID)
	if agentRunning(dir) {
		return
	}
	for _, pid := range netnsPIDs(r.Netns) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(cmdline), "\x00--instance-id\x00"+r.ID+"\x00") {
			continue
		}
		switch {
		case isNodeInit(pid):
			os.WriteFile(filepath.Join(dir, "init.pid"), []byte(strconv.Itoa(pid)+"\n"), 0o600)
		case isAgent(pid):
			os.WriteFile(filepath.Join(dir, "agent.pid"), []byte(strconv.Itoa(pid)+"\n"), 0o600)
		}
	}
}

// NodeHostPID maps nsPID, a pid as the local node whose instance directory is instanceDir
// numbers it (a pid file written in the node, $$ of a script there), to the host's pid of that
// process. A node that an older hale booted without node-init shares the host's PID namespace,
// so there the number is the host's. An error when the node has no such process.
func NodeHostPID(instanceDir string, nsPID int) (int, error) {
	initPID, err := pidFile(filepath.Join(instanceDir, "init.pid"))
	if err != nil || !isNodeInit(initPID) {
		return nsPID, nil
	}
	return hostPID(initPID, nsPID)
}

// hostPID maps pid as the node numbers it (its own PID namespace, e.g. a pid file written in
// the node) to the host's: the process in the PID namespace of init whose NSpid ends in nsPID.
func hostPID(initPID, nsPID int) (int, error) {
	want, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", initPID))
	if err != nil {
		return 0, err
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p)); err != nil || ns != want {
			continue
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f, ok := strings.CutPrefix(line, "NSpid:"); ok {
				ids := strings.Fields(f)
				if len(ids) > 0 && ids[len(ids)-1] == strconv.Itoa(nsPID) {
					return p, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("no process %d in the node's PID namespace", nsPID)
}
