package awscli

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/haleproject/hale/api"
)

// Expected values below were printed by the AWS CLI's own code (botocore.xform_name and
// awscli.shorthand.ShorthandParser, awscli 1.45.11) for the same inputs.

func TestKebabMatchesBotocore(t *testing.T) {
	for in, want := range map[string]string{
		"CreateCluster":                  "create-cluster",
		"BatchDeleteClusterNodes":        "batch-delete-cluster-nodes",
		"ListClusterNodes":               "list-cluster-nodes",
		"InstanceGroupsToDelete":         "instance-groups-to-delete",
		"IncludeNodeLogicalIds":          "include-node-logical-ids",
		"SourceS3Uri":                    "source-s3-uri",
		"VolumeSizeInGB":                 "volume-size-in-gb",
		"TrainingPlanArns":               "training-plan-arns",
		"RestrictedInstanceGroupsConfig": "restricted-instance-groups-config",
		"DescribeClusterSchedulerConfig": "describe-cluster-scheduler-config",
		"EfaEnis":                        "efa-enis",
		"GatewayARNs":                    "gateway-arns",
	} {
		if got := kebab(in); got != want {
			t.Errorf("kebab(%s) = %s, want %s", in, got, want)
		}
	}
	// Every operation gets a distinct command and every input member a distinct option that
	// does not shadow a global option.
	seen := map[string]bool{}
	for _, op := range api.Operations {
		if seen[kebab(op.Name)] {
			t.Errorf("two operations spell %s", kebab(op.Name))
		}
		seen[kebab(op.Name)] = true
		for _, m := range api.Shapes[op.InputShape].Members {
			if _, ok := globalOptions[kebab(m.Name)]; ok {
				t.Errorf("%s.%s shadows the global option --%s", op.Name, m.Name, kebab(m.Name))
			}
			if _, ok := pagingOptions[kebab(m.Name)]; ok && op.Paginator != nil {
				t.Errorf("%s.%s shadows --%s", op.Name, m.Name, kebab(m.Name))
			}
		}
	}
}

func TestShorthandMatchesTheAWSCLI(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Key=team,Value=llm", `{"Key":"team","Value":"llm"}`},
		{"Key=a,Value=b,c", `{"Key":"a","Value":["b","c"]}`},
		{"SecurityGroupIds=sg-1,Subnets=subnet-1,subnet-2", `{"SecurityGroupIds":"sg-1","Subnets":["subnet-1","subnet-2"]}`},
		{"A={B=1,C=[x,y]}", `{"A":{"B":"1","C":["x","y"]}}`},
		{`Key='a,b',Value="q\"x"`, `{"Key":"a,b","Value":"q\"x"}`},
		{`Key=a\,b,Value=c`, `{"Key":"a,b","Value":"c"}`},
		{"A=[{B=1},{B=2}]", `{"A":[{"B":"1"},{"B":"2"}]}`},
		{"Key=  spaced ,Value=v", `{"Key":"spaced","Value":"v"}`},
		{"Key=", `{"Key":""}`},
		{"A=b=c", `{"A":"b=c"}`},
		{"A=[a, b , c]", `{"A":["a","b","c"]}`},
		{"Key=a,b,Value=c", `{"Key":["a","b"],"Value":"c"}`},
		{"Key=x@y,Value=1", `{"Key":"x@y","Value":"1"}`},
		{"Key=a,,Value=b", `{"Key":"a","Value":"b"}`},
		{"Key", "error"},
		{"A={B=1", "error"},
		{"Key=a,Key=b", "error"},
		{"A=[x,y", "error"},
	} {
		v, err := parseShorthand(tc.in)
		got := "error"
		if err == nil {
			got = string(compactJSON(v))
		}
		if got != tc.want {
			t.Errorf("%s: got %s (%v), want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestShorthandAppliesTheModel(t *testing.T) {
	// A flat structure with an integer, a list of structures and a map: strings become the
	// model's types and a single value becomes a list where the model has one.
	v, err := parseShorthandFor("--x", "Type=INSTANCE_COUNT,Value=3", api.Shapes["CapacitySizeConfig"])
	if err != nil || string(compactJSON(v)) != `{"Type":"INSTANCE_COUNT","Value":3}` {
		t.Errorf("CapacitySizeConfig: %s %v", compactJSON(v), err)
	}
	v, err = parseShorthandFor("--vpc-config", "SecurityGroupIds=sg-1,Subnets=subnet-1", api.Shapes["VpcConfig"])
	if err != nil || string(compactJSON(v)) != `{"SecurityGroupIds":["sg-1"],"Subnets":["subnet-1"]}` {
		t.Errorf("VpcConfig: %s %v", compactJSON(v), err)
	}
	_, err = parseShorthandFor("--x", "Type=INSTANCE_COUNT,Value=three", api.Shapes["CapacitySizeConfig"])
	if err == nil || !strings.Contains(err.Error(), "invalid literal for int() with base 10: 'three'") {
		t.Errorf("bad integer: %v", err)
	}
	// A float member (ComputeQuotaResourceConfig's VCpu and MemoryInGiB) takes a fraction.
	v, err = parseShorthandFor("--x", "InstanceType=ml.g5.8xlarge,VCpu=4.5,MemoryInGiB=16", api.Shapes["ComputeQuotaResourceConfig"])
	if err != nil || string(compactJSON(v)) != `{"InstanceType":"ml.g5.8xlarge","VCpu":4.5,"MemoryInGiB":16}` {
		t.Errorf("ComputeQuotaResourceConfig: %s %v", compactJSON(v), err)
	}
	_, err = parseShorthandFor("--x", "InstanceType=ml.g5.8xlarge,VCpu=four", api.Shapes["ComputeQuotaResourceConfig"])
	if err == nil || !strings.Contains(err.Error(), "could not convert string to float: 'four'") {
		t.Errorf("bad float: %v", err)
	}
}

func TestParseOpArgs(t *testing.T) {
	op := api.LookupOperation("BatchDeleteClusterNodes")
	a, err := parseOpArgs(op, []string{"--cluster-name=c", "--node-ids", "i-0123456789abcdef0", "i-0123456789abcdef1", "--output", "table", "--debug"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := a.buildInput(op)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(compactJSON(in)); got != `{"ClusterName":"c","NodeIds":["i-0123456789abcdef0","i-0123456789abcdef1"]}` || a.output != "table" || !a.debug {
		t.Errorf("got %s %+v", got, a)
	}
	// A list option also takes one JSON list.
	a, _ = parseOpArgs(op, []string{"--cluster-name", "c", "--node-ids", `["i-0123456789abcdef0"]`})
	if in, _ := a.buildInput(op); string(compactJSON(in)) != `{"ClusterName":"c","NodeIds":["i-0123456789abcdef0"]}` {
		t.Errorf("JSON list: %s", compactJSON(in))
	}
	// A negative number is a value, not an option, as argparse decides.
	op = api.LookupOperation("ListClusters")
	a, err = parseOpArgs(op, []string{"--max-results", "-5"})
	if err != nil || len(a.members) != 1 || a.members[0].raw[0] != "-5" {
		t.Errorf("negative number: %v %+v", err, a)
	}
}

func TestResumeTokenIsBotocores(t *testing.T) {
	// botocore's TokenEncoder output for {"NextToken": "abc", "boto_truncate_amount": 5}.
	tok := encodeResumeToken("abc", 5, true)
	raw, _ := base64.StdEncoding.DecodeString(tok)
	if string(raw) != `{"NextToken": "abc", "boto_truncate_amount": 5}` {
		t.Errorf("token %s", raw)
	}
	if next, skip := decodeStartingToken(tok); next != "abc" || skip != 5 {
		t.Errorf("decoded %s %d", next, skip)
	}
	// hale's own NextToken (base64 JSON of another shape) passes through untouched.
	own := base64.StdEncoding.EncodeToString([]byte(`{"v":1,"q":"x"}`))
	if next, skip := decodeStartingToken(own); next != own || skip != 0 {
		t.Errorf("service token: %s %d", next, skip)
	}
}

func TestJSONOutputIsPythons(t *testing.T) {
	v, err := parseJSON([]byte(`{"b":1,"a":[],"c":{},"d":"<&> é \u2028 \"q\"\n","e":[1.50,true,null],"b":2}`))
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n    \"b\": 2,\n    \"a\": [],\n    \"c\": {},\n    \"d\": \"<&> é \u2028 \\\"q\\\"\\n\",\n    \"e\": [\n        1.50,\n        true,\n        null\n    ]\n}\n"
	if got := printResult("json", "X", v, 80); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := parseJSON([]byte("{\"a\": [1,]}")); err == nil || !strings.Contains(err.Error(), "line 1 column 10") {
		t.Errorf("trailing comma: %v", err)
	}
}
