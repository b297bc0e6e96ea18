package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAccessKeys creates a restricted key with hale access-key, uses it through the CLI, lists
// and deletes it.
func TestAccessKeys(t *testing.T) {
	app := startServer(t)
	dir := filepath.Dir(app.CredentialsFile)
	must(t, "create-cluster", "--cli-input-json", "file://testdata/01-docs-api-driven-slurm-complete.json")

	creds := filepath.Join(t.TempDir(), "credentials")
	out := must(t, "access-key", "create", "--data-dir", dir, "--principal", "auditor",
		"--actions", "sagemaker:Describe*,sagemaker:List*", "--credentials-file", creds, "--profile", "auditor")
	var created struct {
		AccessKey struct{ AccessKeyId, SecretAccessKey, Principal string }
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.AccessKey.Principal != "auditor" || created.AccessKey.SecretAccessKey == "" {
		t.Fatalf("access-key create printed %q (%v)", out, err)
	}
	if b, _ := os.ReadFile(creds); !strings.Contains(string(b), "[auditor]") || !strings.Contains(string(b), created.AccessKey.AccessKeyId) {
		t.Fatalf("credentials file lacks the profile:\n%s", b)
	}

	// The auditor may describe but not delete.
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	if r := hale(t, "--profile", "auditor", "describe-cluster", "--cluster-name", "ml-training-cluster", "--endpoint-url", app.URL, "--region", "us-west-2"); r.code != 0 {
		t.Fatalf("auditor describe: %d %s", r.code, r.stderr)
	}
	r := hale(t, "--profile", "auditor", "delete-cluster", "--cluster-name", "ml-training-cluster", "--endpoint-url", app.URL, "--region", "us-west-2")
	if r.code != 254 || !strings.Contains(r.stderr, "AccessDeniedException") || !strings.Contains(r.stderr, "auditor is not authorized to perform: sagemaker:DeleteCluster") {
		t.Fatalf("auditor delete: %d %s", r.code, r.stderr)
	}

	list := must(t, "access-key", "list", "--data-dir", dir)
	if !strings.Contains(list, created.AccessKey.AccessKeyId) || !strings.Contains(list, "auditor") || strings.Contains(list, created.AccessKey.SecretAccessKey) {
		t.Fatalf("access-key list:\n%s", list)
	}
	must(t, "access-key", "delete", "--data-dir", dir, created.AccessKey.AccessKeyId)
	r = hale(t, "--profile", "auditor", "describe-cluster", "--cluster-name", "ml-training-cluster", "--endpoint-url", app.URL, "--region", "us-west-2")
	if r.code != 254 || !strings.Contains(r.stderr, "UnrecognizedClientException") {
		t.Fatalf("deleted key still works: %d %s", r.code, r.stderr)
	}
	if r := hale(t, "access-key", "list", "--data-dir", filepath.Join(t.TempDir(), "nothing")); r.code == 0 || !strings.Contains(r.stderr, "no hale database") {
		t.Fatalf("access-key list without a database: %d %s", r.code, r.stderr)
	}
}
