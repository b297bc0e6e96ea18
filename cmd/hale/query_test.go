package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestQueryAgainstTheServer runs --query through the whole command against a real server:
// every format, an automatically paginated list, and the exit statuses.
func TestQueryAgainstTheServer(t *testing.T) {
	app := startServer(t)
	must(t, "create-cluster", "--cli-input-json", slurmConfig)
	ids := seedNodes(t, app, "ml-training-cluster", 120)
	describe := []string{"describe-cluster", "--cluster-name", "ml-training-cluster"}

	if got := must(t, append(describe, "--query", "ClusterName", "--output", "text")...); got != "ml-training-cluster\n" {
		t.Errorf("text scalar: %q", got)
	}
	if got := must(t, append(describe, "--query", "ClusterName")...); got != "\"ml-training-cluster\"\n" {
		t.Errorf("json scalar: %q", got)
	}
	if got := must(t, append(describe, "--query=InstanceGroups[].InstanceGroupName", "--output", "text")...); got != "controller\tlogin\tgpu-compute\tcpu-compute\n" {
		t.Errorf("text list: %q", got)
	}
	if got := must(t, append(describe, "--query", "InstanceGroups[0].InstanceGroupName", "--output", "table")...); !strings.Contains(got, "|DescribeCluster|") {
		t.Errorf("table scalar: %q", got)
	}

	// Automatic pagination: json and table query the merged list, text each page.
	list := []string{"list-cluster-nodes", "--cluster-name", "ml-training-cluster", "--page-size", "50", "--query", "ClusterNodeSummaries[].InstanceId"}
	all := decodeList(t, must(t, list...))
	if strings.Join(all, ",") != strings.Join(ids, ",") {
		t.Errorf("json over three pages: %d ids", len(all))
	}
	text := must(t, append(list, "--output", "text")...)
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 3 || strings.Join(strings.Split(strings.Join(lines, "\t"), "\t"), ",") != strings.Join(ids, ",") {
		t.Errorf("text over three pages of 50, 50, 20: %d lines\n%s", len(lines), text)
	}
	if got := must(t, append(list, "--max-items", "2", "--output", "text")...); got != ids[0]+"\t"+ids[1]+"\nNone\n" {
		t.Errorf("text with --max-items prints the query of the resume token as the CLI does: %q", got)
	}
	if got := must(t, "list-cluster-nodes", "--cluster-name", "ml-training-cluster", "--max-items", "2", "--query", "length(ClusterNodeSummaries)"); got != "2\n" {
		t.Errorf("json length: %q", got)
	}

	r := hale(t, append(describe, "--query", "InstanceGroups[")...)
	if r.code != 252 || !strings.Contains(r.stderr, "Bad value for --query InstanceGroups[: ") || r.stdout != "" {
		t.Errorf("bad expression: %+v", r)
	}
	r = hale(t, append(describe, "--query", "abs(ClusterName)")...)
	if r.code != 255 || !strings.Contains(r.stderr, "Bad value for --query abs(ClusterName): ") || r.stdout != "" {
		t.Errorf("expression failing on the response: %+v", r)
	}
	r = hale(t, append(describe, "--query")...)
	if r.code != 252 || !strings.Contains(r.stderr, "argument --query: expected one argument") {
		t.Errorf("--query without a value: %+v", r)
	}
	if h := must(t, "describe-cluster", "help"); !strings.Contains(h, "[--query <value>]") || !strings.Contains(h, "--query (string)") {
		t.Errorf("help lacks --query:\n%s", h)
	}
}

// decodeList parses CLI JSON output that is a list of strings.
func decodeList(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("output is not a JSON list of strings: %v\n%s", err, s)
	}
	return out
}
