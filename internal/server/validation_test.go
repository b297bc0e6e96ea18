package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/haleproject/hale/internal/server"
	"github.com/haleproject/hale/internal/server/servertest"
)

// wireAnswer is what the server sent back to a raw request.
type wireAnswer struct {
	status    int
	code      string // __type
	message   string
	errorType string // x-amzn-ErrorType header
	requestID string
	body      []byte
}

// post sends body to the server as SageMaker.<op>, signed with the admin key at time at (zero:
// now), the way any SDK does, and returns the answer. Raw requests reach the server with inputs
// an SDK would refuse to send (a missing required member, a wrong JSON type).
func post(t *testing.T, e *servertest.Env, op, body string, at time.Time) wireAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.App.URL+"/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	if op != "" {
		req.Header.Set("X-Amz-Target", "SageMaker."+op)
	}
	if at.IsZero() {
		at = time.Now()
	}
	sum := sha256.Sum256([]byte(body))
	creds := aws.Credentials{AccessKeyID: e.Admin.ID, SecretAccessKey: e.Admin.Secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "sagemaker", "us-west-2", at); err != nil {
		t.Fatal(err)
	}
	return send(t, req)
}

func send(t *testing.T, req *http.Request) wireAnswer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := wireAnswer{status: resp.StatusCode, body: b, errorType: resp.Header.Get("x-amzn-ErrorType"), requestID: resp.Header.Get("x-amzn-RequestId")}
	if resp.StatusCode != 200 {
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("error body %q is not JSON: %v", b, err)
		}
		a.code, a.message = e.Type, e.Message
	}
	return a
}

// TestValidationTable sends broken inputs and checks each gets the right code and a message that
// names the offending member and the rule.
func TestValidationTable(t *testing.T) {
	e := servertest.Start(t, server.Options{})
	good := string(readFile(t, "testdata/slurm-cluster.json"))
	mutate := func(f func(m map[string]any)) string {
		var m map[string]any
		json.Unmarshal([]byte(good), &m)
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	group := func(m map[string]any, i int) map[string]any {
		return m["InstanceGroups"].([]any)[i].(map[string]any)
	}
	cases := []struct {
		name, op, body string
		code           string
		want           []string // substrings of the message
	}{
		{"missing ClusterName", "CreateCluster", `{}`, "ValidationException",
			[]string{"Value null at 'clusterName' failed to satisfy constraint: Member must not be null"}},
		{"bad name pattern", "CreateCluster", mutate(func(m map[string]any) { m["ClusterName"] = "bad_name" }), "ValidationException",
			[]string{"Value 'bad_name' at 'clusterName'", "regular expression pattern"}},
		{"name too long", "CreateCluster", mutate(func(m map[string]any) { m["ClusterName"] = strings.Repeat("a", 64) }), "ValidationException",
			[]string{"at 'clusterName'", "length less than or equal to 63"}},
		{"instance count over range", "CreateCluster", mutate(func(m map[string]any) { group(m, 2)["InstanceCount"] = 7000 }), "ValidationException",
			[]string{"Value '7000' at 'instanceGroups.3.member.instanceCount'", "less than or equal to 6758"}},
		{"threads per core", "CreateCluster", mutate(func(m map[string]any) { group(m, 0)["ThreadsPerCore"] = 3 }), "ValidationException",
			[]string{"at 'instanceGroups.1.member.threadsPerCore'"}},
		{"unknown instance type", "CreateCluster", mutate(func(m map[string]any) { group(m, 1)["InstanceType"] = "ml.x1.huge" }), "ValidationException",
			[]string{"Value 'ml.x1.huge' at 'instanceGroups.2.member.instanceType'", "enum value set"}},
		{"missing execution role", "CreateCluster", mutate(func(m map[string]any) { delete(group(m, 3), "ExecutionRole") }), "ValidationException",
			[]string{"Value null at 'instanceGroups.4.member.executionRole'"}},
		{"bad execution role", "CreateCluster", mutate(func(m map[string]any) { group(m, 3)["ExecutionRole"] = "${ROLE}" }), "ValidationException",
			[]string{"'instanceGroups.4.member.executionRole'", "length greater than or equal to 20", "regular expression pattern"}},
		{"too many tags", "CreateCluster", mutate(func(m map[string]any) {
			var tags []any
			for i := 0; i < 51; i++ {
				tags = append(tags, map[string]any{"Key": "k" + strings.Repeat("x", i), "Value": "v"})
			}
			m["Tags"] = tags
		}), "ValidationException", []string{"at 'tags'", "length less than or equal to 50"}},
		{"two controllers", "CreateCluster", mutate(func(m map[string]any) { group(m, 1)["SlurmConfig"] = map[string]any{"NodeType": "Controller"} }), "ValidationException",
			[]string{"exactly one InstanceGroup with Controller node type; found 2"}},
		{"no controller", "CreateCluster", mutate(func(m map[string]any) { group(m, 0)["SlurmConfig"] = map[string]any{"NodeType": "Login"} }), "ValidationException",
			[]string{"exactly one InstanceGroup with Controller node type; found none", "at most one InstanceGroup with Login node type"}},
		{"partition on controller", "CreateCluster", mutate(func(m map[string]any) {
			group(m, 0)["SlurmConfig"] = map[string]any{"NodeType": "Controller", "PartitionNames": []any{"p"}}
		}), "ValidationException", []string{"'instanceGroups.1.member.slurmConfig.partitionNames'", "Partitions can only be assigned to Compute node types"}},
		{"eks and slurm", "CreateCluster", mutate(func(m map[string]any) {
			m["Orchestrator"] = map[string]any{"Slurm": map[string]any{}, "Eks": map[string]any{"ClusterArn": "arn:aws:eks:us-west-2:111122223333:cluster/x"}}
		}), "ValidationException", []string{"'orchestrator'", "exactly one of Eks or Slurm"}},
		{"type and requirements", "CreateCluster", mutate(func(m map[string]any) {
			group(m, 3)["InstanceRequirements"] = map[string]any{"InstanceTypes": []any{"ml.c5.18xlarge"}}
		}), "ValidationException", []string{"'instanceGroups.4.member.instanceRequirements'", "mutually exclusive"}},
		{"fsx without vpc", "CreateCluster", mutate(func(m map[string]any) { delete(m, "VpcConfig") }), "ValidationException",
			[]string{"'instanceGroups.3.member.instanceStorageConfigs'", "FSx configurations are only supported for Custom VPC"}},
		{"storage union with two members", "CreateCluster", mutate(func(m map[string]any) {
			group(m, 2)["InstanceStorageConfigs"] = []any{map[string]any{"EbsVolumeConfig": map[string]any{"VolumeSizeInGB": 100}, "FsxLustreConfig": map[string]any{"DnsName": "fs-0abc123def456789.fsx.us-west-2.amazonaws.com", "MountName": "abc"}}}
		}), "ValidationException", []string{"'instanceGroups.3.member.instanceStorageConfigs.1.member'", "exactly one member set"}},
		{"root volume with size", "CreateCluster", mutate(func(m map[string]any) {
			group(m, 2)["InstanceStorageConfigs"] = []any{map[string]any{"EbsVolumeConfig": map[string]any{"VolumeSizeInGB": 100, "RootVolume": true}}}
		}), "ValidationException", []string{"volumeSizeInGB", "must not be set when RootVolume is true", "VolumeKmsKeyId is required"}},
		{"oncreate and oninitcomplete", "CreateCluster", mutate(func(m map[string]any) {
			group(m, 0)["LifeCycleConfig"] = map[string]any{"SourceS3Uri": "s3://sagemaker-x/y", "OnCreate": "a.sh", "OnInitComplete": "b.sh"}
		}), "ValidationException", []string{"'instanceGroups.1.member.lifeCycleConfig'", "mutually exclusive"}},
		{"duplicate group names", "CreateCluster", mutate(func(m map[string]any) { group(m, 3)["InstanceGroupName"] = "gpu-compute" }), "ValidationException",
			[]string{"'instanceGroups.4.member.instanceGroupName'", "unique"}},
		{"unknown member", "CreateCluster", mutate(func(m map[string]any) { m["ResilienceConfig"] = map[string]any{"NodeRecovery": "Automatic"} }), "ValidationException",
			[]string{"'resilienceConfig'", "no member \"ResilienceConfig\""}},
		{"wrong JSON type", "CreateCluster", mutate(func(m map[string]any) { group(m, 0)["InstanceCount"] = "1" }), "SerializationException",
			[]string{"'instanceGroups.1.member.instanceCount'", "must be a number"}},
		{"not JSON", "CreateCluster", `{"ClusterName": "x",}`, "SerializationException", []string{"not valid JSON"}},
		{"top-level array", "CreateCluster", `[{"InstanceGroupName": "x"}]`, "SerializationException", []string{"must be a JSON object"}},
		{"describe node with both ids", "DescribeClusterNode", `{"ClusterName": "x", "NodeId": "i-0123456789abcdef0", "NodeLogicalId": "a-1"}`, "ValidationException",
			[]string{"NodeId and NodeLogicalId are mutually exclusive"}},
		{"batch delete without nodes", "BatchDeleteClusterNodes", `{"ClusterName": "x"}`, "ValidationException", []string{"Either NodeIds or NodeLogicalIds must be set"}},
		{"bad node id", "BatchRebootClusterNodes", `{"ClusterName": "x", "NodeIds": ["node-1"]}`, "ValidationException",
			[]string{"Value 'node-1' at 'nodeIds.1.member'", "regular expression pattern"}},
		{"reboot over 25", "BatchRebootClusterNodes", `{"ClusterName": "x", "NodeIds": [` + strings.TrimSuffix(strings.Repeat(`"i-0123456789abcdef0",`, 26), ",") + `]}`, "ValidationException",
			[]string{"at 'nodeIds'", "length less than or equal to 25"}},
		{"list max results", "ListClusters", `{"MaxResults": 101}`, "ValidationException", []string{"at 'maxResults'", "less than or equal to 100"}},
		{"list tags min page", "ListTags", `{"ResourceArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefghijkl", "MaxResults": 10}`, "ValidationException",
			[]string{"at 'maxResults'", "greater than or equal to 50"}},
		{"sort order enum", "ListClusterNodes", `{"ClusterName": "x", "SortOrder": "Up"}`, "ValidationException", []string{"Value 'Up' at 'sortOrder'", "[Ascending, Descending]"}},
		{"timestamp as string", "ListClusters", `{"CreationTimeAfter": "2024-01-01"}`, "SerializationException", []string{"'creationTimeAfter'", "epoch seconds"}},
		{"unknown operation", "LaunchRockets", `{}`, "UnknownOperationException", []string{"SageMaker.LaunchRockets"}},
		{"no target", "", `{}`, "UnknownOperationException", []string{"X-Amz-Target"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := post(t, e, c.op, c.body, time.Time{})
			if a.status != 400 || a.code != c.code || a.errorType != c.code || a.requestID == "" {
				t.Fatalf("got %d %s (header %q, request id %q): %s; want 400 %s", a.status, a.code, a.errorType, a.requestID, a.message, c.code)
			}
			for _, w := range c.want {
				if !strings.Contains(a.message, w) {
					t.Errorf("message %q lacks %q", a.message, w)
				}
			}
		})
	}
	// Nothing was stored by any of them.
	out, err := e.SDK.ListClusters(servertest.Ctx(t), &sagemaker.ListClustersInput{})
	if err != nil || len(out.ClusterSummaries) != 0 {
		t.Fatalf("rejected requests left clusters behind: %+v %v", out, err)
	}
}

// TestUpdateRulesKeepStoredState checks that a refused UpdateCluster leaves the cluster as it was.
func TestUpdateRulesKeepStoredState(t *testing.T) {
	e := servertest.Start(t, server.Options{})
	ctx := servertest.Ctx(t)
	arn := createFromFile(t, e, "testdata/slurm-cluster.json", "keep")
	markInService(t, e, "keep")
	before, _ := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: &arn})
	role := aws.String("arn:aws:iam::111122223333:role/HyperPodRole")
	bad := []sagemaker.UpdateClusterInput{
		{ClusterName: &arn, InstanceGroupsToDelete: []string{"controller"}},
		{ClusterName: &arn, InstanceGroupsToDelete: []string{"nope"}},
		{ClusterName: &arn, InstanceGroups: []types.ClusterInstanceGroupSpecification{{InstanceGroupName: aws.String("login"), InstanceCount: aws.Int32(1), ExecutionRole: role,
			SlurmConfig: &types.ClusterSlurmConfig{NodeType: types.ClusterSlurmNodeTypeCompute, PartitionNames: []string{"x"}}}}},
		{ClusterName: &arn, InstanceGroups: []types.ClusterInstanceGroupSpecification{{InstanceGroupName: aws.String("cpu-compute"), InstanceCount: aws.Int32(2), ExecutionRole: role}},
			InstanceGroupsToDelete: []string{"cpu-compute"}},
		{ClusterName: &arn, Orchestrator: &types.ClusterOrchestrator{Eks: &types.ClusterOrchestratorEksConfig{ClusterArn: aws.String("arn:aws:eks:us-west-2:111122223333:cluster/x")}}},
		{ClusterName: &arn, NodeProvisioningMode: types.ClusterNodeProvisioningModeContinuous},
	}
	for i, in := range bad {
		if _, err := e.SDK.UpdateCluster(ctx, &in); apiCode(err) != "ValidationException" {
			t.Errorf("update %d = %v, want ValidationException", i, err)
		} else {
			t.Logf("update %d: %s", i, apiMessage(err))
		}
	}
	after, _ := e.SDK.DescribeCluster(ctx, &sagemaker.DescribeClusterInput{ClusterName: &arn})
	b1, _ := json.Marshal(before.InstanceGroups)
	b2, _ := json.Marshal(after.InstanceGroups)
	if !bytes.Equal(b1, b2) || after.ClusterStatus != types.ClusterStatusInservice {
		t.Fatalf("refused updates changed the cluster:\n%s\n%s", b1, b2)
	}
}
