//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/server/servertest"
)

// reimageScript is an on_create.sh that refuses image C, the one image with jq: the update to C
// fails where HyperPod's would, in the lifecycle scripts of its first batch.
const reimageScript = `#!/bin/bash
set -e
if command -v jq >/dev/null; then
  echo "on_create.sh: jq is on this image: this cluster's setup does not support it" >&2
  exit 1
fi
echo configured > /var/log/provision/reimage
`

// UpdateClusterSoftware re-images a group in rolling batches on real images (docs/images.md):
// three bookworm images without PyTorch that differ by a package (A: less; B: less and tree;
// C: less, tree and jq). A worker group of 3 on A goes to B in batches of 2 with a wait between:
// never more than a batch out of service, every node runs B afterwards (tree inside it), and
// CurrentImageId is B. Then to C, where the lifecycle script fails: the first batch fails, its
// nodes are rolled back onto B, the update ends RollbackComplete with DesiredImageId B again, the
// third node never left B, and the events say why.
func TestRollingReimage(t *testing.T) {
	parallel(t)
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		t.Skip("mmdebstrap is not installed (scripts/setup.sh installs it)")
	}
	ctx := context.Background()
	// A real Prometheus whose alert LossSpike is the third update's rollback alarm: it fires
	// while the training's own metric (served here, as a job's exporter would) is above 0.
	var lossSpike atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "# TYPE training_loss_spike gauge\ntraining_loss_spike %d\n", lossSpike.Load())
	}))
	defer target.Close()
	rules := filepath.Join(t.TempDir(), "rules.yml")
	os.WriteFile(rules, []byte("groups:\n- name: training\n  rules:\n  - alert: LossSpike\n    expr: training_loss_spike > 0\n"), 0o644)
	prom := startPrometheus(t, "rule_files: ["+rules+"]\nscrape_configs:\n- job_name: training\n  static_configs:\n  - targets: ['"+strings.TrimPrefix(target.URL, "http://")+"']\n")
	dir := t.TempDir()
	o := options(t, dir)
	o.AlarmsPrometheus, o.AlarmInterval = prom.url, time.Second
	e := &env{Env: servertest.Start(t, o), t: t, scripts: o.ObjectStore}
	dataDir := e.Options.DataDir
	build := func(name, packages string) string {
		t.Helper()
		began := time.Now()
		out, err := haleCLI(dataDir, "image", "build", "--name", name, "--suite", "bookworm", "--no-pytorch", "--packages", packages)
		if err != nil {
			t.Fatal(err)
		}
		id := strings.Fields(out)[0]
		t.Logf("image %s (%s: %s) built in %.1f s", id, name, packages, time.Since(began).Seconds())
		return id
	}
	imgA, imgB, imgC := build("reimage-a", "less"), build("reimage-b", "less,tree"), build("reimage-c", "less,tree,jq")

	lc := e.script("reimage", "on_create.sh", reimageScript)
	withImage := func(g types.ClusterInstanceGroupSpecification) types.ClusterInstanceGroupSpecification {
		g.ImageId = aws.String(imgA)
		return g
	}
	const cl = "reimage"
	created := time.Now()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String(cl), InstanceGroups: []types.ClusterInstanceGroupSpecification{
		withImage(group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc)),
		withImage(group("workers", "ml.c5.2xlarge", 3, types.ClusterSlurmNodeTypeCompute, lc, "cpu")),
	}}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(cl, types.ClusterStatusInservice, 180*time.Second)
	t.Logf("CreateCluster to InService: %.1f s (4 nodes on image A)", time.Since(created).Seconds())
	defer func() {
		if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String(cl)}); err != nil {
			t.Error(err)
			return
		}
		e.waitGone(cl, 60*time.Second)
	}()
	ctl := byGroup(e.nodes(cl), "controller")[0]
	before := map[string]string{} // logical id -> instance id
	for _, n := range workers(e.nodes(cl)) {
		before[*n.NodeLogicalId] = *n.InstanceId
	}
	// onImage says which of the three images the node's root is, from inside the node.
	onImage := func(instanceID string) string {
		t.Helper()
		out, err := e.onNode(instanceID, "if command -v jq >/dev/null; then echo C; elif command -v tree >/dev/null; then echo B; else echo A; fi; cat /var/log/provision/reimage")
		if err != nil {
			t.Fatalf("on %s: %v\n%s", instanceID, err, out)
		}
		if !strings.Contains(out, "configured") {
			t.Errorf("node %s: its lifecycle script did not run on its image: %q", instanceID, out)
		}
		return strings.Fields(out)[0]
	}
	for _, n := range workers(e.nodes(cl)) {
		if got := onImage(*n.InstanceId); got != "A" {
			t.Fatalf("worker %s runs image %s before the update, want A", *n.InstanceId, got)
		}
	}

	// A to B in batches of 2, 10 s apart.
	update := func(image string, wait int32, alarms ...string) {
		t.Helper()
		cfg := &types.DeploymentConfiguration{WaitIntervalInSeconds: aws.Int32(wait), RollingUpdatePolicy: &types.RollingDeploymentPolicy{
			MaximumBatchSize: &types.CapacitySizeConfig{Type: types.NodeUnavailabilityTypeInstanceCount, Value: aws.Int32(2)}}}
		for _, a := range alarms {
			cfg.AutoRollbackConfiguration = append(cfg.AutoRollbackConfiguration, types.AlarmDetails{AlarmName: aws.String(a)})
		}
		if _, err := e.SDK.UpdateClusterSoftware(ctx, &sagemaker.UpdateClusterSoftwareInput{ClusterName: aws.String(cl), ImageId: aws.String(image),
			InstanceGroups:   []types.UpdateClusterSoftwareInstanceGroupSpecification{{InstanceGroupName: aws.String("workers")}},
			DeploymentConfig: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	update(imgB, 10)
	seen, most := e.watchReimage(t, cl, types.SoftwareUpdateStatusSucceeded, 150*time.Second)
	t.Logf("update A -> B (3 workers, batches of 2, 10 s apart): %.1f s, at most %d workers out of service at once", time.Since(began).Seconds(), most)
	if most > 2 {
		t.Errorf("%d workers out of service at once, the batch size is 2", most)
	}
	if !seen[types.SoftwareUpdateStatusInProgress] {
		t.Errorf("DescribeCluster never showed InProgress (saw %v)", seen)
	}
	afterB := map[string]string{}
	for _, n := range workers(e.nodes(cl)) {
		afterB[*n.NodeLogicalId] = *n.InstanceId
		if *n.InstanceId == before[*n.NodeLogicalId] {
			t.Errorf("%s was not re-imaged (still %s)", *n.NodeLogicalId, *n.InstanceId)
		}
		if got := onImage(*n.InstanceId); got != "B" {
			t.Errorf("%s runs image %s after the update, want B", *n.NodeLogicalId, got)
		}
	}
	g := e.describeGroup(t, cl, "workers")
	if aws.ToString(g.CurrentImageId) != imgB || aws.ToString(g.DesiredImageId) != imgB {
		t.Errorf("after the update: CurrentImageId %s DesiredImageId %s, want %s", aws.ToString(g.CurrentImageId), aws.ToString(g.DesiredImageId), imgB)
	}
	var hosts []string
	for _, n := range workers(e.nodes(cl)) {
		hosts = append(hosts, host(n))
	}
	e.waitIdle(t, *ctl.InstanceId, hosts...) // Slurm has the re-imaged workers back

	// B to C: the lifecycle script fails there, so the first batch fails and rolls back.
	began = time.Now()
	update(imgC, 0)
	seen, _ = e.watchReimage(t, cl, types.SoftwareUpdateStatusRollbackComplete, 150*time.Second)
	t.Logf("update B -> C failed and rolled back: %.1f s; the batches (events): %s", time.Since(began).Seconds(), batchTimes(e.events(cl)))
	for _, line := range strings.Split(e.events(cl), "\n") {
		if strings.Contains(line, "Software update") {
			t.Log(strings.TrimSpace(line))
		}
	}
	rolledBackToB := func(seen map[types.SoftwareUpdateStatus]bool, why string) {
		t.Helper()
		if !seen[types.SoftwareUpdateStatusRollbackInProgress] {
			t.Errorf("DescribeCluster never showed RollbackInProgress (saw %v)", seen)
		}
		for _, n := range workers(e.nodes(cl)) {
			if got := onImage(*n.InstanceId); got != "B" {
				t.Errorf("%s runs image %s after the rollback (%s), want B", *n.NodeLogicalId, got, why)
			}
			if *n.NodeLogicalId == "workers-3" && *n.InstanceId != afterB["workers-3"] {
				t.Errorf("workers-3, not in the first batch, was re-imaged (%s, was %s; %s)", *n.InstanceId, afterB["workers-3"], why)
			}
		}
	}
	rolledBackToB(seen, "a failed batch")
	g = e.describeGroup(t, cl, "workers")
	if aws.ToString(g.CurrentImageId) != imgB || aws.ToString(g.DesiredImageId) != imgB || g.ActiveSoftwareUpdateConfig != nil || g.Status != types.InstanceGroupStatusInservice {
		t.Errorf("after the rollback: CurrentImageId %s DesiredImageId %s config %v status %s, want %s twice, none, InService",
			aws.ToString(g.CurrentImageId), aws.ToString(g.DesiredImageId), g.ActiveSoftwareUpdateConfig, g.Status, imgB)
	}
	if ev := e.events(cl); !strings.Contains(ev, "did not come back on image "+imgC) || !strings.Contains(ev, "jq is on this image") || !strings.Contains(ev, "rolled back") {
		t.Errorf("the events do not say why the update was rolled back:\n%s", ev)
	}

	// B to A with the rollback alarm LossSpike, 60 s between batches: the first batch moves to
	// A, the training's loss spikes in the wait, Prometheus fires LossSpike, and hale rolls the
	// update back before the second batch.
	firstDone := strings.Count(e.events(cl), "workers: batch 1 done")
	began = time.Now()
	update(imgA, 60, "LossSpike")
	eventually(t, 150*time.Second, "the first batch on image A", func() (bool, string) {
		ev := e.events(cl)
		return strings.Count(ev, "workers: batch 1 done") > firstDone, ev
	})
	if g := e.describeGroup(t, cl, "workers"); g.SoftwareUpdateStatus != types.SoftwareUpdateStatusInProgress {
		t.Fatalf("update %s after its first batch, before any alarm", g.SoftwareUpdateStatus)
	}
	lossSpike.Store(1)
	spiked := time.Now()
	seen, _ = e.watchReimage(t, cl, types.SoftwareUpdateStatusRollbackComplete, 150*time.Second)
	t.Logf("update B -> A rolled back by alarm LossSpike: %.1f s from the spike (%.1f s in all); the batches: %s",
		time.Since(spiked).Seconds(), time.Since(began).Seconds(), batchTimes(e.events(cl)))
	if v, ok := prom.query(t, `ALERTS{alertname="LossSpike",alertstate="firing"}`); !ok || v != 1 {
		t.Errorf("Prometheus has no firing LossSpike: %v %v", v, ok)
	}
	rolledBackToB(seen, "alarm LossSpike")
	ev := e.events(cl)
	for _, want := range []string{"It rolls back if one of its alarms (LossSpike) is in ALARM (a firing alert of that name in Prometheus at " + prom.url + ")",
		"failed: alarm LossSpike is in ALARM (a firing alert in Prometheus at " + prom.url + ") in the wait after batch 1"} {
		if !strings.Contains(ev, want) {
			t.Errorf("the events do not say %q:\n%s", want, ev)
		}
	}
}

// watchReimage polls DescribeCluster and the workers until the group's software update ends
// with want and the cluster is InService; it returns the update statuses seen and the most
// workers out of service (not Running) at once.
func (e *env) watchReimage(t *testing.T, cl string, want types.SoftwareUpdateStatus, within time.Duration) (map[types.SoftwareUpdateStatus]bool, int) {
	t.Helper()
	seen, most := map[types.SoftwareUpdateStatus]bool{}, 0
	deadline := time.Now().Add(within)
	for {
		d, err := e.SDK.DescribeCluster(context.Background(), &sagemaker.DescribeClusterInput{ClusterName: aws.String(cl)})
		if err != nil {
			t.Fatal(err)
		}
		var g *types.ClusterInstanceGroupDetails
		for i := range d.InstanceGroups {
			if aws.ToString(d.InstanceGroups[i].InstanceGroupName) == "workers" {
				g = &d.InstanceGroups[i]
			}
		}
		seen[g.SoftwareUpdateStatus] = true
		away := 0
		for _, n := range workers(e.nodes(cl)) {
			if n.InstanceStatus == nil || n.InstanceStatus.Status != types.ClusterInstanceStatusRunning {
				away++
			}
		}
		most = max(most, away)
		switch {
		case g.SoftwareUpdateStatus == want && d.ClusterStatus == types.ClusterStatusInservice:
			return seen, most
		case g.SoftwareUpdateStatus == types.SoftwareUpdateStatusFailed, time.Now().After(deadline):
			t.Fatalf("software update is %s, cluster %s (want %s); events:\n%s", g.SoftwareUpdateStatus, d.ClusterStatus, want, e.events(cl))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// describeGroup is DescribeCluster's view of one instance group.
func (e *env) describeGroup(t *testing.T, cl, name string) types.ClusterInstanceGroupDetails {
	t.Helper()
	d, err := e.SDK.DescribeCluster(context.Background(), &sagemaker.DescribeClusterInput{ClusterName: aws.String(cl)})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range d.InstanceGroups {
		if aws.ToString(g.InstanceGroupName) == name {
			return g
		}
	}
	t.Fatalf("cluster %s has no group %s", cl, name)
	return types.ClusterInstanceGroupDetails{}
}

// batchTimes picks the batches' durations out of the events, for the log.
func batchTimes(events string) string {
	re := regexp.MustCompile(`(rollback batch|batch) (\d+) done in ([0-9.]+m?s)`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(events, -1) {
		out = append(out, m[1]+" "+m[2]+": "+m[3])
	}
	return strings.Join(out, ", ")
}
