package lifecycle

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

var bundle = map[string]string{
	"on_create.sh":                 "#!/bin/bash\necho hi\n",
	"lifecycle_script.py":          "print('hi')\n",
	"utils/motd.txt":               "welcome\n",
	"provisioning_parameters.json": `{"version": "1.0.0"}`,
}

func check(t *testing.T, got map[string][]byte) {
	t.Helper()
	if len(got) != len(bundle) {
		t.Fatalf("fetched %d files, want %d: %v", len(got), len(bundle), got)
	}
	for k, v := range bundle {
		if string(got[k]) != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestDirSource(t *testing.T) {
	root := t.TempDir()
	for k, v := range bundle {
		p := filepath.Join(root, "sagemaker-lc", "base-config", k)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(v), 0o644)
	}
	got, err := DirSource{Root: root}.Fetch(context.Background(), "s3://sagemaker-lc/base-config/")
	if err != nil {
		t.Fatal(err)
	}
	check(t, got)
	_, err = DirSource{Root: root}.Fetch(context.Background(), "s3://sagemaker-lc/missing")
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing prefix: %v", err)
	}
	if _, err := (DirSource{Root: root}).Fetch(context.Background(), "s3://sagemaker-lc/../../etc"); err == nil {
		t.Fatal("a prefix escaping the store was served")
	}
}

// TestS3Source fetches a bundle through the AWS SDK's S3 client from an S3 protocol server
// (gofakes3, in memory, over real HTTP).
func TestS3Source(t *testing.T) {
	backend := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer srv.Close()
	cfg := aws.Config{Region: "us-west-2", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")}
	src := NewS3Source(cfg, srv.URL)
	ctx := context.Background()
	if _, err := src.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("sagemaker-lc")}); err != nil {
		t.Fatal(err)
	}
	for k, v := range bundle {
		if _, err := src.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("sagemaker-lc"), Key: aws.String("base-config/" + k), Body: bytes.NewReader([]byte(v))}); err != nil {
			t.Fatal(err)
		}
	}
	src.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("sagemaker-lc"), Key: aws.String("other/x"), Body: bytes.NewReader([]byte("no"))})
	got, err := src.Fetch(ctx, "s3://sagemaker-lc/base-config")
	if err != nil {
		t.Fatal(err)
	}
	check(t, got)
	if _, err := src.Fetch(ctx, "s3://sagemaker-lc/nothing"); err == nil {
		t.Fatal("an empty prefix was served")
	}
}
