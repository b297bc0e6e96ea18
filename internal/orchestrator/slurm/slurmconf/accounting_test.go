package slurmconf

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestAccountingGolden checks what hale writes for accounting against a golden file
// (testdata/accounting.golden; regenerate with HALE_UPDATE_GOLDEN=1): hale's block of a cluster
// with accounting and a GPU node, the controller's slurmdbd.conf, and the daemons' commands.
func TestAccountingGolden(t *testing.T) {
	c := cfg()
	c.Accounting = true
	var b strings.Builder
	b.WriteString(c.Block() + "\n---- slurmdbd.conf\n" + DbdConf)
	for _, d := range []Daemon{MariaDB(MariaDBDir), Slurmdbd(MariaDBDir)} {
		b.WriteString("\n---- daemon " + d.Name + " (output to " + d.Log + ")\n")
		for k, v := range d.Env {
			b.WriteString(k + "=" + v + "\n")
		}
		b.WriteString(strings.Join(d.Argv, " ") + "\n")
	}
	got := b.String()
	if os.Getenv("HALE_UPDATE_GOLDEN") != "" {
		os.WriteFile("testdata/accounting.golden", []byte(got), 0o644)
	}
	want, err := os.ReadFile("testdata/accounting.golden")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// Without accounting hale's block has no accounting line, and a cluster without GPUs tracks
// no gres/gpu (Slurm knows no such TRES without GresTypes=gpu).
func TestAccountingLines(t *testing.T) {
	c := cfg()
	if b := c.Block(); strings.Contains(b, "Accounting") {
		t.Errorf("accounting lines without accounting:\n%s", b)
	}
	c.Accounting = true
	c.Nodes = c.Nodes[1:] // the CPU node only
	b := c.Block()
	if !strings.Contains(b, "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=10.222.0.11\nAccountingStoragePort=6819\n") ||
		strings.Contains(b, "AccountingStorageTRES") || strings.Contains(b, "GresTypes") {
		t.Errorf("block of a CPU cluster with accounting:\n%s", b)
	}
	// The operator's own accounting storage settings would fight hale's: Merge drops them,
	// and keeps how jobs are gathered, which is theirs.
	merged := Merged("AccountingStorageType=accounting_storage/none\nAccountingStorageHost=db.example.com\nJobAcctGatherFrequency=10\n")
	if strings.Contains(merged, "AccountingStorage") || !strings.Contains(merged, "JobAcctGatherFrequency=10") {
		t.Errorf("Merge: %q", merged)
	}
	if strings.Contains(DefaultOperatorPart, "AccountingStorage") || !strings.Contains(DefaultOperatorPart, "JobAcctGatherType=jobacct_gather/linux") {
		t.Errorf("a new slurm.conf's operator part sets hale's accounting keys or gathers nothing:\n%s", DefaultOperatorPart)
	}
}

// The daemons' shell scripts parse, and WaitDbd looks for DbdPort (hex 1AA3 in /proc/net/tcp)
// and MariaDB's socket; TestWaitDbdNeedsAnAnswer and TestWaitDbdCountsFromMariaDB run it.
func TestAccountingScripts(t *testing.T) {
	for _, argv := range [][]string{MariaDB(MariaDBDir).Argv, Slurmdbd(MariaDBDir).Argv, WaitDbd(MariaDBDir, 3), WaitDbd(MariaDBDir, 0), DbdListening(), QuickAck("10.1.0.2")} {
		if argv[0] != "/bin/sh" || argv[1] != "-c" {
			t.Fatalf("not a shell command: %q", argv)
		}
		if out, err := exec.Command("sh", "-n", "-c", argv[2]).CombinedOutput(); err != nil {
			t.Errorf("sh -n %q: %v %s", argv[2], err, out)
		}
	}
	if w := WaitDbd(MariaDBDir, 0)[2]; !strings.Contains(w, "*:1AA3)") || !strings.Contains(w, "[ -e "+Socket(MariaDBDir)+" ]") {
		t.Errorf("WaitDbd: %q", w)
	}
}
