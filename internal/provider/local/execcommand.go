package local

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/haleproject/hale/internal/provider"
)

// ExecCommand is the command line that runs args (a login shell when none) as one of the
// processes of instance id of the local provider whose Root is root, in dir inside the node:
// nsenter into the namespaces of its agent, whose pid the provider records. It is
// provider.ErrNotFound when root has no such instance (it may be another provider's), an error
// naming the pid when the instance's agent is not running (the node is down or rebooting).
func ExecCommand(root, id, dir string, args []string) ([]string, error) {
	inst := filepath.Join(root, "instances", id)
	b, err := os.ReadFile(filepath.Join(inst, "agent.pid"))
	if err != nil {
		return nil, fmt.Errorf("%w: no local instance %s under %s (%v)", provider.ErrNotFound, id, root, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		return nil, fmt.Errorf("the agent of node %s is not running (pid %s); the node is down or rebooting", id, strings.TrimSpace(string(b)))
	}
	var setup struct{ Hostname string }
	if b, err := os.ReadFile(filepath.Join(inst, "setup.json")); err == nil {
		json.Unmarshal(b, &setup)
	}
	if len(args) == 0 {
		args = []string{"/bin/bash", "-l"}
	}
	// The working directory is set inside the node (env --chdir), not by nsenter's --wd=DIR:
	// nsenter opens DIR before it enters the mount namespace, and the node has a root of its
	// own, so a directory opened on the host's root is unreachable from the node (getcwd fails,
	// and srun refuses to run).
	// --pid: the command is one of the node's processes, so pids it reads in the node (pid
	// files, ps, $$) are the node's; nsenter forks for it and waits for the command.
	argv := []string{"nsenter", "--target", strconv.Itoa(pid), "--pid", "--net", "--uts", "--mount", "--", "env", "--chdir=" + dir, "HOSTNAME=" + setup.Hostname}
	return append(argv, args...), nil
}

// Instances counts the instances recorded under root (a provider's Root), which a server that
// stopped without deleting its clusters leaves.
func Instances(root string) int {
	entries, _ := os.ReadDir(filepath.Join(root, "instances"))
	return len(entries)
}
