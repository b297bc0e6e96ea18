//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// imageScript is an on_create.sh that changes a node's system files the way a script that
// installs a package does: a file under /usr named for the node, a user in /etc/passwd.
const imageScript = `#!/bin/bash
set -e
mkdir -p /usr/share/hale-e2e
hostname > /usr/share/hale-e2e/installed-on-$(hostname)
useradd --no-create-home hale-e2e-user
echo run >> /var/log/provision/runs
`

// versionCheck is one check TestSlurmVersions runs on each suite's image, on the suite's own
// server: each creates and deletes its own clusters.
type versionCheck struct {
	name string
	run  func(t *testing.T, e *env, suite, imageID string)
}

// versionChecks are the checks of TestSlurmVersions, in the order they run; each file that holds
// one adds it in an init function.
var versionChecks = []versionCheck{{"isolation", nodesBootFromImage}}

// TestSlurmVersions runs hale's Slurm clusters on each Debian suite's Slurm (docs/images.md):
// bookworm's 22.05, trixie's 24.11 and sid's 26.05, each from an image built with hale image
// build, on a server of its own, through versionChecks.
//
// The suites are HALE_E2E_SLURM_SUITES (comma-separated; trixie,sid when unset: bookworm's
// Slurm 22.05 is what the rest of the suite runs on).
func TestSlurmVersions(t *testing.T) {
	t.Parallel() // its suites take the turns (parallel), not this parent
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		t.Skip("mmdebstrap is not installed (scripts/setup.sh installs it)")
	}
	suites := os.Getenv("HALE_E2E_SLURM_SUITES")
	if suites == "" {
		suites = "trixie,sid"
	}
	only := os.Getenv("HALE_E2E_SLURM_CHECKS") // comma-separated check names; all when unset
	for _, suite := range strings.Split(suites, ",") {
		t.Run(suite, func(t *testing.T) {
			parallel(t) // each suite its own server and network; their images build one at a time
			e := start(t)
			built := time.Now()
			out, err := haleCLI(e.Options.DataDir, "image", "build", "--name", "slurm-"+suite, "--suite", suite, "--no-pytorch")
			if err != nil {
				t.Fatal(err)
			}
			id := strings.Fields(out)[0]
			t.Logf("image %s (%s) built in %.1f s", id, suite, time.Since(built).Seconds())
			for _, c := range versionChecks {
				if only != "" && !slices.Contains(strings.Split(only, ","), c.name) {
					continue
				}
				t.Run(c.name, func(t *testing.T) { c.run(t, e.in(t), suite, id) })
			}
			// Every check deleted its clusters, so nothing uses the image any more.
			if _, err := haleCLI(e.Options.DataDir, "image", "delete", id); err != nil {
				t.Errorf("the image is still in use after the checks' clusters were deleted: %v", err)
			}
		})
	}
}

// debianVersion is the start of /etc/debian_version in each suite's root.
var debianVersion = map[string]string{"bookworm": "12.", "trixie": "13.", "sid": "forky/sid"}

// Nodes of a group whose ImageId is a built image boot from it: they run the image's Debian and
// Slurm, a lifecycle script's changes to system files stay in the node that made them (not on
// the host, not in the other nodes), a reboot keeps them, a replacement starts from the clean
// image, and deleting the cluster leaves the host as it was, with nothing of the nodes mounted.
func nodesBootFromImage(t *testing.T, e *env, suite, id string) {
	ctx := context.Background()
	dataDir := e.Options.DataDir
	m := describeImage(t, dataDir, id)
	slurmVersion := strings.SplitN(m.Installed["slurmd"], "-", 2)[0] // 22.05.8-4+deb12u3 -> 22.05.8
	t.Logf("image %s: %s, slurmd %s", id, suite, m.Installed["slurmd"])
	passwdBefore, _ := os.ReadFile("/etc/passwd")
	rootBefore, _ := os.ReadDir(filepath.Join(dataDir, "images", id, "rootfs", "usr/share"))

	lc := e.script("img", "on_create.sh", imageScript)
	withImage := func(g types.ClusterInstanceGroupSpecification) types.ClusterInstanceGroupSpecification {
		g.ImageId = aws.String(id)
		return g
	}
	created := time.Now()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("img"), InstanceGroups: []types.ClusterInstanceGroupSpecification{
		withImage(group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc)),
		withImage(group("workers", "ml.c5.2xlarge", 2, types.ClusterSlurmNodeTypeCompute, lc, "cpu")),
	}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("img", types.ClusterStatusInservice, 180*time.Second)
	t.Logf("CreateCluster to InService on %s: %.1f s (3 nodes)", suite, time.Since(created).Seconds())
	nodes := e.nodes("img")
	w := workers(nodes)
	var ctl types.ClusterNodeSummary
	for _, n := range nodes {
		if *n.InstanceGroupName == "controller" {
			ctl = n
		}
	}
	a, b := *w[0].InstanceId, *w[1].InstanceId
	// A failure says what Slurm's daemons said (full84: slurmctld exited with status 1 again and
	// again on trixie after accounting was turned on, and the events could not say why).
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := e.onNode(*ctl.InstanceId, "tail -n 30 /var/log/slurm/slurmctld.log; echo ---; tail -n 15 /var/log/slurm/slurmdbd.log")
			t.Logf("the controller's slurmctld.log and slurmdbd.log (last lines):\n%s", out)
		}
	})
	run := func(id, shell string) string {
		t.Helper()
		out, err := e.onNode(id, shell)
		if err != nil {
			t.Fatalf("on %s: %s: %v\n%s", id, shell, err, out)
		}
		return strings.TrimSpace(out)
	}

	// The image's Debian and Slurm, and Slurm works: the workers are idle in the controller's sinfo.
	if v := run(a, "cat /etc/debian_version"); !strings.HasPrefix(v, debianVersion[suite]) {
		t.Errorf("the node runs Debian %q, want the image's %s (%s)", v, suite, debianVersion[suite])
	}
	if v := run(a, "slurmd -V"); !strings.Contains(v, slurmVersion) {
		t.Errorf("slurmd -V on the node: %q, the image has %s", v, slurmVersion)
	}
	e.waitIdle(t, *ctl.InstanceId, host(w[0]), host(w[1]))
	if out := run(*ctl.InstanceId, "srun -N2 -p cpu hostname | sort"); !strings.Contains(out, host(w[0])) || !strings.Contains(out, host(w[1])) {
		t.Errorf("srun on the image's Slurm: %q", out)
	}
	// Its own processes (PID 1 hale node-init) and its own read-only /sys, on this Debian too.
	e.checkNodeNamespaces(t, a)
	// The node sees nothing of the host's files: not hale's data directory.
	if out, err := e.onNode(a, "test -e "+dataDir+" && echo visible"); strings.Contains(out, "visible") {
		t.Errorf("the node sees the host's %s (%v)", dataDir, err)
	}

	// The script's changes are each node's own.
	ha, hb := *w[0].PrivateDnsHostname, *w[1].PrivateDnsHostname
	ha, hb = strings.SplitN(ha, ".", 2)[0], strings.SplitN(hb, ".", 2)[0]
	if got := run(a, "ls /usr/share/hale-e2e"); got != "installed-on-"+ha {
		t.Errorf("node %s has %q under /usr/share/hale-e2e, want only its own file", a, got)
	}
	if got := run(b, "ls /usr/share/hale-e2e"); got != "installed-on-"+hb {
		t.Errorf("node %s has %q under /usr/share/hale-e2e, want only its own file", b, got)
	}
	if _, err := os.Stat("/usr/share/hale-e2e"); err == nil {
		t.Error("the script's files are on the host")
	}
	if after, _ := os.ReadFile("/etc/passwd"); string(after) != string(passwdBefore) {
		t.Error("the script's useradd changed the host's /etc/passwd")
	}
	if after, _ := os.ReadDir(filepath.Join(dataDir, "images", id, "rootfs", "usr/share")); len(after) != len(rootBefore) {
		t.Errorf("the image changed: /usr/share had %d entries, now %d", len(rootBefore), len(after))
	}

	// A reboot keeps the node's writes.
	run(a, "echo kept > /root/after-create")
	pidBefore, _ := e.agentPID(a)
	if _, err := e.SDK.BatchRebootClusterNodes(ctx, &sagemaker.BatchRebootClusterNodesInput{ClusterName: aws.String("img"), NodeIds: []string{a}}); err != nil {
		t.Fatal(err)
	}
	waitNode(t, e, "img", a, func(pid int) bool { return pid != pidBefore })
	if got := run(a, "cat /root/after-create; id -u hale-e2e-user >/dev/null && echo user"); got != "kept\nuser" {
		t.Errorf("after a reboot the node has %q, want its writes kept", got)
	}

	// A replacement starts from the clean image (and its scripts run on it again).
	run(b, "echo gone > /root/after-create")
	if _, err := e.SDK.BatchReplaceClusterNodes(ctx, &sagemaker.BatchReplaceClusterNodesInput{ClusterName: aws.String("img"), NodeIds: []string{b}}); err != nil {
		t.Fatal(err)
	}
	var repl string
	eventually(t, 90*time.Second, "a Running replacement of "+b, func() (bool, string) {
		for _, n := range e.nodes("img") {
			if *n.NodeLogicalId == *w[1].NodeLogicalId && *n.InstanceId != b && n.InstanceStatus.Status == types.ClusterInstanceStatusRunning {
				repl = *n.InstanceId
				return true, ""
			}
		}
		return false, e.events("img")
	})
	if out, err := e.onNode(repl, "cat /root/after-create"); err == nil {
		t.Errorf("the replacement has its predecessor's file: %q", out)
	}
	if got := run(repl, "wc -l < /var/log/provision/runs; ls /usr/share/hale-e2e"); got != "1\ninstalled-on-"+hb {
		t.Errorf("the replacement has %q, want one run of its scripts on the clean image", got)
	}

	// Disk per node: its upper layer (the image's root is shared).
	for _, inst := range e.instanceDirs() {
		du, _ := exec.Command("du", "-sb", filepath.Join(dataDir, "local", "instances", inst, "rootfs", "upper")).Output()
		t.Logf("node %s: upper layer %s bytes; image %d bytes", inst, strings.Fields(string(du) + " ?")[0], m.SizeBytes)
	}
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("img")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("img", 60*time.Second)
	if left := e.instanceDirs(); len(left) > 0 {
		t.Errorf("instance directories left: %v", left)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), dataDir) {
		t.Errorf("the host has mounts under %s after the delete:\n%s", dataDir, mi)
	}
	if _, err := os.Stat("/usr/share/hale-e2e"); err == nil {
		t.Error("the script's files are on the host after the delete")
	}
}
