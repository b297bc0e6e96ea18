package slurmtest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/internal/agentproto"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
	"github.com/haleproject/hale/internal/orchestrator/slurm/slurmtest"
)

// w1 is the compute node of the scripted cluster, on instance "w1" (its controller is "ctl").
const w1 = "ip-10-0-0-2"

// The scripted Slurm's nodes have the states a real slurmctld gives: unknown until their slurmd
// registers, drained and down by scontrol, back when it registers (a drain kept), not responding
// then down when their machine goes, and gone from a configuration without them.
func TestCtldNodeStates(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	boots := map[string]int{"ctl": 1, "w1": 1}
	c := &slurmtest.Ctld{Now: func() time.Time { return now }, Up: func(id string) (int, bool) { b, ok := boots[id]; return b, ok }}
	run := func(inst string, argv ...string) *agentproto.CommandResult {
		t.Helper()
		res := c.Answer(inst, &agentproto.Command{Kind: &agentproto.Command_Run{Run: &agentproto.RunCommand{Argv: argv}}})
		if res == nil {
			t.Fatalf("%s: no answer", strings.Join(argv, " "))
		}
		return res
	}
	state := func(name string) slurmconf.NodeState {
		t.Helper()
		res := run("ctl", append(slurmconf.ShowNodes(), name)...)
		if res.ExitCode != 0 {
			t.Fatalf("show node %s: exit %d %s", name, res.ExitCode, res.OutputTail)
		}
		return slurmconf.ParseShowNodes(string(res.StdoutTail))[name]
	}
	want := func(name, st, reason string) {
		t.Helper()
		if got := state(name); got.State != st || got.Reason != reason {
			t.Fatalf("%s: %s (%q), want %s (%q)", name, got.State, got.Reason, st, reason)
		}
	}
	conf := func(nodes ...string) []byte {
		cfg := &slurmconf.Config{ClusterName: "c", ControllerName: "ip-10-0-0-1", ControllerAddr: "10.0.0.1"}
		for _, n := range nodes {
			cfg.Nodes = append(cfg.Nodes, slurmconf.Node{Name: n, Addr: strings.ReplaceAll(strings.TrimPrefix(n, "ip-"), "-", "."), CPUs: 4, RealMemory: 900, Partition: "p"})
		}
		return []byte(slurmconf.Conf(slurmconf.DefaultOperatorPart, cfg))
	}
	write := func(inst string, b []byte) {
		c.Answer(inst, &agentproto.Command{Kind: &agentproto.Command_WriteFiles{WriteFiles: &agentproto.WriteFiles{Files: []*agentproto.File{{Path: slurmconf.ConfPath, Content: b}}}}})
	}
	start := func(inst string, d slurmconf.Daemon) {
		c.Answer(inst, &agentproto.Command{Kind: &agentproto.Command_Daemon{Daemon: &agentproto.Daemon{Name: d.Name, Argv: d.Argv, Enabled: true}}})
	}

	if res := run("ctl", slurmconf.ShowNodes()...); res.ExitCode == 0 || !strings.Contains(string(res.OutputTail), "Unable to contact slurm controller") {
		t.Fatalf("scontrol without slurmctld: exit %d %s", res.ExitCode, res.OutputTail)
	}
	write("ctl", conf(w1))
	write("w1", conf(w1))
	start("ctl", slurmconf.Slurmctld())
	if res := run("ctl", slurmconf.WaitListed(w1)...); res.ExitCode != 0 {
		t.Fatalf("slurmctld does not list %s: %s", w1, res.OutputTail)
	}
	want(w1, "UNKNOWN+NOT_RESPONDING", "")
	start("w1", slurmconf.Slurmd(w1))
	want(w1, "IDLE", "")

	run("ctl", slurmconf.Drain(w1, "Action:Replace")...)
	want(w1, "IDLE+DRAIN", "Action:Replace")
	run("ctl", slurmconf.Down(w1, "hale: replacing")...)
	want(w1, "DOWN+DRAIN", "hale: replacing")
	boots["w1"]++ // its slurmd, started again after the boot, registers: the drain stays
	want(w1, "IDLE+DRAIN", "hale: replacing")
	run("ctl", slurmconf.Resume(w1)...)
	want(w1, "IDLE", "")
	if res := run("ctl", slurmconf.Resume(w1)...); !strings.Contains(string(res.OutputTail), "Invalid node state specified") {
		t.Errorf("resuming an idle node: %s", res.OutputTail)
	}
	if res := run("ctl", slurmconf.Drain("ip-10-0-0-9", "x")...); res.ExitCode == 0 || !strings.Contains(string(res.OutputTail), "Invalid node name specified") {
		t.Errorf("draining a node slurmctld does not have: exit %d %s", res.ExitCode, res.OutputTail)
	}

	delete(boots, "w1") // the machine is gone
	want(w1, "IDLE+NOT_RESPONDING", "")
	now = now.Add(slurmtest.SlurmdTimeout)
	want(w1, "DOWN+NOT_RESPONDING", "Not responding")
	boots["w1"] = 1
	want(w1, "IDLE", "")

	write("ctl", conf("ip-10-0-0-3"))
	if host, nodes := c.Configured(); host != "ctl" || nodes[w1] == "" {
		t.Fatalf("before the reconfigure: %s %v", host, nodes)
	}
	run("ctl", slurmconf.Reconfigure()...)
	if res := run("ctl", append(slurmconf.ShowNodes(), w1)...); res.ExitCode == 0 {
		t.Errorf("a node the configuration no longer has: %s", res.OutputTail)
	}
	if _, nodes := c.Configured(); nodes[w1] != "" || nodes["ip-10-0-0-3"] != "10.0.0.3" {
		t.Errorf("after the reconfigure: %v", nodes)
	}
	delete(boots, "ctl")
	if host, nodes := c.Configured(); host != "" || nodes != nil {
		t.Errorf("slurmctld's machine is gone and it has %s %v", host, nodes)
	}
	if c.Answer("w1", &agentproto.Command{Kind: &agentproto.Command_Run{Run: &agentproto.RunCommand{Argv: []string{"squeue"}}}}) != nil || len(c.Unexpected()) != 1 {
		t.Errorf("an unknown command: %q", c.Unexpected())
	}
}
