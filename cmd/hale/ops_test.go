package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/client"
	"github.com/haleproject/hale/internal/awscli"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/store"
)

// These tests run the real CLI in-process against a real hale server started in-process, found
// the way a user finds it: through the AWS shared files the server writes.

// startServer starts a hale server in a temporary data directory and points the CLI at it
// through AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE, with every other AWS setting of the
// test's environment cleared.
func startServer(t *testing.T) *server.App {
	t.Helper()
	app, err := server.Start(server.Options{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(), CheckResponses: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	for _, k := range []string{"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
		"AWS_ENDPOINT_URL_SAGEMAKER", "AWS_DEFAULT_OUTPUT", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("HALE_DATA_DIR", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", app.CredentialsFile)
	t.Setenv("AWS_CONFIG_FILE", app.ConfigFile)
	return app
}

// result is what one CLI run printed and its exit status.
type result struct {
	stdout, stderr string
	code           int
}

// hale runs the root command with args, printing a returned error to stderr as main does.
func hale(t *testing.T, args ...string) result {
	t.Helper()
	root := newRootCommand()
	var out, errb bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.Execute()
	code := 0
	if err != nil {
		fmt.Fprintln(&errb, err)
		code = exitCode(err)
	}
	return result{out.String(), errb.String(), code}
}

// must runs the CLI and fails the test unless it exits 0.
func must(t *testing.T, args ...string) string {
	t.Helper()
	r := hale(t, args...)
	if r.code != 0 {
		t.Fatalf("hale %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// decode parses CLI JSON output.
func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, s)
	}
	return m
}

const slurmConfig = "file://testdata/01-docs-api-driven-slurm-complete.json"

func TestCreateClusterFromRealConfig(t *testing.T) {
	startServer(t)
	out := decode(t, must(t, "create-cluster", "--cli-input-json", slurmConfig))
	arn, _ := out["ClusterArn"].(string)
	if !strings.HasPrefix(arn, "arn:aws:sagemaker:us-west-2:") {
		t.Fatalf("ClusterArn %q", arn)
	}
	// An option given explicitly overrides the same member of --cli-input-json.
	must(t, "create-cluster", "--cli-input-json", slurmConfig, "--cluster-name", "override")
	d := decode(t, must(t, "describe-cluster", "--cluster-name", "override"))
	if d["ClusterName"] != "override" || len(d["InstanceGroups"].([]any)) != 4 {
		t.Fatalf("describe-cluster override: %v", d)
	}

	l := decode(t, must(t, "list-clusters"))
	var names []string
	for _, s := range l["ClusterSummaries"].([]any) {
		names = append(names, s.(map[string]any)["ClusterName"].(string))
	}
	if strings.Join(names, ",") != "ml-training-cluster,override" {
		t.Fatalf("list-clusters: %v", names)
	}
	if _, ok := l["NextToken"]; ok {
		t.Error("a merged list has no NextToken")
	}
}

func TestDescribeClusterPrintsTheServersResponse(t *testing.T) {
	startServer(t)
	must(t, "create-cluster", "--cli-input-json", slurmConfig)
	got := must(t, "describe-cluster", "--cluster-name", "ml-training-cluster")

	c, err := client.New(context.Background(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := c.Call(context.Background(), "DescribeCluster", []byte(`{"ClusterName":"ml-training-cluster"}`))
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Indent(&want, bytes.TrimSpace(raw), "", "    "); err != nil {
		t.Fatal(err)
	}
	want.WriteString("\n")
	if got != want.String() {
		t.Fatalf("describe-cluster output is not the response re-indented:\n%s\nwant:\n%s", got, want.String())
	}
	if !strings.Contains(got, `"CreationTime": 1`) {
		t.Errorf("timestamps must stay epoch seconds:\n%s", got)
	}
}

func TestTags(t *testing.T) {
	startServer(t)
	arn := decode(t, must(t, "create-cluster", "--cli-input-json", slurmConfig))["ClusterArn"].(string)
	must(t, "add-tags", "--resource-arn", arn, "--tags", "Key=team,Value=llm", "Key=env,Value=dev")
	tags := must(t, "list-tags", "--resource-arn", arn)
	for _, want := range []string{`"Key": "team"`, `"Value": "llm"`, `"Key": "env"`, `"Key": "Project"`} {
		if !strings.Contains(tags, want) {
			t.Errorf("list-tags lacks %s:\n%s", want, tags)
		}
	}
	must(t, "delete-tags", "--resource-arn", arn, "--tag-keys", "team")
	tags = must(t, "list-tags", "--resource-arn", arn)
	if strings.Contains(tags, "team") || !strings.Contains(tags, "env") {
		t.Errorf("after delete-tags --tag-keys team:\n%s", tags)
	}
	// Shorthand keys are checked against the model like JSON members.
	r := hale(t, "add-tags", "--resource-arn", arn, "--tags", "Key=a,Value=b", "Key=c")
	if r.code != 252 || !strings.Contains(r.stderr, `Missing required parameter in Tags[1]: "Value"`) {
		t.Errorf("shorthand missing Value: %+v", r)
	}
}

// seedNodes inserts n Running nodes into the cluster directly: this build has no provider
// that launches machines.
func seedNodes(t *testing.T, app *server.App, cluster string, n int) []string {
	t.Helper()
	var ids []string
	err := app.Store.Write(context.Background(), func(tx store.Tx) error {
		c, err := tx.Cluster(cluster)
		if err != nil {
			return err
		}
		launch := time.Now().Add(-time.Hour)
		for i := range n {
			id := fmt.Sprintf("i-%017x", 0xabc000+i)
			ids = append(ids, id)
			if err := tx.InsertNode(&store.Node{
				ClusterID: c.ID, InstanceID: id, LogicalID: fmt.Sprintf("gpu-compute-%d", i), GroupName: "gpu-compute",
				InstanceType: "ml.p4d.24xlarge", Status: api.ClusterInstanceStatusRunning,
				LaunchTime: launch.Add(time.Duration(i) * time.Second),
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func nodeIDs(t *testing.T, out string) []string {
	t.Helper()
	var ids []string
	for _, s := range decode(t, out)["ClusterNodeSummaries"].([]any) {
		ids = append(ids, s.(map[string]any)["InstanceId"].(string))
	}
	return ids
}

func TestListClusterNodesPagination(t *testing.T) {
	app := startServer(t)
	must(t, "create-cluster", "--cli-input-json", slurmConfig)
	all := seedNodes(t, app, "ml-training-cluster", 250)

	// --max-results: exactly one call, printed as it came, NextToken included.
	one := must(t, "list-cluster-nodes", "--cluster-name", "ml-training-cluster", "--max-results", "10")
	if ids := nodeIDs(t, one); len(ids) != 10 || ids[0] != all[0] {
		t.Fatalf("--max-results 10 gave %d nodes", len(ids))
	}
	if tok, _ := decode(t, one)["NextToken"].(string); tok == "" {
		t.Fatal("--max-results 10 must print the NextToken")
	}
	// --next-token continues from it, again one call.
	tok := decode(t, one)["NextToken"].(string)
	two := must(t, "list-cluster-nodes", "--cluster-name", "ml-training-cluster", "--max-results", "10", "--next-token", tok)
	if ids := nodeIDs(t, two); len(ids) != 10 || ids[0] != all[10] {
		t.Fatalf("--next-token: %v", ids)
	}

	// No paging options: every page, merged, no NextToken.
	merged := must(t, "list-cluster-nodes", "--cluster-name", "ml-training-cluster")
	if ids := nodeIDs(t, merged); strings.Join(ids, ",") != strings.Join(all, ",") {
		t.Fatalf("merged list has %d nodes, want 250 in launch order", len(ids))
	}
	if _, ok := decode(t, merged)["NextToken"]; ok {
		t.Fatal("the merged response must not carry NextToken")
	}

	// --page-size only changes the calls: five or six of them, one merged answer.
	r := hale(t, "list-cluster-nodes", "--cluster-name", "ml-training-cluster", "--page-size", "50", "--debug")
	if r.code != 0 || len(nodeIDs(t, r.stdout)) != 250 {
		t.Fatalf("--page-size 50: %d %s", r.code, r.stderr)
	}
	if n := strings.Count(r.stderr, "X-Amz-Target: SageMaker.ListClusterNodes"); n < 5 || n > 6 {
		t.Errorf("--page-size 50 made %d calls", n)
	}

	// --no-paginate: the first page only (the server's default page size), with its NextToken.
	page := must(t, "list-cluster-nodes", "--cluster-name", "ml-training-cluster", "--no-paginate")
	if ids := nodeIDs(t, page); len(ids) == 0 || len(ids) >= 250 || decode(t, page)["NextToken"] == nil {
		t.Errorf("--no-paginate gave %d nodes", len(ids))
	}

	// --max-items and --starting-token, resuming inside a page.
	first := must(t, "list-cluster-nodes", "--cluster-name", "ml-training-cluster", "--max-items", "25")
	resume, _ := decode(t, first)["NextToken"].(string)
	rest := must(t, "list-cluster-nodes", "--cluster-name", "ml-training-cluster", "--max-items", "200", "--starting-token", resume)
	got := append(nodeIDs(t, first), nodeIDs(t, rest)...)
	if strings.Join(got, ",") != strings.Join(all[:225], ",") {
		t.Fatalf("--max-items 25 then --starting-token: %d nodes, not the first 225 in order", len(got))
	}
	r = hale(t, "list-cluster-nodes", "--cluster-name", "ml-training-cluster", "--no-paginate", "--max-items", "3")
	if r.code != 252 || !strings.Contains(r.stderr, "Cannot specify --no-paginate along with pagination arguments: --max-items") {
		t.Errorf("--no-paginate --max-items: %+v", r)
	}
}

func TestBatchDeleteClusterNodesPartialFailure(t *testing.T) {
	app := startServer(t)
	must(t, "create-cluster", "--cli-input-json", slurmConfig)
	ids := seedNodes(t, app, "ml-training-cluster", 2)
	unknown := "i-0123456789abcdef0"
	out := decode(t, must(t, "batch-delete-cluster-nodes", "--cluster-name", "ml-training-cluster", "--node-ids", ids[0], unknown))
	if s := out["Successful"].([]any); len(s) != 1 || s[0] != ids[0] {
		t.Errorf("Successful: %v", out)
	}
	failed := out["Failed"].([]any)
	if len(failed) != 1 || failed[0].(map[string]any)["NodeId"] != unknown || failed[0].(map[string]any)["Code"] != "NodeIdNotFound" {
		t.Errorf("Failed: %v", out)
	}
}

func TestServiceErrorIsPrintedAsTheAWSCLIDoes(t *testing.T) {
	startServer(t)
	groups := `[{"InstanceGroupName":"workers","InstanceType":"ml.p4d.24xlarge","InstanceCount":7000,
		"ExecutionRole":"arn:aws:iam::111122223333:role/HyperPodRole",
		"LifeCycleConfig":{"SourceS3Uri":"s3://sagemaker-lifecycle-example/src/","OnCreate":"on_create.sh"}}]`
	r := hale(t, "create-cluster", "--cluster-name", "big", "--instance-groups", groups)
	if r.code != 254 {
		t.Fatalf("exit %d, want 254\n%s", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "\nAn error occurred (ValidationException) when calling the CreateCluster operation: ") ||
		!strings.Contains(r.stderr, "instanceCount") {
		t.Fatalf("stderr:\n%q", r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout: %q", r.stdout)
	}
	r = hale(t, "describe-cluster", "--cluster-name", "nope")
	if r.code != 254 || !strings.Contains(r.stderr, "An error occurred (ResourceNotFound) when calling the DescribeCluster operation: ") {
		t.Fatalf("%+v", r)
	}
}

func TestParameterErrors(t *testing.T) {
	startServer(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"create-cluster", "--cli-input-json", "file://testdata/17-skypilot-blog-eks-resilienceconfig-heredoc.json"},
			[]string{"Parameter validation failed:", `Unknown parameter in input: "ResilienceConfig", must be one of: ClusterName, InstanceGroups,`}},
		{[]string{"create-cluster", "--cli-input-json", "file://testdata/05-docs-vpc-example-trailing-comma.json"},
			[]string{"Error parsing parameter 'cli-input-json': Invalid JSON received from file://testdata/05-docs-vpc-example-trailing-comma.json", "line 17 column 5"}},
		{[]string{"create-cluster", "--cluster-name", "x", "--vpc-config", `{"Subnets": [}`},
			[]string{"Error parsing parameter '--vpc-config': Invalid JSON received", `JSON received: {"Subnets": [}`}},
		{[]string{"describe-cluster"}, []string{`Missing required parameter in input: "ClusterName"`}},
		{[]string{"create-cluster", "--cluster-name", "x", "--instance-groups", `[{"InstanceGroupName": "g", "InstanceCount": "1", "Bogus": 1}]`},
			[]string{`Missing required parameter in InstanceGroups[0]: "ExecutionRole"`,
				`Unknown parameter in InstanceGroups[0]: "Bogus"`,
				"Invalid type for parameter InstanceGroups[0].InstanceCount, value: 1, type: <class 'str'>, valid types: <class 'int'>"}},
		{[]string{"list-clusters", "--bogus", "x"}, []string{"Unknown options: --bogus, x"}},
		{[]string{"describe-cluster", "--cluster-name"}, []string{"argument --cluster-name: expected one argument"}},
		{[]string{"list-clusters", "--max-results", "ten"}, []string{"invalid literal for int() with base 10: 'ten'"}},
		{[]string{"list-clusters", "--creation-time-after", "yesterday"}, []string{"Invalid type for parameter CreationTimeAfter, value: yesterday"}},
		{[]string{"list-clusters", "--output", "yaml"}, []string{"argument --output: Invalid choice"}},
		{[]string{"create-cluster", "--cli-input-json", "file://testdata/missing.json"}, []string{"Unable to load paramfile file://testdata/missing.json"}},
	} {
		r := hale(t, tc.args...)
		if r.code != 252 {
			t.Errorf("%v: exit %d, want 252\n%s", tc.args, r.code, r.stderr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", tc.args, w, r.stderr)
			}
		}
	}
}

func TestOtherFailuresExit255(t *testing.T) {
	startServer(t)
	r := hale(t, "list-clusters", "--endpoint-url", "http://127.0.0.1:1")
	if r.code != 255 || !strings.Contains(r.stderr, `Could not connect to the endpoint URL: "http://127.0.0.1:1/"`) {
		t.Errorf("connection refused: %+v", r)
	}
	r = hale(t, "list-clusters", "--profile", "nobody")
	if r.code != 255 || !strings.Contains(r.stderr, "The config profile (nobody) could not be found") {
		t.Errorf("unknown profile: %+v", r)
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	r = hale(t, "list-clusters")
	if r.code != 255 || !strings.Contains(r.stderr, "Unable to locate credentials") {
		t.Errorf("no credentials: %+v", r)
	}
}

func TestHaleDataDirAlone(t *testing.T) {
	app := startServer(t)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("HALE_DATA_DIR", filepath.Dir(app.CredentialsFile))
	if out := must(t, "list-clusters"); !strings.Contains(out, `"ClusterSummaries": []`) {
		t.Errorf("list-clusters: %s", out)
	}
}

func TestRequestEncoding(t *testing.T) {
	startServer(t)
	must(t, "create-cluster", "--cli-input-json", slurmConfig)
	r := hale(t, "list-cluster-nodes", "--cluster-name", "ml-training-cluster", "--include-node-logical-ids",
		"--creation-time-after", "2020-01-01", "--creation-time-before", "2030-01-01T00:00:00Z", "--sort-by", "NAME", "--debug")
	if r.code != 0 {
		t.Fatalf("%+v", r)
	}
	for _, want := range []string{`"IncludeNodeLogicalIds":true`, `"CreationTimeAfter":1577836800`, `"CreationTimeBefore":1893456000`, `"SortBy":"NAME"`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("request lacks %s:\n%s", want, r.stderr)
		}
	}
	r = hale(t, "list-cluster-nodes", "--cluster-name", "ml-training-cluster", "--no-include-node-logical-ids", "--debug")
	if !strings.Contains(r.stderr, `"IncludeNodeLogicalIds":false`) {
		t.Errorf("--no-include-node-logical-ids:\n%s", r.stderr)
	}
}

func TestOutputFormats(t *testing.T) {
	startServer(t)
	must(t, "create-cluster", "--cli-input-json", slurmConfig)
	table := must(t, "describe-cluster", "--cluster-name", "ml-training-cluster", "--output", "table")
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if !strings.Contains(lines[1], "DescribeCluster") || !strings.Contains(table, "|  ClusterName   |  ml-training-cluster") ||
		!strings.Contains(table, "InstanceGroups") {
		t.Fatalf("table:\n%s", table)
	}
	for _, l := range lines {
		if len(l) != len(lines[0]) {
			t.Fatalf("ragged table line %q:\n%s", l, table)
		}
	}
	text := must(t, "list-clusters", "--output", "text")
	if !strings.HasPrefix(text, "CLUSTERSUMMARIES\tarn:aws:sagemaker:") {
		t.Errorf("text:\n%s", text)
	}
}

func TestSkeleton(t *testing.T) {
	startServer(t)
	out := decode(t, must(t, "create-cluster", "--generate-cli-skeleton"))
	for _, m := range api.Shapes["CreateClusterRequest"].Members {
		if _, ok := out[m.Name]; !ok {
			t.Errorf("skeleton lacks %s", m.Name)
		}
	}
	groups := out["InstanceGroups"].([]any)[0].(map[string]any)
	if groups["InstanceCount"] != float64(0) || groups["ExecutionRole"] != "" {
		t.Errorf("skeleton InstanceGroups[0]: %v", groups)
	}
	// The skeleton is valid --cli-input-json: it passes client-side validation (the server
	// then judges the values).
	path := filepath.Join(t.TempDir(), "skeleton.json")
	os.WriteFile(path, []byte(must(t, "list-clusters", "--generate-cli-skeleton")), 0o600)
	r := hale(t, "list-clusters", "--cli-input-json", "file://"+path)
	if r.code != 254 || !strings.Contains(r.stderr, "ValidationException") {
		t.Errorf("skeleton as input: %+v", r)
	}
	// Every operation's skeletons and help are built from the model without a hand-written
	// line: each prints, and the input skeleton has every input member.
	for _, op := range api.Operations {
		sk := decode(t, must(t, awscli.Name(op), "--generate-cli-skeleton"))
		if len(sk) != len(api.Shapes[op.InputShape].Members) {
			t.Errorf("%s skeleton has %d members", op.Name, len(sk))
		}
		if h := must(t, awscli.Name(op), "help"); !strings.Contains(h, "SYNOPSIS") {
			t.Errorf("%s help:\n%s", op.Name, h)
		}
	}
	out = decode(t, must(t, "list-cluster-nodes", "--cluster-name", "x", "--generate-cli-skeleton", "output"))
	if _, ok := out["ClusterNodeSummaries"]; !ok || out["NextToken"] != "NextToken" {
		t.Errorf("output skeleton: %v", out)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"list-cluster-nodes", "help"}, {"list-cluster-nodes", "--help"}, {"list-cluster-nodes", "-h"},
		{"help", "list-cluster-nodes"}, {"list-cluster-nodes", "--cluster-name", "x", "--bogus", "help"},
	} {
		r := hale(t, args...)
		if r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
		for _, want := range []string{"list-cluster-nodes is a paginated operation", "--cluster-name (string) [required]",
			"--include-node-logical-ids | --no-include-node-logical-ids (boolean)", "--sort-by (string)", "o CREATION_TIME",
			"--max-results (integer)", "--creation-time-after (timestamp)", "ClusterNodeSummaries -> (list)"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%v: help lacks %q", args, want)
			}
		}
	}
	h := must(t, "add-tags", "help")
	for _, want := range []string{"--tags (list) [required]", "Key -> (string) [required]", "Key=string,Value=string ...", `"Value": "string"`} {
		if !strings.Contains(h, want) {
			t.Errorf("add-tags help lacks %q:\n%s", want, h)
		}
	}
	if h := must(t, "--help"); !strings.Contains(h, "batch-delete-cluster-nodes") {
		t.Errorf("hale --help does not list the operations:\n%s", h)
	}
}
