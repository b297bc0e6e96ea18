package console

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/haleproject/hale/api"
)

// Each console action is authorised with its API operation's action name: a key that has every
// action but that one gets the API's AccessDeniedException naming the cluster; a key with it
// gets past authorisation; a key whose cluster patterns exclude the cluster is refused as the
// API refuses it.
func TestActionsAreAuthorisedAsTheAPI(t *testing.T) {
	f := newFixture(t)
	f.cluster("demo")
	all := []string{"sagemaker:CreateCluster", "sagemaker:UpdateCluster", "sagemaker:BatchRebootClusterNodes",
		"sagemaker:BatchReplaceClusterNodes", "sagemaker:BatchDeleteClusterNodes", "sagemaker:DeleteCluster"}
	cases := []struct {
		body, action, resource string
	}{
		{`{"Action": "ScaleGroup", "Cluster": "demo", "Group": "workers", "Count": 2}`, "sagemaker:UpdateCluster", "demo"},
		{`{"Action": "RebootNodes", "Cluster": "demo", "NodeIds": ["i-0123456789abcdef0"]}`, "sagemaker:BatchRebootClusterNodes", "demo"},
		{`{"Action": "ReplaceNodes", "Cluster": "demo", "NodeIds": ["i-0123456789abcdef0"]}`, "sagemaker:BatchReplaceClusterNodes", "demo"},
		{`{"Action": "DeleteNodes", "Cluster": "demo", "NodeIds": ["i-0123456789abcdef0"]}`, "sagemaker:BatchDeleteClusterNodes", "demo"},
		{`{"Action": "CreateCluster", "Document": ` + jsonString(clusterDoc("second")) + `}`, "sagemaker:CreateCluster", "second"},
		{`{"Action": "DeleteCluster", "Cluster": "demo"}`, "sagemaker:DeleteCluster", "demo"},
	}
	for _, tc := range cases {
		t.Run(tc.action, func(t *testing.T) {
			var others []string
			for _, a := range all {
				if a != tc.action {
					others = append(others, a)
				}
			}
			lacking := f.browser()
			lacking.signIn(f.key("lacking", others, nil))
			st, e := lacking.post(Path+"/api/actions", tc.body, nil)
			want := "User: lacking is not authorized to perform: " + tc.action + " on resource: " + tc.resource
			if st != http.StatusBadRequest || e.Code != api.CodeAccessDeniedException || e.Message != want {
				t.Errorf("without %s: %d %s %q, want AccessDeniedException %q", tc.action, st, e.Code, e.Message, want)
			}

			elsewhere := f.browser()
			elsewhere.signIn(f.key("elsewhere", all, []string{"team-*"}))
			st, e = elsewhere.post(Path+"/api/actions", tc.body, nil)
			if e.Code != api.CodeAccessDeniedException || !strings.Contains(e.Message, "User: elsewhere is not authorized to perform: "+tc.action) {
				t.Errorf("outside its cluster patterns: %d %s %q, want AccessDeniedException", st, e.Code, e.Message)
			}

			allowed := f.browser()
			allowed.signIn(f.key("allowed", []string{tc.action}, nil))
			st, e = allowed.post(Path+"/api/actions", tc.body, nil)
			if e.Code == api.CodeAccessDeniedException {
				t.Errorf("with %s: refused: %s", tc.action, e.Message)
			}
			t.Logf("with %s: %d %s %s", tc.action, st, e.Code, e.Message)
		})
	}
	// The accepted CreateCluster and DeleteCluster name the console and the principal in the
	// clusters' events.
	for _, c := range []string{"second", "demo"} {
		if ev := f.events(c); !strings.Contains(ev, "Web console: allowed (access key AKIA") {
			t.Errorf("cluster %s has no event of the console's action:\n%s", c, ev)
		}
	}
}

// The create form's validation messages are the API's: the same document gives the same error
// as api.DecodeInput and the service's CreateCluster, which the API handler runs.
func TestCreateClusterValidationIsTheAPIs(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	b.signIn(f.key("admin", []string{"sagemaker:*"}, nil))
	for _, doc := range []string{
		`{"ClusterName": "bad_name", "InstanceGroups": []}`,
		`{"ClusterName": "x", "InstanceGroups": [{"InstanceGroupName": "g", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1}]}`,
		`not json`,
		strings.Replace(clusterDoc("dup"), `"InstanceGroups": [`, `"InstanceGroups": [{"InstanceGroupName": "workers", "InstanceType": "ml.c5.xlarge",
	"InstanceCount": 1, "ExecutionRole": "arn:aws:iam::123456789012:role/r",
	"LifeCycleConfig": {"SourceS3Uri": "s3://bucket/lc", "OnCreate": "on_create.sh"}}, `, 1),
	} {
		op := api.LookupOperation("CreateCluster")
		in, err := api.DecodeInput(op, []byte(doc))
		if err == nil {
			_, err = op.Invoke(context.Background(), f.svc, in)
		}
		if err == nil {
			t.Fatalf("the API accepts %s", doc)
		}
		want := api.AsError(err)
		st, got := b.post(Path+"/api/actions", `{"Action": "CreateCluster", "Document": `+jsonString(doc)+`}`, nil)
		if st != want.HTTPStatus() || got.Code != want.Code || got.Message != want.Message {
			t.Errorf("%s:\nconsole %d %s: %s\nAPI     %d %s: %s", doc, st, got.Code, got.Message, want.HTTPStatus(), want.Code, want.Message)
		}
	}
}

// Reads are authorised as the API's: a key limited to team-* clusters lists only those and is
// refused another's page; a key without sagemaker:ListClusterNodes sees the cluster, not its
// nodes.
func TestReadsAreAuthorisedAsTheAPI(t *testing.T) {
	f := newFixture(t)
	f.cluster("team-a")
	f.cluster("other")
	team := f.browser()
	team.signIn(f.key("team", []string{"sagemaker:Describe*", "sagemaker:List*"}, []string{"team-*"}))
	var rows []clusterRow
	if st := team.getJSON(Path+"/api/clusters", &rows); st != http.StatusOK || len(rows) != 1 || rows[0].Name != "team-a" {
		t.Errorf("team's clusters: %d %+v, want team-a only", st, rows)
	}
	var e errorBody
	if st := team.getJSON(Path+"/api/clusters/other", &e); st != http.StatusBadRequest || e.Message != "User: team is not authorized to perform: sagemaker:DescribeCluster on resource: other" {
		t.Errorf("team reads other: %d %+v", st, e)
	}
	for _, p := range []string{"/events", "/logs", "/repairs"} {
		if st := team.getJSON(Path+"/api/clusters/other"+p, &e); st != http.StatusBadRequest || e.Code != api.CodeAccessDeniedException {
			t.Errorf("team reads other%s: %d %+v", p, st, e)
		}
	}
	noNodes := f.browser()
	noNodes.signIn(f.key("nonodes", []string{"sagemaker:DescribeCluster"}, nil))
	var d clusterDetail
	if st := noNodes.getJSON(Path+"/api/clusters/team-a", &d); st != http.StatusOK || len(d.Nodes) != 0 ||
		d.NodesRefused != "User: nonodes is not authorized to perform: sagemaker:ListClusterNodes on resource: team-a" {
		t.Errorf("without ListClusterNodes: %d %d nodes, %q", st, len(d.Nodes), d.NodesRefused)
	}
	if st := noNodes.getJSON(Path+"/api/clusters", &e); st != http.StatusBadRequest || e.Code != api.CodeAccessDeniedException {
		t.Errorf("without ListClusters: %d %+v", st, e)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
