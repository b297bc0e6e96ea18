package server_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/smithy-go"
	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/client"
	"github.com/haleproject/hale/internal/image"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
)

// putImage leaves an image in dataDir/images as a finished build does (manifest.json and a
// root), so the server's registry loads it at start.
func putImage(t *testing.T, dataDir, name string, status image.Status) *image.Manifest {
	t.Helper()
	return putImageWith(t, dataDir, name, status, "24.11.5-4")
}

// putImageWith is putImage of an image whose slurmd package has version slurmd.
func putImageWith(t *testing.T, dataDir, name string, status image.Status, slurmd string) *image.Manifest {
	t.Helper()
	m := &image.Manifest{ImageID: image.NewID(), Name: name, Suite: "trixie", Mirror: image.DefaultMirror,
		Packages: image.BasePackages, Installed: map[string]string{"slurmd": slurmd}, SizeBytes: 123,
		ContentHash: "sha256:" + strings.Repeat("ab", 32), SpecKey: "sha256:k", CreatedAt: time.Now().UTC().Truncate(time.Second), Status: status}
	dir := filepath.Join(dataDir, "images", m.ImageID)
	if err := os.MkdirAll(filepath.Join(dir, "rootfs", "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return m
}

// wantValidation checks err is a ValidationException whose message holds every part.
func wantValidation(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" {
		t.Fatalf("%s: %v, want a ValidationException", what, err)
	}
	for _, p := range parts {
		if !strings.Contains(ae.ErrorMessage(), p) {
			t.Errorf("%s: message %q lacks %q", what, ae.ErrorMessage(), p)
		}
	}
}

// An instance group's ImageId must name an Available image of the server, or "default", on
// CreateCluster, UpdateCluster and UpdateClusterSoftware; DescribeCluster reports each group's
// CurrentImageId and DesiredImageId; an image a group uses cannot be deleted.
func TestImageIdValidationAndImageEndpoints(t *testing.T) {
	dataDir := t.TempDir()
	trixie := putImage(t, dataDir, "slurm-24.11", image.StatusAvailable)
	spare := putImage(t, dataDir, "spare", image.StatusAvailable)
	broken := putImage(t, dataDir, "broken", image.StatusFailed)
	e := servertest.Start(t, server.Options{DataDir: dataDir})
	ctx := servertest.Ctx(t)

	var in sagemaker.CreateClusterInput
	if err := unmarshalSDK(readFile(t, "../../examples/cluster.json"), &in); err != nil {
		t.Fatal(err)
	}
	in.ClusterName = aws.String("imaged")
	unknown := "ami-00000000000000001"
	in.InstanceGroups[2].ImageId = aws.String(unknown)        // gpu
	in.InstanceGroups[3].ImageId = aws.String(broken.ImageID) // cpu
	in.InstanceGroups[0].ImageId = aws.String(trixie.ImageID) // controller
	in.InstanceGroups[1].ImageId = aws.String(image.Default)  // login
	_, err := e.SDK.CreateCluster(ctx, &in)
	wantValidation(t, "CreateCluster with an unknown and a failed image", err, "2 validation errors",
		"Value '"+unknown+"' at 'instanceGroups.3.member.imageId'", "has no image "+unknown,
		"Value '"+broken.ImageID+"' at 'instanceGroups.4.member.imageId'", "failed to build")
	if out, _ := e.SDK.ListClusters(ctx, &sagemaker.ListClustersInput{}); len(out.ClusterSummaries) != 0 {
		t.Fatalf("a refused CreateCluster stored a cluster: %+v", out.ClusterSummaries)
	}

	in.InstanceGroups[2].ImageId = aws.String(trixie.ImageID)
	in.InstanceGroups[3].ImageId = nil
	if _, err := e.SDK.CreateCluster(ctx, &in); err != nil {
		t.Fatalf("CreateCluster with known images: %v", err)
	}
	dc, err := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: in.ClusterName})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"controller": trixie.ImageID, "login": "default", "gpu": trixie.ImageID, "cpu": "default"}
	for _, g := range dc.InstanceGroups {
		if aws.ToString(g.CurrentImageId) != want[*g.InstanceGroupName] || aws.ToString(g.DesiredImageId) != want[*g.InstanceGroupName] {
			t.Errorf("group %s: CurrentImageId %q DesiredImageId %q, want %q", *g.InstanceGroupName,
				aws.ToString(g.CurrentImageId), aws.ToString(g.DesiredImageId), want[*g.InstanceGroupName])
		}
	}

	markInService(t, e, "imaged")
	_, err = e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: in.ClusterName, InstanceGroups: []types.ClusterInstanceGroupSpecification{{
		InstanceGroupName: aws.String("extra"), InstanceType: types.ClusterInstanceTypeMlT3Medium, InstanceCount: aws.Int32(1),
		ExecutionRole: in.InstanceGroups[3].ExecutionRole, LifeCycleConfig: in.InstanceGroups[3].LifeCycleConfig,
		ImageId: aws.String(unknown), SlurmConfig: &types.ClusterSlurmConfig{NodeType: types.ClusterSlurmNodeTypeCompute, PartitionNames: []string{"extra"}},
	}}})
	wantValidation(t, "UpdateCluster adding a group with an unknown image", err, "'instanceGroups.1.member.imageId'", unknown)
	_, err = e.SDK.UpdateClusterSoftware(ctx, &sagemaker.UpdateClusterSoftwareInput{ClusterName: in.ClusterName, ImageId: aws.String(unknown)})
	wantValidation(t, "UpdateClusterSoftware to an unknown image", err, "Value '"+unknown+"' at 'imageId'", "has no image")

	// hale image list / describe / delete, through the server's endpoints.
	t.Setenv("HALE_DATA_DIR", dataDir)
	c, err := client.New(ctx, client.Options{Profile: "hale"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := c.Get(ctx, server.ImagesPath, nil)
	var list server.ImageList
	if err != nil || json.Unmarshal(body, &list) != nil || len(list.Images) != 3 {
		t.Fatalf("list: %s, %v", body, err)
	}
	body, err = c.Get(ctx, server.ImagePath+trixie.ImageID, nil)
	var d server.ImageDescription
	if err != nil || json.Unmarshal(body, &d) != nil || d.Image.ContentHash != trixie.ContentHash || d.Image.Installed["slurmd"] != "24.11.5-4" {
		t.Fatalf("describe: %s, %v", body, err)
	}
	if _, err := c.Get(ctx, server.ImagePath+unknown, nil); !api.IsCode(err, api.CodeResourceNotFound) {
		t.Errorf("describe unknown: %v", err)
	}
	del := func(id string) error {
		b, _ := json.Marshal(server.ImageDelete{ImageID: id})
		_, err := c.Post(ctx, server.ImagesDeletePath, b)
		return err
	}
	err = del(trixie.ImageID)
	if !api.IsCode(err, api.CodeResourceInUse) || !strings.Contains(err.Error(), "imaged/controller, imaged/gpu") {
		t.Fatalf("delete an image in use: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "images", trixie.ImageID, "rootfs")); err != nil {
		t.Errorf("a refused delete removed the image's root: %v", err)
	}
	if err := del(spare.ImageID); err != nil {
		t.Fatalf("delete an unused image: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "images", spare.ImageID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the deleted image's directory is still there: %v", err)
	}
	if err := del(spare.ImageID); !api.IsCode(err, api.CodeResourceNotFound) {
		t.Errorf("delete it again: %v", err)
	}
	// A new cluster cannot take the deleted image.
	in.ClusterName = aws.String("late")
	in.InstanceGroups[3].ImageId = aws.String(spare.ImageID)
	_, err = e.SDK.CreateCluster(ctx, &in)
	wantValidation(t, "CreateCluster with a deleted image", err, "'instanceGroups.4.member.imageId'", spare.ImageID)

	// A build with a bad spec is refused before anything runs.
	if _, err := c.Post(ctx, server.ImagesPath, []byte(`{"Name":"ok-name","Suite":"jessie"}`)); !api.IsCode(err, api.CodeValidationException) || !strings.Contains(err.Error(), "jessie") {
		t.Errorf("build with an unknown suite: %v", err)
	}
	if _, err := c.Post(ctx, server.ImagesPath, []byte(`{"Name":"slurm-24.11","Suite":"trixie"}`)); !api.IsCode(err, api.CodeValidationException) || !strings.Contains(err.Error(), "taken") {
		t.Errorf("build with a taken name: %v", err)
	}
	if _, err := c.Post(ctx, server.ImagesPath, []byte(`{"Name":"x-name","Suite":"sid","Pkgs":["a"]}`)); !api.IsCode(err, api.CodeValidationException) {
		t.Errorf("build with an unknown member: %v", err)
	}
}

// The static provider runs each host's own operating system: a group's ImageId other than
// "default" is a ValidationException naming the group, on CreateCluster and UpdateClusterSoftware,
// and nothing is stored.
func TestStaticProviderRefusesImages(t *testing.T) {
	dataDir := t.TempDir()
	img := putImage(t, dataDir, "slurm-24.11", image.StatusAvailable)
	key := filepath.Join(dataDir, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out) // a key for a host on loopback where nothing listens
	}
	hosts := filepath.Join(dataDir, "hosts.json")
	if err := os.WriteFile(hosts, []byte(`{"Hosts": [{"Address": "127.0.0.1", "Port": 1, "KeyFile": "`+key+`", "InstanceType": "ml.c5.xlarge"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	e := servertest.Start(t, server.Options{DataDir: dataDir, Provider: "static", Hosts: hosts, AgentListen: "127.0.0.1:0",
		KnownHosts: filepath.Join(dataDir, "known_hosts"), AcceptNewHostKeys: true})
	ctx := servertest.Ctx(t)
	var in sagemaker.CreateClusterInput
	if err := unmarshalSDK(readFile(t, "../../examples/cluster.json"), &in); err != nil {
		t.Fatal(err)
	}
	in.ClusterName = aws.String("own")
	in.InstanceGroups[2].ImageId = aws.String(img.ImageID)
	_, err := e.SDK.CreateCluster(ctx, &in)
	wantValidation(t, "CreateCluster with an image on the static provider", err,
		"Value '"+img.ImageID+"' at 'instanceGroups.3.member.imageId'", "static provider runs each host's own operating system")
	if out, _ := e.SDK.ListClusters(ctx, &sagemaker.ListClustersInput{}); len(out.ClusterSummaries) != 0 {
		t.Fatalf("a refused CreateCluster stored a cluster: %+v", out.ClusterSummaries)
	}
	in.InstanceGroups[2].ImageId = aws.String(image.Default)
	if _, err := e.SDK.CreateCluster(ctx, &in); err != nil {
		t.Fatalf("CreateCluster with the default image on the static provider: %v", err)
	}
	markInService(t, e, "own")
	_, err = e.SDK.UpdateClusterSoftware(ctx, &sagemaker.UpdateClusterSoftwareInput{ClusterName: in.ClusterName, ImageId: aws.String(img.ImageID)})
	wantValidation(t, "UpdateClusterSoftware to an image on the static provider", err, "Value '"+img.ImageID+"' at 'imageId'", "static provider")
}

// The groups of a Slurm cluster run one Slurm release: CreateCluster, UpdateCluster (a new
// group) and UpdateClusterSoftware (some groups only) that would mix images of two releases
// are a ValidationException naming the groups and releases, and store nothing; moving every
// group at once is accepted.
func TestOneSlurmReleasePerCluster(t *testing.T) {
	dataDir := t.TempDir()
	trixie := putImageWith(t, dataDir, "slurm-24.11", image.StatusAvailable, "24.11.5-4+deb13u1")
	trixie2 := putImageWith(t, dataDir, "slurm-24.11-again", image.StatusAvailable, "24.11.6-1")
	bookworm := putImageWith(t, dataDir, "slurm-22.05", image.StatusAvailable, "22.05.8-4+deb12u3")
	e := servertest.Start(t, server.Options{DataDir: dataDir})
	ctx := servertest.Ctx(t)
	var in sagemaker.CreateClusterInput
	if err := unmarshalSDK(readFile(t, "../../examples/cluster.json"), &in); err != nil {
		t.Fatal(err)
	}
	in.ClusterName = aws.String("mixed")
	for i := range in.InstanceGroups {
		in.InstanceGroups[i].ImageId = aws.String(trixie.ImageID)
	}
	in.InstanceGroups[2].ImageId = aws.String(bookworm.ImageID) // gpu
	_, err := e.SDK.CreateCluster(ctx, &in)
	wantValidation(t, "CreateCluster mixing Slurm 22.05 and 24.11", err, "must run one Slurm release",
		"Slurm 22.05: gpu ("+bookworm.ImageID+")", "Slurm 24.11: ", "controller ("+trixie.ImageID+")", "Incompatible versions of client and server code")
	if out, _ := e.SDK.ListClusters(ctx, &sagemaker.ListClustersInput{}); len(out.ClusterSummaries) != 0 {
		t.Fatalf("a refused CreateCluster stored a cluster: %+v", out.ClusterSummaries)
	}
	in.InstanceGroups[2].ImageId = aws.String(trixie2.ImageID) // another 24.11 point release: one release
	if _, err := e.SDK.CreateCluster(ctx, &in); err != nil {
		t.Fatalf("CreateCluster on one Slurm release: %v", err)
	}
	markInService(t, e, "mixed")
	_, err = e.SDK.UpdateClusterSoftware(ctx, &sagemaker.UpdateClusterSoftwareInput{ClusterName: in.ClusterName, ImageId: aws.String(bookworm.ImageID),
		InstanceGroups: []types.UpdateClusterSoftwareInstanceGroupSpecification{{InstanceGroupName: aws.String("gpu")}}})
	wantValidation(t, "UpdateClusterSoftware of one group to another Slurm release", err, "Slurm 22.05: gpu ("+bookworm.ImageID+")", "Slurm 24.11: controller")
	_, err = e.SDK.UpdateCluster(ctx, &sagemaker.UpdateClusterInput{ClusterName: in.ClusterName, InstanceGroups: []types.ClusterInstanceGroupSpecification{{
		InstanceGroupName: aws.String("extra"), InstanceType: types.ClusterInstanceTypeMlT3Medium, InstanceCount: aws.Int32(1),
		ExecutionRole: in.InstanceGroups[3].ExecutionRole, LifeCycleConfig: in.InstanceGroups[3].LifeCycleConfig,
		ImageId: aws.String(bookworm.ImageID), SlurmConfig: &types.ClusterSlurmConfig{NodeType: types.ClusterSlurmNodeTypeCompute, PartitionNames: []string{"extra"}},
	}}})
	wantValidation(t, "UpdateCluster adding a group of another Slurm release", err, "Slurm 22.05: extra ("+bookworm.ImageID+")")
	dc, err := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: in.ClusterName})
	if err != nil || dc.ClusterStatus != types.ClusterStatusInservice || len(dc.InstanceGroups) != 4 {
		t.Fatalf("after the refused updates: %v, %+v", err, dc)
	}
	for _, g := range dc.InstanceGroups {
		if g.SoftwareUpdateStatus != "" && g.SoftwareUpdateStatus != types.SoftwareUpdateStatusSucceeded {
			t.Errorf("group %s has an update %s after a refused UpdateClusterSoftware", *g.InstanceGroupName, g.SoftwareUpdateStatus)
		}
	}
	// Every group at once to 22.05: one release after the update.
	if _, err := e.SDK.UpdateClusterSoftware(ctx, &sagemaker.UpdateClusterSoftwareInput{ClusterName: in.ClusterName, ImageId: aws.String(bookworm.ImageID)}); err != nil {
		t.Errorf("UpdateClusterSoftware of every group to 22.05: %v", err)
	}
}
