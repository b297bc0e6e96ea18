package local

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/haleproject/hale/internal/agent"
	"github.com/haleproject/hale/internal/deviceplugin"
)

// NodeSetup is what the agent does to its own namespaces before it starts, written by the
// provider to ROOT/instances/<id>/setup.json: the hostname for its UTS namespace and the bind
// mounts for its mount namespace.
type NodeSetup struct {
	Hostname string `json:"Hostname"`
	Binds    []Bind `json:"Binds"`
	// Tmpfs are file systems of the node's own, in memory: Target -> size in MiB.
	Tmpfs map[string]int `json:"Tmpfs,omitempty"`
	// PrivateDev gives the node a /dev of its own (the host's devices, and the node's simulated
	// GPUs at NVIDIA's paths, /dev/nvidia0 ..., which the host never sees).
	PrivateDev bool `json:"PrivateDev,omitempty"`
	// Layers give the node a writable copy of host directories (/etc, /var/lib) that is its
	// own: what the node writes there stays in the instance's directory.
	Layers []Layer `json:"Layers,omitempty"`
	// Root, when set, is the node's own root file system: an overlay of its image
	// (imageroot.go). The node then sees none of the host's files but the Binds' sources, and
	// has no Layers (its root is all its own).
	Root *ImageRoot `json:"Root,omitempty"`
	// Containers, when set (only with Root), readies the node for a container runtime and a
	// kubelet (containers.go): node-init runs in its cgroups' namespace, which it mounts.
	Containers *Containers `json:"Containers,omitempty"`
}

// Layer is an overlay file system over Target: the host's directory is its lower layer,
// Upper (in the instance's directory, so a reboot keeps it and a new instance starts clean)
// takes the node's writes, Work is overlayfs's own scratch directory on Upper's file system,
// and Merged is where it is staged before it is moved over Target.
type Layer struct {
	Target string `json:"Target"`
	Upper  string `json:"Upper"`
	Work   string `json:"Work"`
	Merged string `json:"Merged"`
}

// Bind mounts Source over Target; ReadOnly binds it read-only (hale's own binary in an
// image-booted node).
type Bind struct {
	Source   string `json:"Source"`
	Target   string `json:"Target"`
	ReadOnly bool   `json:"ReadOnly,omitempty"`
}

// nodeDirs are the node's own directories, bound over the same paths inside it.
// /var/log is the node's own, as on a machine: its messages file (the kernel log the agent
// watches, where injected faults land), provision/, slurm/, munge/.
// /usr/local/bin holds hale's srun (which understands --auto-resume=1 and hands everything else
// to Slurm's) ahead of /usr/bin on the usual PATH; /opt/sagemaker_cluster is how job scripts
// written for HyperPod tell they run on a cluster node. /var/lib/mysql is the controller's
// MariaDB (Slurm accounting: data, socket, pid file), never the host's.
var nodeDirs = []string{"/opt/ml", "/var/log", "/var/spool/slurmd", "/var/spool/slurmctld", "/var/lib/hale-agent",
	"/etc/munge", "/run/munge", "/var/lib/munge", "/etc/slurm", "/usr/local/bin", ClusterMarker, "/var/lib/mysql"}

// layeredDirs are the host directories a node has a writable copy of (Layer). Lifecycle
// scripts write there as on any machine: HyperPod's EKS scripts move /var/lib/kubelet onto
// /opt/sagemaker (rmdir, ln -s) and write containerd and systemd files under /etc; Slurm
// scripts add users. On a shared /etc or /var/lib that would change the host and every other
// node.
var layeredDirs = []string{"/etc", "/var/lib"}

// ClusterMarker is the directory every HyperPod cluster node has; samples test for it before
// adding --auto-resume=1 to srun.
const ClusterMarker = "/opt/sagemaker_cluster"

// SrunWrapper is the node's /usr/local/bin/srun: hale's srun, found before Slurm's /usr/bin/srun.
// hale srun recognizes it by its second line and never runs it as "the real srun".
const SrunWrapper = "#!/bin/sh\n# hale srun wrapper: --auto-resume=1 as on HyperPod; everything else goes to Slurm's srun\nexec %q srun \"$@\"\n"

// NodeDisk is a local node's own disk: a small tmpfs where a HyperPod node mounts its NVMe
// instance store. The agent's disk monitor watches it; it is small enough to fill (hale debug
// inject-fault --fill-disk) without touching the host's disks. NodeDiskSize is in MiB.
const (
	NodeDisk     = "/opt/dlami/nvme"
	NodeDiskSize = 64
)

// NodeKernelLog is the kernel log of a local node: a file of its own that the agent watches
// (a real machine's agent reads /dev/kmsg), so faults written there follow the monitor's path.
const NodeKernelLog = "/var/log/messages"

// sameAs are more mount points of a node directory: HyperPod's scripts read Slurm's
// configuration from /opt/slurm/etc, Debian's Slurm from /etc/slurm; they are one directory.
var sameAs = map[string][]string{"/etc/slurm": {"/opt/slurm/etc"}}

// prepareDirs makes the instance's directories and writes its setup.json.
func (p *Provider) prepareDirs(r *record) error {
	setup := NodeSetup{Hostname: r.Hostname, Tmpfs: map[string]int{NodeDisk: NodeDiskSize, agent.SimulatedDriverDir: 1}, PrivateDev: true}
	root := filepath.Join(p.dir(r.ID), "root")
	// A machine's /var/log has these before anything runs (scripts append to them).
	for _, d := range []string{"/var/log/provision", "/var/log/slurm", "/var/log/munge"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	for _, d := range nodeDirs {
		src := filepath.Join(root, d)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return err
		}
		setup.Binds = append(setup.Binds, Bind{Source: src, Target: d})
		for _, also := range sameAs[d] {
			setup.Binds = append(setup.Binds, Bind{Source: src, Target: also})
		}
	}
	for _, m := range r.Mounts {
		var src string
		if m.Shared {
			src = p.sharedDir(r.ClusterID, m.Name)
		} else {
			src = filepath.Join(root, m.Path)
		}
		if err := os.MkdirAll(src, 0o777); err != nil {
			return err
		}
		if m.Shared {
			os.Chmod(src, 0o1777) // a shared file system every user of the cluster writes to
		}
		setup.Binds = append(setup.Binds, Bind{Source: src, Target: m.Path})
	}
	if err := p.writeNodeTools(root, r); err != nil {
		return err
	}
	setup.Binds = append(setup.Binds, Bind{Source: p.hostsFile(r.ClusterID), Target: "/etc/hosts"})
	if r.ImageRoot != "" {
		// The node's root is its image's: the agent's binary and the provider's files for
		// the agent are bound in (the host paths it is started with are gone after the pivot).
		setup.Root = imageRootOf(p.dir(r.ID), r.ImageRoot)
		if err := setup.Root.make(); err != nil {
			return err
		}
		setup.Binds = append(setup.Binds, Bind{Source: p.cfg.AgentBinary, Target: NodeAgentBinary, ReadOnly: true})
		for _, f := range p.agentFiles(r) {
			setup.Binds = append(setup.Binds, Bind{Source: filepath.Join(p.dir(r.ID), f), Target: filepath.Join(nodeRunDir, f), ReadOnly: true})
		}
		if r.Containers {
			binds, err := p.containerBinds(r)
			if err != nil {
				return err
			}
			setup.Binds = append(setup.Binds, binds...)
			setup.Containers = &Containers{Cgroups: r.Cgroups}
		}
		b, _ := json.MarshalIndent(setup, "", "  ")
		return os.WriteFile(filepath.Join(p.dir(r.ID), "setup.json"), b, 0o600)
	}
	for _, d := range layeredDirs {
		base := filepath.Join(p.dir(r.ID), "layers", strings.ReplaceAll(strings.Trim(d, "/"), "/", "-"))
		l := Layer{Target: d, Upper: filepath.Join(base, "upper"), Work: filepath.Join(base, "work"), Merged: filepath.Join(base, "merged")}
		for _, dir := range []string{l.Upper, l.Work, l.Merged} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		setup.Layers = append(setup.Layers, l)
	}
	b, _ := json.MarshalIndent(setup, "", "  ")
	return os.WriteFile(filepath.Join(p.dir(r.ID), "setup.json"), b, 0o600)
}

// writeNodeTools puts hale's srun and hale itself in the node's /usr/local/bin, and says what
// cluster the node belongs to in /opt/sagemaker_cluster.
func (p *Provider) writeNodeTools(root string, r *record) error {
	bin := filepath.Join(root, "usr/local/bin")
	if err := os.WriteFile(filepath.Join(bin, "srun"), fmt.Appendf(nil, SrunWrapper, p.nodeAgentBinary(r)), 0o755); err != nil {
		return err
	}
	os.Remove(filepath.Join(bin, "hale"))
	if r.ImageRoot != "" {
		// The mount point of the binary bound in (a symbolic link would lead to a host path).
		if err := os.WriteFile(filepath.Join(bin, "hale"), nil, 0o755); err != nil {
			return err
		}
	} else if err := os.Symlink(p.cfg.AgentBinary, filepath.Join(bin, "hale")); err != nil {
		return err
	}
	info, _ := json.MarshalIndent(map[string]string{"ClusterName": r.ClusterName, "ClusterId": r.ClusterID,
		"InstanceGroupName": r.GroupName, "InstanceId": r.ID}, "", "  ")
	return os.WriteFile(filepath.Join(root, ClusterMarker, "cluster.json"), info, 0o644)
}

// nodeAgentBinary is the path of hale's executable as the node sees it.
func (p *Provider) nodeAgentBinary(r *record) string {
	if r.ImageRoot != "" {
		return NodeAgentBinary
	}
	return p.cfg.AgentBinary
}

// agentFiles are the files of the instance's directory its agent reads (startAgentIn's flags):
// an image-booted node has them at nodeRunDir.
func (p *Provider) agentFiles(r *record) []string {
	files := []string{"ca.crt", "boot_id"}
	if r.AgentToken != "" {
		files = append(files, "token")
	}
	return files
}

// agentFile is the path the agent is given for the instance directory's file name.
func (p *Provider) agentFile(r *record, name string) string {
	if r.ImageRoot != "" {
		return filepath.Join(nodeRunDir, name)
	}
	return filepath.Join(p.dir(r.ID), name)
}

// SetupNode applies a setup.json from inside the node's new UTS and mount namespaces: it sets
// the hostname, makes the mount points without touching the host (makeMountPoints) and mounts
// the node's directories and file systems. hale agent calls it before anything else, and learns
// from the setup it returns whether the node has a /dev of its own.
func SetupNode(path string) (*NodeSetup, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s NodeSetup
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, s.apply(filepath.Join(filepath.Dir(path), stageName))
}

// apply makes the node's namespaces what s says; stage is an empty directory of hale's.
//
// The order matters. Layers are mounted first at their staging points, and the binds under a
// layer's target go onto the staged layer, while every source path still resolves on the
// host's tree (hale's data directory is often under /var/lib, which a layer is about to
// cover). Then the other mount points and binds, as before layers existed. Last, each staged
// layer, with the binds on it, is moved over its target.
func (s *NodeSetup) apply(stage string) error {
	if err := syscall.Sethostname([]byte(s.Hostname)); err != nil {
		return fmt.Errorf("set hostname %s: %w", s.Hostname, err)
	}
	if s.Root != nil {
		return s.applyImage()
	}
	for _, l := range s.Layers {
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", l.Target, l.Upper, l.Work)
		if err := syscall.Mount("overlay", l.Merged, "overlay", 0, opts); err != nil {
			return fmt.Errorf("node's own %s (overlay %s): %w", l.Target, opts, err)
		}
	}
	var rest []Bind
	for _, bind := range s.Binds {
		l, rel := s.layerOf(bind.Target)
		if l == nil {
			rest = append(rest, bind)
			continue
		}
		dst := filepath.Join(l.Merged, rel)
		if err := mountPoint(bind.Source, dst); err != nil {
			return err
		}
		if err := syscall.Mount(bind.Source, dst, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s over %s: %w", bind.Source, bind.Target, err)
		}
	}
	var targets []string
	files := map[string]bool{}
	for _, bind := range rest {
		targets = append(targets, bind.Target)
		if st, err := os.Stat(bind.Source); err == nil && !st.IsDir() {
			files[bind.Target] = true // a file (such as /etc/hosts) is bound over a file
		}
	}
	for target := range s.Tmpfs {
		targets = append(targets, target)
	}
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return err
	}
	if err := makeMountPoints(targets, files, s.PrivateDev, stage); err != nil {
		return err
	}
	for _, bind := range rest {
		if err := syscall.Mount(bind.Source, bind.Target, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s over %s: %w", bind.Source, bind.Target, err)
		}
	}
	for target, mib := range s.Tmpfs {
		if err := syscall.Mount("tmpfs", target, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%dm,mode=1777", mib)); err != nil {
			return fmt.Errorf("tmpfs on %s: %w", target, err)
		}
	}
	for _, l := range s.Layers {
		if err := syscall.Mount(l.Merged, l.Target, "", syscall.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move the node's own %s into place: %w", l.Target, err)
		}
	}
	return nil
}

// layerOf is the layer whose target holds path, and path relative to it.
func (s *NodeSetup) layerOf(path string) (*Layer, string) {
	for i := range s.Layers {
		if rel, ok := strings.CutPrefix(path, s.Layers[i].Target+"/"); ok {
			return &s.Layers[i], rel
		}
	}
	return nil, ""
}

// mountPoint makes dst, on a node's own layer, the kind of file src is.
func mountPoint(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return os.MkdirAll(dst, 0o755)
	}
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, nil, 0o644)
}

// AgentCommand is the command line that runs argv inside the instance's network namespace and
// fresh UTS and mount namespaces. nsenter and unshare both exec without forking, so the
// started process is argv itself. Propagation "slave" keeps the node seeing the host's later
// unmounts (e.g. of another node's /run/netns entry, which would otherwise pin that namespace).
func AgentCommand(netns string, argv ...string) []string {
	return append([]string{"nsenter", "--net=/run/netns/" + netns, "--", "unshare", "--uts", "--mount", "--propagation", "slave", "--"}, argv...)
}

// startAgent starts hale agent in the instance's namespaces, logging to agent.log. The agent is
// not tied to the server's life: a crashed server's agents keep running and reconnect.
func (p *Provider) startAgent(r *record) (wait func() error, err error) {
	return p.startAgentIn(r, false)
}

// startAgentIn starts the agent; sameBoot keeps the node's boot id (an agent restart, not a
// boot). The returned wait waits until the agent runs (the node is set up) and records its pid
// and its node-init's: the callers run it without p.mu, so that nodes launched together set up
// side by side.
func (p *Provider) startAgentIn(r *record, sameBoot bool) (wait func() error, err error) {
	dir := p.dir(r.ID)
	logf, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// Nodes share the host's kernel, so the kernel's boot id says nothing of a node's boot:
	// each start of a node's agent here is its boot, with an id of its own.
	bootID := filepath.Join(dir, "boot_id")
	if _, err := os.Stat(bootID); !sameBoot || err != nil {
		if err := os.WriteFile(bootID, []byte(uuid.NewString()+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	args := []string{p.cfg.AgentBinary, "agent",
		"--boot-id-file", p.agentFile(r, "boot_id"),
		"--server", cmp.Or(r.AgentServer, p.agentServer()),
		"--ca-file", p.agentFile(r, "ca.crt"),
		"--instance-id", r.ID,
		"--instance-type", r.InstanceType,
		"--state-dir", "/var/lib/hale-agent",
		"--kernel-log", NodeKernelLog,
		"--disk-path", NodeDisk,
	}
	if r.AgentToken != "" {
		args = append(args, "--bootstrap-token-file", p.agentFile(r, "token"))
	}
	args = append(args, p.cfg.AgentArgs...)
	if r.Containers {
		// The node's kubelet is hale's: the agent is its GPU device plugin.
		args = append(args, "--device-plugin-dir", deviceplugin.KubeletDir)
	}
	if r.ImageRoot != "" {
		// node-init starts the agent after the node's pivot_root, where hale is bound here.
		args[0] = NodeAgentBinary
	}
	// The node is its own PID namespace, whose PID 1 is hale node-init (NodeInit): it applies
	// setup.json and starts the agent. An agent restart in the same boot (UpgradeAgents) enters
	// the running node's namespaces instead, and finds the node set up.
	var argv []string
	initPID, initErr := pidFile(filepath.Join(dir, "init.pid"))
	if r.Containers && !(sameBoot && initErr == nil && isNodeInit(initPID)) {
		// A boot: the node's cgroups anew (its last stop removed them), where node-init starts.
		if err := p.bootCgroups(r); err != nil {
			return nil, err
		}
	}
	switch {
	case sameBoot && initErr == nil && isNodeInit(initPID):
		argv = AgentCommandIn(initPID, append(args, "--device-dir", "/dev")...)
		if r.Containers {
			argv = joinCgroups(r.Cgroups, withFlag(argv, "nsenter", "--cgroup"))
		}
	case sameBoot:
		// A node an older hale booted (no node-init): its daemons are in the host's PID
		// namespace, where the restarted agent must find them (slurmd's adopt script reads
		// /proc/<pid in slurmd.pid>), so it starts as before, in fresh UTS and mount namespaces.
		args[0] = p.cfg.AgentBinary
		argv = AgentCommand(r.Netns, append(args, "--local-setup", filepath.Join(dir, "setup.json"))...)
	default:
		os.Remove(filepath.Join(dir, "init.pid"))
		argv = NodeCommand(r.Netns, p.cfg.AgentBinary, filepath.Join(dir, "setup.json"), args)
		if r.Containers {
			argv = joinCgroups(r.Cgroups, withFlag(argv, "unshare", "--cgroup"))
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = "/"
	// Its own process group and session: a Ctrl-C at the server's terminal is not the node's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent of %s: %w", r.ID, err)
	}
	go cmd.Wait() // reap it if it exits while the server runs
	// The agent is a child or grandchild of the started process (unshare forks node-init, which
	// starts the agent after the node's setup; nsenter forks for --pid): its host pid is what the
	// provider's bookkeeping (agentRunning, UpgradeAgents, inject) keys on.
	return func() error {
		agentPID, initPID, err := findAgent(cmd.Process.Pid, 30*time.Second)
		if initPID != 0 {
			os.WriteFile(filepath.Join(dir, "init.pid"), []byte(strconv.Itoa(initPID)+"\n"), 0o600)
		}
		if err != nil {
			os.Remove(filepath.Join(dir, "agent.pid"))
			return fmt.Errorf("start agent of %s: %w (agent.log says why)", r.ID, err)
		}
		return os.WriteFile(filepath.Join(dir, "agent.pid"), []byte(strconv.Itoa(agentPID)+"\n"), 0o600)
	}, nil
}

// NodeCommand is the command line that boots a node: hale node-init (NodeInit) as PID 1 of new
// PID, UTS and mount namespaces, in the instance's network namespace, applying setupPath and
// starting agentArgs (hale agent's command line, the binary first) as its child. unshare --fork makes node-init its child
// (a process cannot move itself into a new PID namespace, only its children start there).
// Propagation "slave" keeps the node seeing the host's later unmounts (AgentCommand).
func NodeCommand(netns, hale, setupPath string, agentArgs []string) []string {
	argv := []string{"nsenter", "--net=/run/netns/" + netns, "--", "unshare", "--uts", "--mount", "--pid", "--fork", "--propagation", "slave", "--",
		hale, "node-init", "--local-setup", setupPath, "--"}
	return append(argv, agentArgs...)
}

// killNetns ends every process in the namespace: SIGKILL, as a machine that loses power, then
// waits until they are gone (at most 5 s).
func killNetns(ctx context.Context, ns string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := netnsPIDs(ns)
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("local provider: processes %v of %s survive SIGKILL", pids, ns)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// UpgradeAgents restarts, with this build, the agents an older hale started without the agent
// CA (no --ca-file on their command line): they speak the agent protocol in clear, which this
// server no longer serves. Each is stopped with SIGTERM (it stops its daemons and says Goodbye)
// and started again in the same boot (its boot id kept: the server sees an agent restart, not a
// reboot, and repairs nothing), trusting ca. It returns how many it restarted.
func (p *Provider) UpgradeAgents(ca []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	recs, err := p.records()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range recs {
		dir := p.dir(r.ID)
		pid, err := pidFile(filepath.Join(dir, "agent.pid"))
		if err != nil || syscall.Kill(pid, 0) != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		// Only this instance's agent: a dead agent's pid may since name another process (pid
		// reuse), which must be neither killed nor taken for an old agent (a killed agent is
		// the heartbeat's to find, not restarted here).
		if err != nil || !bytes.Contains(cmdline, []byte(r.ID)) || bytes.Contains(cmdline, []byte("--ca-file")) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o644); err != nil {
			return n, err
		}
		syscall.Kill(pid, syscall.SIGTERM)
		for i := 0; i < 200 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(50 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		wait, err := p.startAgentIn(r, true)
		if err == nil {
			err = wait()
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
