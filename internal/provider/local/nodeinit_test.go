package local

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nodeInitSetupEnv names the setup.json TestNodeInitHelper boots, as hale node-init does.
const nodeInitSetupEnv = "HALE_TEST_NODE_INIT_SETUP"

// TestNodeInitHelper is PID 1 of TestNodeInit's node: it only runs when the test binary is
// started by that test with unshare --pid --fork.
func TestNodeInitHelper(t *testing.T) {
	path := os.Getenv(nodeInitSetupEnv)
	if path == "" {
		t.Skip("runs only as TestNodeInit's node")
	}
	err := NodeInit(path, []string{"/usr/bin/sh", "-c", os.Getenv("HALE_TEST_NODE_AGENT")})
	os.Stderr.WriteString("node-init: " + err.Error() + "\n")
	os.Exit(1)
}

// A node booted by node-init is its own PID namespace: its /proc lists only its processes, PID
// 1 is node-init, and node-init stays when the agent exits (the node's other processes live
// on: an orphaned daemon here); a restarted agent enters the node (AgentCommandIn); killing
// node-init from the host ends the whole node.
func TestNodeInit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (PID and mount namespaces, overlayfs)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	tmp := t.TempDir()
	lower := filepath.Join(tmp, "image")
	for _, d := range []string{"usr", "etc", "var/lib", "opt"} {
		os.MkdirAll(filepath.Join(lower, d), 0o755)
	}
	// A merged-/usr image whose /usr is the host's (read-only): sh, ls and sleep in the node.
	for _, l := range []string{"bin", "sbin", "lib", "lib64"} {
		os.Symlink("usr/"+l, filepath.Join(lower, l))
	}
	shared := filepath.Join(tmp, "shared")
	os.MkdirAll(shared, 0o777)
	inst := filepath.Join(tmp, "i-1")
	root := imageRootOf(inst, lower)
	if err := root.make(); err != nil {
		t.Fatal(err)
	}
	s := NodeSetup{Hostname: "ip-10-222-0-11", PrivateDev: true, Root: root, Tmpfs: map[string]int{NodeDisk: 1},
		Binds: []Bind{{Source: shared, Target: "/fsx"}, {Source: "/usr", Target: "/usr", ReadOnly: true}}}
	b, _ := json.Marshal(s)
	path := filepath.Join(inst, "setup.json")
	os.WriteFile(path, b, 0o600)

	// The "agent": lists the node's pids and PID 1's command, leaves a daemon behind, exits.
	agent := `ls /proc | grep -E '^[0-9]+$' | tr '\n' ' ' > /fsx/view.tmp; echo >> /fsx/view.tmp; ` +
		`tr '\0' ' ' < /proc/1/cmdline >> /fsx/view.tmp; sleep 600 & ` +
		`echo $! > /fsx/daemon; mv /fsx/view.tmp /fsx/view`
	cmd := exec.Command("unshare", "--uts", "--mount", "--pid", "--fork", "--propagation", "slave", "--",
		os.Args[0], "-test.run=^TestNodeInitHelper$", "-test.v=false")
	cmd.Env = append(os.Environ(), nodeInitSetupEnv+"="+path, "HALE_TEST_NODE_AGENT="+agent)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var initPID int
	defer func() {
		if initPID != 0 {
			syscall.Kill(initPID, syscall.SIGKILL) // PID 1 gone: the kernel ends the node
		}
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var view []byte
	for i := 0; i < 300; i++ {
		if view, _ = os.ReadFile(filepath.Join(shared, "view")); view != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if kids := childPIDs(cmd.Process.Pid); len(kids) == 1 && isNodeInit2(kids[0]) {
		initPID = kids[0]
	}
	if view == nil {
		t.Fatalf("the node wrote no view; node-init said:\n%s", out.String())
	}
	pids, pid1, _ := strings.Cut(string(view), "\n")
	t.Logf("the node's /proc: %s; PID 1: %s", pids, pid1)
	seen := strings.Fields(pids)
	if len(seen) == 0 || seen[0] != "1" || !strings.Contains(pid1, "TestNodeInitHelper") {
		t.Errorf("PID 1 of the node is not node-init: pids %v, PID 1 %q", seen, pid1)
	}
	if strings.Contains(" "+pids, " "+strconv.Itoa(os.Getpid())+" ") || len(seen) > 6 {
		t.Errorf("the node's /proc lists host processes: %v", seen)
	}
	if initPID == 0 {
		t.Fatalf("no node-init under unshare (pid %d); it said:\n%s", cmd.Process.Pid, out.String())
	}
	// The agent has exited; node-init stays, with the daemon the agent left.
	time.Sleep(200 * time.Millisecond)
	if syscall.Kill(initPID, 0) != nil {
		t.Fatalf("node-init ended with the agent:\n%s", out.String())
	}
	// A restarted agent enters the running node (AgentCommandIn): its PID 1, hostname, /proc.
	argv := AgentCommandIn(initPID, "/usr/bin/sh", "-c", `tr '\0' ' ' < /proc/1/cmdline; echo; hostname; echo $$`)
	in, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(in)), "\n")
	if err != nil || len(lines) != 3 || !strings.Contains(lines[0], "TestNodeInitHelper") || lines[1] != s.Hostname {
		t.Errorf("a process entering the node: %q, %v", in, err)
	} else if n, _ := strconv.Atoi(lines[2]); n <= 1 || n > 100 {
		t.Errorf("a process entering the node has pid %s there, not one of the node's", lines[2])
	}
	d, _ := os.ReadFile(filepath.Join(shared, "daemon"))
	nsDaemon, _ := strconv.Atoi(strings.TrimSpace(string(d)))
	daemon, err := hostPID(initPID, nsDaemon)
	if err != nil {
		t.Fatalf("the daemon (pid %d in the node) is gone with the agent: %v", nsDaemon, err)
	}
	syscall.Kill(initPID, syscall.SIGKILL)
	initPID = 0
	cmd.Wait()
	for i := 0; i < 250 && syscall.Kill(daemon, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if syscall.Kill(daemon, 0) == nil {
		t.Errorf("the node's daemon (host pid %d) outlives its node-init", daemon)
	}
}

// isNodeInit2 says whether host pid is TestNodeInitHelper (the test's node-init).
func isNodeInit2(pid int) bool {
	c, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && strings.Contains(string(c), "TestNodeInitHelper")
}

// findAgent finds the agent below the process the provider started, by its subcommand, not by
// the word agent on a command line (node-init's holds it too), and reports the node-init on the
// way: here a node-init (a script whose argv[1] is node-init) starting an agent (argv[1] agent)
// two generations down.
func TestFindAgent(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "agent"), []byte("sleep 60\n"), 0o755)
	// node-init's command line names the agent, as hale node-init's does; a shell in between.
	os.WriteFile(filepath.Join(dir, "node-init"), []byte("sh -c '/bin/sh agent; true' agent\n"), 0o755)
	cmd := exec.Command("/bin/sh", "node-init", "agent")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, p := range descendants(cmd.Process.Pid) {
			syscall.Kill(p, syscall.SIGKILL)
		}
		cmd.Process.Kill()
		cmd.Wait()
	}()
	agent, init, err := findAgent(cmd.Process.Pid, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if init != cmd.Process.Pid {
		t.Errorf("node-init found: %d, want %d", init, cmd.Process.Pid)
	}
	if subcommand(agent) != "agent" || agent == cmd.Process.Pid {
		t.Errorf("agent found: pid %d (%q)", agent, subcommand(agent))
	}
	// No agent below a process: an error once the wait is over.
	sleeper := exec.Command("sleep", "60")
	sleeper.Start()
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	if _, _, err := findAgent(sleeper.Process.Pid, 100*time.Millisecond); err == nil {
		t.Error("findAgent found an agent under a lone sleep")
	}
}

// descendants lists pid's descendants, deepest last.
func descendants(pid int) []int {
	var out []int
	for level := []int{pid}; len(level) > 0; {
		var next []int
		for _, p := range level {
			next = append(next, childPIDs(p)...)
		}
		out = append(out, next...)
		level = next
	}
	return out
}

// A node whose agent runs but whose agent.pid names nothing (a server died between starting the
// node and recording its agent) gets agent.pid back from the processes of its network
// namespace: the one running hale agent for the instance, not another instance's.
func TestHealPIDFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace)")
	}
	dir := t.TempDir()
	ns := "hale-heal-" + strconv.Itoa(os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	scripts := t.TempDir()
	os.WriteFile(filepath.Join(scripts, "agent"), []byte("sleep 60\n"), 0o755)
	start := func(id string) *exec.Cmd {
		// argv [/bin/sh agent --instance-id ID]: subcommand agent, as hale agent's.
		cmd := exec.Command("ip", "netns", "exec", ns, "/bin/sh", "agent", "--instance-id", id)
		cmd.Dir = scripts
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	other := start("i-other")
	mine := start("i-0123456789abcdef0")
	p := &Provider{cfg: Config{Root: dir}}
	r := &record{ID: "i-0123456789abcdef0", Netns: ns}
	os.MkdirAll(p.dir(r.ID), 0o755)
	var got int
	for i := 0; i < 100; i++ { // ip netns exec execs the shell: wait until it has
		p.healPIDFiles(r)
		if got, _ = pidFile(filepath.Join(p.dir(r.ID), "agent.pid")); got == mine.Process.Pid {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != mine.Process.Pid || got == other.Process.Pid {
		t.Errorf("agent.pid %d, want the instance's agent %d (the other instance's is %d)", got, mine.Process.Pid, other.Process.Pid)
	}
}
