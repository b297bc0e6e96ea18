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

	// The profile got the server's region and endpoint in the config file beside it.
	conf, _ := os.ReadFile(filepath.Join(filepath.Dir(creds), "config"))
	if !strings.Contains(string(conf), "[profile auditor]") || !strings.Contains(string(conf), app.URL) {
		t.Fatalf("config file beside the credentials:\n%s", conf)
	}
	// An existing profile is never replaced silently.
	if r := hale(t, "access-key", "create", "--data-dir", dir, "--principal", "auditor", "--credentials-file", creds); r.code == 0 || !strings.Contains(r.stderr, "already has a profile \"auditor\"") {
		t.Fatalf("second create over the same profile: %d %s", r.code, r.stderr)
	}
	if r := hale(t, "access-key", "create", "--data-dir", dir, "--principal", "typo", "--actions", "sagemaker:DescribeClutser"); r.code == 0 || !strings.Contains(r.stderr, "matches no SageMaker cluster operation") {
		t.Fatalf("misspelt action: %d %s", r.code, r.stderr)
	}

	// The auditor may describe but not delete, with nothing but its profile.
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(filepath.Dir(creds), "config"))
	if r := hale(t, "--profile", "auditor", "describe-cluster", "--cluster-name", "ml-training-cluster"); r.code != 0 {
		t.Fatalf("auditor describe: %d %s", r.code, r.stderr)
	}
	r := hale(t, "--profile", "auditor", "delete-cluster", "--cluster-name", "ml-training-cluster")
	if r.code != 254 || !strings.Contains(r.stderr, "AccessDeniedException") || !strings.Contains(r.stderr, "auditor is not authorized to perform: sagemaker:DeleteCluster") {
		t.Fatalf("auditor delete: %d %s", r.code, r.stderr)
	}

	list := must(t, "access-key", "list", "--data-dir", dir)
	if !strings.Contains(list, created.AccessKey.AccessKeyId) || !strings.Contains(list, "auditor") || strings.Contains(list, created.AccessKey.SecretAccessKey) {
		t.Fatalf("access-key list:\n%s", list)
	}
	must(t, "access-key", "delete", "--data-dir", dir, created.AccessKey.AccessKeyId)
	r = hale(t, "--profile", "auditor", "describe-cluster", "--cluster-name", "ml-training-cluster")
	if r.code != 254 || !strings.Contains(r.stderr, "UnrecognizedClientException") {
		t.Fatalf("deleted key still works: %d %s", r.code, r.stderr)
	}
	if r := hale(t, "access-key", "list", "--data-dir", filepath.Join(t.TempDir(), "nothing")); r.code == 0 || !strings.Contains(r.stderr, "no hale database") {
		t.Fatalf("access-key list without a database: %d %s", r.code, r.stderr)
	}
}
