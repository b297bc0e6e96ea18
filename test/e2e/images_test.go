//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/image"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
)

// haleCLI runs the hale binary against the server whose data directory is dataDir (its [hale]
// profile and endpoint) and returns its standard output; a non-zero exit is an error holding
// standard error.
func haleCLI(dataDir string, args ...string) (string, error) {
	cmd := exec.Command(haleBin, args...)
	cmd.Env = append(os.Environ(), "HALE_DATA_DIR="+dataDir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("hale %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// describeImage runs hale image describe and decodes the manifest.
func describeImage(t *testing.T, dataDir, id string) *image.Manifest {
	t.Helper()
	out, err := haleCLI(dataDir, "image", "describe", id)
	if err != nil {
		t.Fatal(err)
	}
	var m image.Manifest
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("hale image describe: %v\n%s", err, out)
	}
	return &m
}

// hale image build makes a real bookworm root with mmdebstrap from Debian's archive: its manifest
// gives the versions dpkg reports inside the root (slurmd's, and slurmd -V agrees), the image is
// listed and described, a second build of the same spec copies the first root (same content
// hash), an image in use by an instance group cannot be deleted, and delete removes both.
func TestImageBuildListDescribeDelete(t *testing.T) {
	parallel(t)
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		t.Skip("mmdebstrap is not installed (scripts/setup.sh installs it)")
	}
	dataDir := t.TempDir() // removes the images (and the apt cache) whatever happens
	servertest.Start(t, server.Options{DataDir: dataDir})
	t.Cleanup(func() {
		// Roots are root's files in a temporary directory: say so if one is left behind.
		if left, _ := filepath.Glob(filepath.Join(dataDir, "images", "ami-*")); len(left) > 0 && !t.Failed() {
			t.Errorf("images left after the test: %v", left)
		}
	})

	start := time.Now()
	out, err := haleCLI(dataDir, "image", "build", "--name", "e2e-bookworm", "--suite", "bookworm", "--no-pytorch", "--packages", "less")
	if err != nil {
		t.Fatal(err)
	}
	cold := time.Since(start)
	id := strings.Fields(out)[0]
	if !image.ValidID(id) || !strings.Contains(out, "Available") {
		t.Fatalf("hale image build printed %q", out)
	}
	m := describeImage(t, dataDir, id)
	root := filepath.Join(dataDir, "images", id, "rootfs")
	if m.Status != image.StatusAvailable || m.Suite != "bookworm" || m.SizeBytes <= 0 || !strings.HasPrefix(m.ContentHash, "sha256:") || m.NoPyTorch != true {
		t.Fatalf("manifest %+v", m)
	}
	// The manifest's versions are the root's: ask dpkg inside it.
	for _, p := range []string{"slurmd", "slurmctld", "munge", "python3", "iproute2", "less"} {
		got, err := exec.Command("chroot", root, "dpkg-query", "-W", "-f", "${Version}", p).Output()
		if err != nil {
			t.Fatalf("dpkg-query %s inside the root: %v", p, err)
		}
		if string(got) != m.Installed[p] {
			t.Errorf("%s: manifest says %q, dpkg inside the root %q", p, m.Installed[p], got)
		}
	}
	if _, ok := m.Installed["python3-torch"]; ok {
		t.Error("--no-pytorch image has python3-torch")
	}
	v, err := exec.Command("chroot", root, "slurmd", "-V").Output()
	upstream := strings.SplitN(m.Installed["slurmd"], "-", 2)[0] // 22.05.8-4+deb12u3 -> 22.05.8
	if err != nil || !strings.Contains(string(v), upstream) {
		t.Errorf("slurmd -V inside the root: %q, %v; the manifest says %s", v, err, m.Installed["slurmd"])
	}
	if _, err := os.Stat(filepath.Join(root, "usr/bin/python3")); err != nil {
		t.Errorf("the root has no python3: %v", err)
	}

	list, err := haleCLI(dataDir, "image", "list")
	if err != nil || !strings.Contains(list, id) || !strings.Contains(list, "e2e-bookworm") || !strings.Contains(list, m.Installed["slurmd"]) {
		t.Fatalf("hale image list: %q, %v", list, err)
	}

	// The same spec again: the archive has not changed, so the root is copied.
	start = time.Now()
	out, err = haleCLI(dataDir, "image", "build", "--name", "e2e-bookworm-again", "--suite", "bookworm", "--no-pytorch", "--packages", "less")
	if err != nil {
		t.Fatal(err)
	}
	cached := time.Since(start)
	id2 := strings.Fields(out)[0]
	m2 := describeImage(t, dataDir, id2)
	if m2.ArchiveRelease != m.ArchiveRelease {
		t.Logf("the archive changed between the builds (%s, %s): the second built afresh", m.ArchiveRelease, m2.ArchiveRelease)
	} else if m2.CopiedFrom != id || m2.ContentHash != m.ContentHash || m2.Installed["slurmd"] != m.Installed["slurmd"] {
		t.Errorf("second build: CopiedFrom %q hash %s slurmd %s; want a copy of %s (%s, %s)", m2.CopiedFrom, m2.ContentHash,
			m2.Installed["slurmd"], id, m.ContentHash, m.Installed["slurmd"])
	}
	t.Logf("bookworm without PyTorch: cold build %.1f s (server says %.1f s), same spec again %.1f s (%.1f s), %d bytes",
		cold.Seconds(), m.BuildSeconds, cached.Seconds(), m2.BuildSeconds, m.SizeBytes)

	// Another server on this one's build cache (hale server --image-cache, as the tests'
	// servers share one): the spec's root comes from the cache, not from mmdebstrap.
	otherDir := t.TempDir()
	servertest.Start(t, server.Options{DataDir: otherDir, ImageCache: filepath.Join(dataDir, "images", "cache")})
	out, err = haleCLI(otherDir, "image", "build", "--name", "e2e-bookworm", "--suite", "bookworm", "--no-pytorch", "--packages", "less")
	if err != nil {
		t.Fatal(err)
	}
	m3 := describeImage(t, otherDir, strings.Fields(out)[0])
	if m3.ArchiveRelease != m.ArchiveRelease {
		t.Logf("the archive changed between the builds (%s, %s): the other server built afresh", m.ArchiveRelease, m3.ArchiveRelease)
	} else if m3.CachedRoot == "" || m3.ContentHash != m.ContentHash {
		t.Errorf("the other server's build: CachedRoot %q hash %s; want the cached root of %s (%s)", m3.CachedRoot, m3.ContentHash, id, m.ContentHash)
	}
	if _, err := haleCLI(otherDir, "image", "delete", m3.ImageID); err != nil {
		t.Error(err)
	}

	// An image a group uses cannot be deleted; the error names the group.
	lc := "s3://sagemaker-e2e/lc/"
	doc := fmt.Sprintf(`{"ClusterName":"uses-image","InstanceGroups":[{"InstanceGroupName":"controller","InstanceType":"ml.c5.xlarge",
		"InstanceCount":1,"ExecutionRole":"arn:aws:iam::123456789012:role/r","ImageId":%q,
		"LifeCycleConfig":{"SourceS3Uri":%q,"OnCreate":"on_create.sh"},"SlurmConfig":{"NodeType":"Controller"}}]}`, id, lc)
	docFile := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(docFile, []byte(doc), 0o644)
	if _, err := haleCLI(dataDir, "create-cluster", "--cli-input-json", "file://"+docFile); err != nil {
		t.Fatal(err)
	}
	if _, err := haleCLI(dataDir, "image", "delete", id); err == nil || !strings.Contains(err.Error(), "ResourceInUse") || !strings.Contains(err.Error(), "uses-image/controller") {
		t.Fatalf("hale image delete of an image in use: %v", err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("the refused delete removed the root: %v", err)
	}
	if _, err := haleCLI(dataDir, "delete-cluster", "--cluster-name", "uses-image"); err != nil {
		t.Fatal(err)
	}
	// With no provider the cluster goes as soon as the reconciler sees the deletion.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := haleCLI(dataDir, "image", "delete", id)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hale image delete after DeleteCluster: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := haleCLI(dataDir, "image", "delete", id2); err != nil {
		t.Fatal(err)
	}
	for _, x := range []string{id, id2} {
		if _, err := os.Stat(filepath.Join(dataDir, "images", x)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("image %s still on disk after delete: %v", x, err)
		}
	}
	if list, err := haleCLI(dataDir, "image", "list"); err != nil || strings.Contains(list, "ami-") {
		t.Errorf("hale image list after the deletes: %q, %v", list, err)
	}
}

// A server whose default image is not built (a machine whose set-up skipped it) still brings a
// default group's node up, on the host's root, and says so in a Warn event naming the directory
// and the command that builds it; DescribeCluster still reports the default image.
func TestDefaultImageMissingFallsBackToHostRoot(t *testing.T) {
	parallel(t)
	missing := t.TempDir()
	o := options(t, t.TempDir())
	o.DefaultImage = missing
	e := startWith(t, o)
	lc := e.script("fallback", "on_create.sh", recordScript)
	ctx := context.Background()
	if _, err := e.SDK.CreateCluster(ctx, &sagemaker.CreateClusterInput{ClusterName: aws.String("fallback"), InstanceGroups: []types.ClusterInstanceGroupSpecification{
		group("controller", "ml.c5.xlarge", 1, types.ClusterSlurmNodeTypeController, lc)}}); err != nil {
		t.Fatal(err)
	}
	d := e.waitStatus("fallback", types.ClusterStatusInservice, time.Minute)
	if g := d.InstanceGroups[0]; aws.ToString(g.CurrentImageId) != image.Default {
		t.Errorf("CurrentImageId %q, want default", aws.ToString(g.CurrentImageId))
	}
	node := aws.ToString(e.nodes("fallback")[0].InstanceId)
	events := e.events("fallback")
	if want := "Instance " + node + " runs on the host's root file system, not on a root of its own: the default image is not built in " + missing; !strings.Contains(events, want) ||
		!strings.Contains(events, "hale image build-default") {
		t.Errorf("events do not say the node runs on the host's root (%q):\n%s", want, events)
	}
	// On the host's root: no overlay over an image, and the host's files are there.
	checkout, _ := filepath.Abs(".")
	out, err := e.onNode(node, "awk '$5 == \"/\" {for (i = 7; i < NF; i++) if ($i == \"-\") print $(i+1)}' /proc/self/mountinfo; test -d "+checkout+" && echo host files")
	root, _ := exec.Command("awk", `$5 == "/" {for (i = 7; i < NF; i++) if ($i == "-") print $(i+1)}`, "/proc/self/mountinfo").Output()
	if err != nil || out != string(root)+"host files\n" {
		t.Errorf("a node on the host's root: %q, %v; want the host's root file system type (%q) and this checkout", out, err, root)
	}
	e.checkNodeProcesses(t, node)
	if _, err := e.SDK.DeleteCluster(ctx, &sagemaker.DeleteClusterInput{ClusterName: aws.String("fallback")}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("fallback", time.Minute)
}
