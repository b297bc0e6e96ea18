package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hale image talks to the server's registry; a spec is checked before it is sent, with flags
// overriding --from-file.
func TestImageCommands(t *testing.T) {
	startServer(t)
	if out := must(t, "image", "list"); strings.TrimSpace(out) != "IMAGE ID  NAME  SUITE  SLURM  STATUS  SIZE  CREATED" {
		t.Errorf("image list of an empty registry:\n%q", out)
	}
	if out := must(t, "image", "list", "--output", "json"); strings.TrimSpace(out) != `{"Images":[]}` {
		t.Errorf("image list --output json: %q", out)
	}
	spec := filepath.Join(t.TempDir(), "spec.json")
	os.WriteFile(spec, []byte(`{"Name":"from-file","Suite":"trixie","Packages":["vim"]}`), 0o644)
	// The flag's suite replaces the file's, and is refused before any build starts.
	r := hale(t, "image", "build", "--from-file", spec, "--suite", "jessie")
	if r.code != 252 || !strings.Contains(r.stderr, `Suite "jessie"`) {
		t.Errorf("build --from-file with a bad --suite: %+v", r)
	}
	os.WriteFile(spec, []byte(`{"Name":"from-file","Suite":"trixie","Pakages":["vim"]}`), 0o644)
	if r := hale(t, "image", "build", "--from-file", spec); r.code != 252 || !strings.Contains(r.stderr, "Pakages") {
		t.Errorf("build --from-file with a misspelt member: %+v", r)
	}
	if r := hale(t, "image", "build", "--name", "x", "--suite", "sid"); r.code != 252 || !strings.Contains(r.stderr, `Name "x"`) {
		t.Errorf("build with a short name: %+v", r)
	}
	if r := hale(t, "image", "describe", "ami-00000000000000000"); r.code != 254 || !strings.Contains(r.stderr, "ResourceNotFound") {
		t.Errorf("describe an unknown image: %+v", r)
	}
	if r := hale(t, "image", "delete", "ami-00000000000000000"); r.code != 254 || !strings.Contains(r.stderr, "ResourceNotFound") {
		t.Errorf("delete an unknown image: %+v", r)
	}
}
