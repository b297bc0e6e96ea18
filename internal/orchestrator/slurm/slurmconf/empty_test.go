package slurmconf

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A cluster whose compute groups are all gone still gets a slurm.conf slurmctld starts with:
// Slurm 22.05 is fatal without a partition and without a node ("No PartitionName information
// available!", "no nodes configured"), which left the controller crash-looping. The real
// slurmctld reads the block here.
func TestEmptyClusterStartsSlurmctld(t *testing.T) {
	c := &Config{ClusterName: "empty", ControllerName: "localhost", ControllerAddr: "127.0.0.1"}
	block := c.Block()
	if !strings.Contains(block, "NodeName="+NoComputeNodes+" State=FUTURE\n") || !strings.Contains(block, "PartitionName=dev Nodes="+NoComputeNodes+" Default=YES") {
		t.Fatalf("an empty cluster's block:\n%s", block)
	}
	slurmctld, err := exec.LookPath("slurmctld")
	if err != nil {
		t.Fatal("slurmctld is not installed (scripts/setup.sh installs slurm-wlm)")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "slurm.conf")
	head := "SlurmctldPort=" + freePort(t) + "\nStateSaveLocation=" + dir + "\nSlurmctldPidFile=" + dir + "/slurmctld.pid\nSlurmctldLogFile=" + dir + "/slurmctld.log\n" +
		"AuthType=auth/none\nCredType=cred/none\nMpiDefault=none\n"
	if err := os.WriteFile(conf, []byte(head+block), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, slurmctld, "-D", "-f", conf)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		log, _ := os.ReadFile(filepath.Join(dir, "slurmctld.log"))
		if strings.Contains(string(log), "Running as primary controller") {
			cmd.Process.Kill()
			<-done
			return
		}
		select {
		case err := <-done:
			t.Fatalf("slurmctld exited (%v) with an empty cluster's slurm.conf:\n%s%s", err, log, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freePort is a loopback TCP port nothing listens on now.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
