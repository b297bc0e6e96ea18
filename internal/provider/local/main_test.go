package local

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/haleproject/hale/internal/provider/providertest"
	"golang.org/x/sys/unix"
)

// usernsEnv marks the test binary that TestMain started again in a user namespace of its own.
const usernsEnv = "HALE_TEST_LOCAL_USERNS"

// TestMain: the test binary is also the nodes' hale (AgentBinary), which the provider starts as
// hale node-init (the node's PID 1, this package's NodeInit) and that as hale agent (a stand-in
// that waits to be killed).
//
// Run by a user other than root, the tests run again in a user namespace of their own, where
// they are root: with network and mount namespaces of their own too, so the nodes' bridge,
// veths, network namespaces (under a /run and /sys of their own) and mounts are real but reach
// nothing of the host's (user_namespaces(7)). Where the kernel refuses unprivileged user namespaces the
// tests run as they are and those that need root skip.
//
// The nodes that TestImageRoot boots are this binary too: with go test -cover they write their
// coverage counters into the test's coverage directory (coverArgs), where go test merges them
// with the test's own. (A node booted by node-init is killed, never exits, so its counters are
// lost: a test binary writes them only at its exit.)
func TestMain(m *testing.M) {
	if len(os.Args) > 4 && os.Args[1] == "node-init" && os.Args[2] == "--local-setup" && os.Args[4] == "--" {
		err := NodeInit(os.Args[3], os.Args[5:])
		fmt.Fprintln(os.Stderr, "node-init:", err)
		os.Exit(1)
	}
	providertest.FakeAgent()
	flag.Parse()
	// Processes of this binary that exit rather than run tests (this one, once the tests ran
	// in a user namespace; a node-init that fails its set-up) write their counters at exit to
	// GOCOVERDIR, which go test does not set for them.
	if f := flag.Lookup("test.gocoverdir"); f != nil && f.Value.String() != "" {
		os.Setenv("GOCOVERDIR", f.Value.String())
	}
	switch {
	case os.Getenv(usernsEnv) != "":
		os.Unsetenv(usernsEnv) // the nodes this binary boots are not the namespace's first process
		if err := ownRunAndSys(); err != nil {
			fmt.Fprintln(os.Stderr, "the user namespace's own /run and /sys:", err)
			os.Exit(1)
		}
	case os.Geteuid() != 0:
		if code, err := inUserNamespace(); err == nil {
			os.Exit(code)
		} else {
			fmt.Fprintf(os.Stderr, "the tests that need root skip: no user namespace (%v)\n", err)
		}
	}
	os.Exit(m.Run())
}

// ownRunAndSys mounts, in the user namespace's mount namespace, a /run of its own (ip netns
// keeps its names under /run/netns) and a sysfs of its network namespace (the provider reads
// its bridge's alias in /sys/class/net), keeping the host's cgroup file systems under it.
func ownRunAndSys() error {
	if err := unix.Mount("tmpfs", "/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755"); err != nil {
		return err
	}
	keep := "/run/.cgroup"
	if err := os.Mkdir(keep, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("/sys/fs/cgroup", keep, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if err := unix.Mount("sysfs", "/sys", "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	return unix.Mount(keep, "/sys/fs/cgroup", "", unix.MS_MOVE, "")
}

// inUserNamespace runs this test binary again, with its arguments, as root of a new user
// namespace mapped to this user, with new mount and network namespaces; it returns the exit
// code.
func inUserNamespace() (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Args[0] = os.Args[0] // the nodes' hale (AgentBinary) is os.Args[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), usernsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}

// coverArgs make a helper run of this test binary (a node that TestImageRoot boots) write its
// coverage counters where the test's own go; none when not measured.
func coverArgs() []string {
	if d := os.Getenv("GOCOVERDIR"); d != "" {
		return []string{"-test.gocoverdir=" + d}
	}
	return nil
}

// coverBinds bind the coverage directory into an image-booted node at its host path, for
// coverArgs there; none when not measured.
func coverBinds() []Bind {
	if d := os.Getenv("GOCOVERDIR"); d != "" {
		return []Bind{{Source: d, Target: d}}
	}
	return nil
}
