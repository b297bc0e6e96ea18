package main

import (
	"strings"
	"testing"
)

// hale repairs list|describe reach the server's repair history: a cluster without repairs says
// so, an unknown repair is ResourceNotFound, and the required flags are named.
func TestRepairsHistoryCommands(t *testing.T) {
	startServer(t)
	must(t, "create-cluster", "--cli-input-json", "file://testdata/01-docs-api-driven-slurm-complete.json")
	if out := must(t, "repairs", "list", "--cluster-name", "ml-training-cluster"); strings.TrimSpace(out) != "No repairs of ml-training-cluster." {
		t.Errorf("repairs list of a cluster without repairs: %q", out)
	}
	if out := must(t, "repairs", "list", "--cluster-name", "ml-training-cluster", "--output", "json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("repairs list --output json: %q", out)
	}
	if r := hale(t, "repairs", "describe", "--cluster-name", "ml-training-cluster", "--repair-id", "repair-000000000000"); r.code != 254 || !strings.Contains(r.stderr, "ResourceNotFound") {
		t.Errorf("describe an unknown repair: %+v", r)
	}
	if r := hale(t, "repairs", "describe", "--cluster-name", "ml-training-cluster"); r.code != 2 || !strings.Contains(r.stderr, "--repair-id") {
		t.Errorf("describe without --repair-id: %+v", r)
	}
	if r := hale(t, "repairs", "list", "--cluster-name", "nope"); r.code != 254 || !strings.Contains(r.stderr, "ResourceNotFound") {
		t.Errorf("list of an unknown cluster: %+v", r)
	}
}
