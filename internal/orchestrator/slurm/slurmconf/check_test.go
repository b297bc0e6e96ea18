package slurmconf

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// checkWithSlurm runs CheckConf on conf with the Slurm installed here (the release the
// development machine's nodes run) and returns its output and whether the file passed.
func checkWithSlurm(t *testing.T, conf string) (string, bool) {
	t.Helper()
	if _, err := exec.LookPath("sinfo"); err != nil {
		t.Fatal("sinfo is not installed (scripts/setup.sh installs slurm-wlm)")
	}
	path := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := CheckConf(path)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return string(out), err == nil
}

// A slurm.conf that does not parse is refused by the node's own Slurm, and each error is
// tied to the line it is about: those Slurm names (inside a NodeName line) and those it names
// only by key (a top-level setting). hale's own rendering passes.
func TestCheckConfNamesTheLine(t *testing.T) {
	c := &Config{ClusterName: "check", ControllerName: "localhost", ControllerAddr: "127.0.0.1"}
	good := DefaultOperatorPart + c.Block()
	if out, ok := checkWithSlurm(t, good); !ok {
		t.Fatalf("hale's own slurm.conf was refused:\n%s", out)
	}
	bad := good + "PriorityWeightAgee=1000\nNodeName=extra CPUs=many\nMaxJobCount=lots\n"
	out, ok := checkWithSlurm(t, bad)
	if ok {
		t.Fatalf("a slurm.conf with three errors passed:\n%s", out)
	}
	lines := strings.Split(bad, "\n")
	at := func(text string) int {
		for i, l := range lines {
			if l == text {
				return i + 1
			}
		}
		t.Fatalf("no line %q", text)
		return 0
	}
	ps := Problems(out, bad)
	got := map[int]string{}
	for _, p := range ps {
		got[p.Line] = p.String()
	}
	// Slurm stops at the first error of a kind, so not every line need be named; the first
	// top-level error always is, with its line.
	want := at("PriorityWeightAgee=1000")
	if s := got[want]; !strings.Contains(s, "PriorityWeightAgee") || !strings.Contains(s, "(PriorityWeightAgee=1000)") {
		t.Errorf("the unknown key's line %d is not named: %q (from %q)", want, ps, out)
	}
	if strings.Contains(Refusal(ps), "Unable to process") {
		t.Errorf("the refusal repeats Slurm's generic fatal line: %s", Refusal(ps))
	}
}

// Problems ties each of Slurm's error lines to a line of the file, as the releases print them.
func TestProblemsReadsSlurmsWords(t *testing.T) {
	conf := "ClusterName=x\nMaxJobCount=xyz\nNodeName=n2 CPUs=abc\nFooBar=2\n"
	out := `sinfo: error: MaxJobCount value (xyz) is not a valid number
sinfo: error: CPUs value "abc" is not a valid number
sinfo: error: Parse error in file /etc/slurm/.slurm.conf.candidate line 3: " CPUs=abc"
sinfo: error: _parse_next_key: Parsing error at unrecognized key: FooBar
`
	ps := Problems(out, conf)
	want := []string{
		"line 2 (MaxJobCount=xyz): MaxJobCount value (xyz) is not a valid number",
		`line 3 (NodeName=n2 CPUs=abc): CPUs value "abc" is not a valid number`,
		"line 4 (FooBar=2): Parsing error at unrecognized key: FooBar",
	}
	if len(ps) != len(want) {
		t.Fatalf("problems %q, want %q", ps, want)
	}
	for i := range want {
		if ps[i].String() != want[i] {
			t.Errorf("problem %d: %q, want %q", i, ps[i].String(), want[i])
		}
	}
	if ps := Problems("sinfo: error: s_p_parse_file: cannot stat file /x.conf: No such file", conf); len(ps) != 1 || ps[0].Line != 0 || !strings.Contains(ps[0].String(), "cannot stat file /x.conf") {
		t.Errorf("an error without a line: %q", ps)
	}
}
