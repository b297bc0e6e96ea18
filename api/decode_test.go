package api

import (
	"os"
	"strings"
	"testing"
)

// TestRealConfigs decodes real CreateCluster documents as the server does and checks the outcome
// recorded for each in testdata/real-configs/README.md's source index.
func TestRealConfigs(t *testing.T) {
	cases := []struct {
		file string
		op   string
		code string   // "" = valid
		want []string // substrings of the message
	}{
		{"01-docs-api-driven-slurm-complete.json", "CreateCluster", "", nil},
		{"03-docs-getting-started-option-b-oninitcomplete.json", "CreateCluster", "", nil},
		{"05-docs-vpc-example-trailing-comma.json", "CreateCluster", CodeSerializationException, []string{"not valid JSON"}},
		{"07-docs-update-cluster-template-with-comments.json", "UpdateCluster", CodeSerializationException, []string{"not valid JSON"}},
		{"09-docs-delete-instance-group-update-cluster.json", "UpdateCluster", CodeSerializationException, []string{"not valid JSON"}},
		{"11-haozhx23-eks-cluster-config.json", "CreateCluster", "", nil},
		{"13-easy-hyperpod-instance-groups-bare-array.json", "CreateCluster", CodeSerializationException, []string{"must be a JSON object"}},
		{"15-playground-persistent-cluster-no-clustername.json", "CreateCluster", CodeValidationException,
			[]string{"1 validation error detected: Value null at 'clusterName' failed to satisfy constraint: Member must not be null"}},
		{"17-skypilot-blog-eks-resilienceconfig-heredoc.json", "CreateCluster", CodeValidationException,
			[]string{"'resilienceConfig'", "no member \"ResilienceConfig\"", "'orchestrator.eks.clusterArn'", "'instanceGroups.1.member.executionRole'",
				"'vpcConfig.securityGroupIds.1.member'", "'vpcConfig.subnets.1.member'"}},
		{"19-moca-slurm-heredoc-template.json", "CreateCluster", CodeValidationException,
			[]string{"6 validation errors detected", "Value '${ROLE}' at 'instanceGroups.1.member.executionRole' failed to satisfy constraint: Member must have length greater than or equal to 20",
				"Value '$SECURITY_GROUP' at 'vpcConfig.securityGroupIds.1.member'", "Value '$SUBNET_ID' at 'vpcConfig.subnets.1.member'"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			body, err := os.ReadFile("testdata/real-configs/" + c.file)
			if err != nil {
				t.Fatal(err)
			}
			in, err := DecodeInput(LookupOperation(c.op), body)
			if err == nil {
				if req, ok := in.(*CreateClusterRequest); ok {
					err = CheckCreateCluster(req)
				}
			}
			if c.code == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if !IsCode(err, c.code) {
				t.Fatalf("got %v, want %s", err, c.code)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q:\n%s", w, err)
				}
			}
		})
	}
}

// TestBareArrayIsValidInstanceGroups: file 13 is meant for --instance-groups; as that member's
// value it is valid.
func TestBareArrayIsValidInstanceGroups(t *testing.T) {
	groups, err := os.ReadFile("testdata/real-configs/13-easy-hyperpod-instance-groups-bare-array.json")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"ClusterName": "easy", "InstanceGroups": ` + string(groups) + `}`
	in, err := DecodeInput(LookupOperation("CreateCluster"), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckCreateCluster(in.(*CreateClusterRequest)); err != nil {
		t.Fatal(err)
	}
}

func TestTimeWire(t *testing.T) {
	for _, s := range []string{"1700000000", "1700000000.5", "1700000000.125", "1.7e9"} {
		tm, err := ParseEpoch(s)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := tm.MarshalJSON()
		back, _ := ParseEpoch(string(b))
		if !back.Equal(tm.Time) {
			t.Errorf("%s -> %s -> %v, want %v", s, b, back, tm)
		}
	}
	tm, _ := ParseEpoch("1700000000.125")
	if b, _ := tm.MarshalJSON(); string(b) != "1700000000.125" {
		t.Errorf("fraction lost: %s", b)
	}
}

// TestFloatMembers: a float shape (ComputeQuotaResourceConfig's VCpu) takes a fraction, refuses
// text as a serialization error, and its range is the model's, stated as AWS states it.
func TestFloatMembers(t *testing.T) {
	body := func(vcpu string) []byte {
		return []byte(`{"Name":"q","ClusterArn":"arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefghijkl",
			"ComputeQuotaTarget":{"TeamName":"a"},"ComputeQuotaConfig":{"ComputeQuotaResources":[{"InstanceType":"ml.g5.8xlarge","VCpu":` + vcpu + `}]}}`)
	}
	op := LookupOperation("CreateComputeQuota")
	in, err := DecodeInput(op, body("4.5"))
	if err != nil {
		t.Fatal(err)
	}
	if got := in.(*CreateComputeQuotaRequest).ComputeQuotaConfig.ComputeQuotaResources[0].GetVCpu(); got != 4.5 {
		t.Errorf("VCpu %v, want 4.5", got)
	}
	if _, err := DecodeInput(op, body(`"4"`)); !IsCode(err, CodeSerializationException) || !strings.Contains(err.Error(), "must be a number") {
		t.Errorf("VCpu as text: %v", err)
	}
	_, err = DecodeInput(op, body("-0.5"))
	if !IsCode(err, CodeValidationException) || !strings.Contains(err.Error(),
		"Value '-0.5' at 'computeQuotaConfig.computeQuotaResources.1.member.vCpu' failed to satisfy constraint: Member must have value greater than or equal to 0") {
		t.Errorf("VCpu below its range: %v", err)
	}
}
