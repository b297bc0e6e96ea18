package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// helperSetupEnv names the setup.json TestImageNodeHelper applies when the test binary runs as
// a node (in fresh UTS and mount namespaces, as AgentCommand starts the agent).
const helperSetupEnv = "HALE_TEST_IMAGE_NODE_SETUP"

// nodeView is what the helper saw inside the node, written as JSON on its standard output.
type nodeView struct {
	Hostname     string
	RootEntries  []string
	HostFile     bool   // the host's marker file, at its host path, is visible
	ImageFile    string // /etc/image-marker, from the image
	Kept         string // /kept, written by an earlier boot of this node ("" if none)
	AgentRO      bool   // writing /usr/local/bin/hale fails with EROFS
	AgentContent string
	Dev          []string
	ProcSelf     bool
	TmpWritable  bool
	SysNet       []string // /sys/class/net
	SysReadOnly  bool     // /sys is mounted read-only
	Cgroups      []string // /sys/fs/cgroup
	Command      string   // the output of HALE_TEST_NODE_COMMAND, run with sh -c inside the node
	Error        string
}

// TestImageNodeHelper is the node side of TestImageRoot: it only runs when the test binary is
// started by that test inside fresh namespaces.
func TestImageNodeHelper(t *testing.T) {
	path := os.Getenv(helperSetupEnv)
	if path == "" {
		t.Skip("runs only as TestImageRoot's node")
	}
	var v nodeView
	defer func() { json.NewEncoder(os.Stdout).Encode(v) }()
	setup, err := SetupNode(path)
	if err != nil {
		v.Error = err.Error()
		return
	}
	v.Hostname, _ = os.Hostname()
	entries, _ := os.ReadDir("/")
	for _, e := range entries {
		v.RootEntries = append(v.RootEntries, e.Name())
	}
	_, err = os.Stat(os.Getenv("HALE_TEST_HOST_FILE"))
	v.HostFile = err == nil
	if setup.Root != nil {
		// Writes that only an image-booted node may make: on the host's root, / and /tmp are
		// the host's.
		b, _ := os.ReadFile("/etc/image-marker")
		v.ImageFile = string(b)
		b, _ = os.ReadFile("/kept")
		v.Kept = string(b)
		os.WriteFile("/kept", []byte("written by "+os.Getenv("HALE_TEST_BOOT")), 0o644)
		os.Remove("/etc/image-marker") // a script deleting an image file: the node's own deletion
		os.WriteFile("/fsx/from-node", []byte(v.Hostname), 0o644)
		err = os.WriteFile(NodeAgentBinary, []byte("overwritten"), 0o755)
		v.AgentRO = errors.Is(err, syscall.EROFS)
		b, _ = os.ReadFile(NodeAgentBinary)
		v.AgentContent = string(b)
		v.TmpWritable = os.WriteFile("/tmp/x", nil, 0o644) == nil // the node's own /tmp
	}
	devs, _ := os.ReadDir("/dev")
	for _, e := range devs {
		v.Dev = append(v.Dev, e.Name())
	}
	_, err = os.Stat("/proc/self/status")
	v.ProcSelf = err == nil
	for _, dir := range []struct {
		path string
		into *[]string
	}{{"/sys/class/net", &v.SysNet}, {"/sys/fs/cgroup", &v.Cgroups}} {
		entries, _ := os.ReadDir(dir.path)
		for _, e := range entries {
			*dir.into = append(*dir.into, e.Name())
		}
	}
	var st unix.Statfs_t
	v.SysReadOnly = unix.Statfs("/sys", &st) == nil && st.Flags&unix.ST_RDONLY != 0
	if c := os.Getenv("HALE_TEST_NODE_COMMAND"); c != "" {
		out, err := exec.Command("sh", "-c", c).CombinedOutput()
		v.Command = string(out)
		if err != nil {
			v.Error = fmt.Sprintf("%s: %v", c, err)
		}
	}
}

// An image-booted node's root is an overlay of the image: it sees the image's files, none of
// the host's, hale's binary read-only, the cluster's shared directory, private /dev, /proc,
// /tmp; what it writes (and deletes) lands in its own upper layer, never in the image or on the
// host; a reboot (the same instance directory) keeps it, a replacement (a new one) starts from
// the clean image; nothing stays mounted on the host once the node's processes are gone.
func TestImageRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespaces, overlayfs)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	tmp := t.TempDir()
	lower := filepath.Join(tmp, "image")
	for _, d := range []string{"usr/bin", "etc", "var/lib", "opt"} {
		if err := os.MkdirAll(filepath.Join(lower, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(lower, "etc/image-marker"), []byte("from the image"), 0o644)
	os.Symlink("/run", filepath.Join(lower, "var/run"))
	shared := filepath.Join(tmp, "shared")
	os.MkdirAll(shared, 0o777)
	agent := filepath.Join(tmp, "hale")
	os.WriteFile(agent, []byte("hale binary"), 0o755)
	hostFile := filepath.Join(tmp, "host-only")
	os.WriteFile(hostFile, []byte("host"), 0o644)

	boot := func(inst, name string) nodeView {
		t.Helper()
		return bootNode(t, tmp, inst, lower, shared, agent, hostFile, name, "")
	}

	inst := filepath.Join(tmp, "i-1")
	v := boot(inst, "first")
	if v.Hostname != "ip-10-222-0-10" || v.ImageFile != "from the image" || v.Kept != "" {
		t.Errorf("first boot: %+v", v)
	}
	if v.HostFile {
		t.Error("the node sees the host's files")
	}
	if strings.Contains(strings.Join(v.RootEntries, " "), oldRootName) {
		t.Errorf("the host's old root is still in the node's /: %v", v.RootEntries)
	}
	if !v.AgentRO || v.AgentContent != "hale binary" {
		t.Errorf("hale's binary in the node: read-only %v, content %q", v.AgentRO, v.AgentContent)
	}
	dev := strings.Join(v.Dev, " ")
	for _, want := range []string{"null", "zero", "urandom", "pts", "shm", "ptmx"} {
		if !strings.Contains(" "+dev+" ", " "+want+" ") {
			t.Errorf("the node's /dev lacks %s: %v", want, v.Dev)
		}
	}
	// None of the host's disks: through one the node could read the host's file system.
	hostDevs, _ := os.ReadDir("/dev")
	for _, e := range hostDevs {
		if !nodeDevices[e.Name()] && e.Type()&os.ModeDevice != 0 && strings.Contains(" "+dev+" ", " "+e.Name()+" ") && e.Name() != "ptmx" {
			t.Errorf("the node has the host's device %s", e.Name())
		}
	}
	if !v.ProcSelf || !v.TmpWritable {
		t.Errorf("/proc %v, /tmp writable %v", v.ProcSelf, v.TmpWritable)
	}
	// /sys is the node's: its network namespace's devices (only lo here), read-only, with the
	// host's cgroup file systems under it for slurmd.
	if strings.Join(v.SysNet, " ") != "lo" || !v.SysReadOnly {
		t.Errorf("the node's /sys: class/net %v (want lo only), read-only %v", v.SysNet, v.SysReadOnly)
	}
	hostCgroups, _ := os.ReadDir("/sys/fs/cgroup")
	if len(v.Cgroups) == 0 || len(v.Cgroups) != len(hostCgroups) {
		t.Errorf("the node's /sys/fs/cgroup: %v, the host has %d entries", v.Cgroups, len(hostCgroups))
	}
	if b, err := os.ReadFile(filepath.Join(shared, "from-node")); err != nil || string(b) != v.Hostname {
		t.Errorf("the shared directory: %q, %v", b, err)
	}
	// The node's writes and deletions are in its upper layer; the image is unchanged.
	if b, err := os.ReadFile(filepath.Join(inst, "rootfs/upper/kept")); err != nil || string(b) != "written by first" {
		t.Errorf("the node's write in its upper layer: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(lower, "kept")); err == nil {
		t.Error("the node wrote into the image")
	}
	if b, err := os.ReadFile(filepath.Join(lower, "etc/image-marker")); err != nil || string(b) != "from the image" {
		t.Errorf("the node's deletion reached the image: %q, %v", b, err)
	}
	if b, _ := os.ReadFile(agent); string(b) != "hale binary" {
		t.Errorf("the node changed hale's binary: %q", b)
	}

	// A reboot: the same instance directory, so the same upper layer.
	v = boot(inst, "second")
	if v.Kept != "written by first" || v.ImageFile != "" {
		t.Errorf("after a reboot the node's writes are gone: kept %q, deleted image file %q", v.Kept, v.ImageFile)
	}
	// A replacement: a new instance, the clean image.
	v = boot(filepath.Join(tmp, "i-2"), "replacement")
	if v.Kept != "" || v.ImageFile != "from the image" {
		t.Errorf("a replacement does not start from the clean image: kept %q, image file %q", v.Kept, v.ImageFile)
	}
}

// runNode runs TestImageNodeHelper as a node, with the setup.json at path, in new UTS, mount,
// network and PID namespaces (as hale node-init is started); command, when not empty, runs
// inside it. It fails the test if the node's set-up fails.
func runNode(t *testing.T, path, hostFile, name, command string) nodeView {
	t.Helper()
	cmd := exec.Command("unshare", append([]string{"--uts", "--mount", "--net", "--pid", "--fork", "--propagation", "slave", "--",
		os.Args[0], "-test.run=^TestImageNodeHelper$", "-test.v=false"}, coverArgs()...)...)
	cmd.Env = append(os.Environ(), helperSetupEnv+"="+path, "HALE_TEST_HOST_FILE="+hostFile, "HALE_TEST_BOOT="+name,
		"HALE_TEST_NODE_COMMAND="+command)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", name, err, out)
	}
	var v nodeView
	line, _, _ := strings.Cut(string(out), "\n")
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		t.Fatalf("node %s said %q: %v", name, out, err)
	}
	if v.Error != "" {
		t.Fatalf("node %s: %s\n%s", name, v.Error, v.Command)
	}
	return v
}

// bootNode runs TestImageNodeHelper as a node of the image at lower with instance directory
// inst, shared bound at /fsx and agent as hale's binary; command, when not empty, runs inside
// it. It fails the test if the node's set-up fails or leaves a mount under tmp on the host.
func bootNode(t *testing.T, tmp, inst, lower, shared, agent, hostFile, name, command string) nodeView {
	t.Helper()
	root := imageRootOf(inst, lower)
	if err := root.make(); err != nil {
		t.Fatal(err)
	}
	s := NodeSetup{Hostname: "ip-10-222-0-10", PrivateDev: true, Root: root, Tmpfs: map[string]int{NodeDisk: 1},
		Binds: append([]Bind{{Source: shared, Target: "/fsx"}, {Source: agent, Target: NodeAgentBinary, ReadOnly: true}}, coverBinds()...)}
	b, _ := json.Marshal(s)
	path := filepath.Join(inst, "setup.json")
	os.WriteFile(path, b, 0o600)
	v := runNode(t, path, hostFile, name, command)
	// The node's processes are gone, and with them its mount namespace: nothing of it is
	// mounted in the host's.
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), tmp) {
		t.Errorf("after node %s, the host has mounts under %s:\n%s", name, tmp, mi)
	}
	return v
}

// A real image (HALE_TEST_IMAGE_ROOT: a built image's rootfs, HALE_TEST_AGENT: a built hale)
// runs what a node needs inside its root: hale's binary, Slurm's and munge's daemons, python3.
// Skipped without them: building an image takes a minute and the network (test/e2e does).
func TestImageRootRealImage(t *testing.T) {
	lower, agent := os.Getenv("HALE_TEST_IMAGE_ROOT"), os.Getenv("HALE_TEST_AGENT")
	if lower == "" || agent == "" || os.Geteuid() != 0 {
		t.Skip("set HALE_TEST_IMAGE_ROOT to an image's rootfs and HALE_TEST_AGENT to a hale binary, as root")
	}
	tmp := t.TempDir()
	shared := filepath.Join(tmp, "shared")
	os.MkdirAll(shared, 0o777)
	hostFile := filepath.Join(tmp, "host-only")
	os.WriteFile(hostFile, nil, 0o644)
	v := bootNode(t, tmp, filepath.Join(tmp, "i-1"), lower, shared, agent, hostFile, "real",
		"set -e; cat /etc/debian_version; hale --help | head -1; slurmd -V; munged --version; python3 -c 'print(\"python ok\")'; "+
			"id munge; grep -c . /proc/self/mountinfo; ls /dev | tr '\\n' ' '")
	t.Logf("inside the image:\n%s", v.Command)
	for _, want := range []string{"slurm-wlm ", "munge-", "python ok", "uid="} {
		if !strings.Contains(v.Command, want) {
			t.Errorf("inside the image, no %q in:\n%s", want, v.Command)
		}
	}
	if v.HostFile {
		t.Error("the node sees the host's files")
	}
}
