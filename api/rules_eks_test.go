package api

import (
	"strings"
	"testing"
)

// TestEksGroupRules: an Eks cluster's group with Slurm fields, a label key or value Kubernetes
// refuses, HyperPod's own label prefix, or a taint twice is a ValidationException naming the
// member; a group Kubernetes accepts passes.
func TestEksGroupRules(t *testing.T) {
	const head = `{"ClusterName": "k", "Orchestrator": {"Eks": {"ClusterArn": "arn:aws:eks:us-west-2:123456789012:cluster/k"}},
		"InstanceGroups": [{"InstanceGroupName": "g", "InstanceType": "ml.g5.2xlarge", "InstanceCount": 1,
		"ExecutionRole": "arn:aws:iam::123456789012:role/HyperPodRole",
		"LifeCycleConfig": {"SourceS3Uri": "s3://b/p/", "OnCreate": "on_create.sh"}, `
	long := strings.Repeat("a", 64)
	cases := []struct {
		name, group string
		want        []string // substrings of the message; none: valid
	}{
		{"valid", `"KubernetesConfig": {"Labels": {"team": "ml", "example.com/tier": "gold"}, "Taints": [{"Key": "dedicated", "Value": "training", "Effect": "NoSchedule"}]}`, nil},
		{"slurm fields", `"SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["p"]}`,
			[]string{"'instanceGroups.1.member.slurmConfig'", "SlurmConfig is only allowed on clusters orchestrated by Slurm"}},
		{"label name too long", `"KubernetesConfig": {"Labels": {"` + long + `": "x"}}`,
			[]string{"'instanceGroups.1.member.kubernetesConfig.labels'", "not a valid Kubernetes label key", "must be no more than 63 bytes"}},
		{"label value too long", `"KubernetesConfig": {"Labels": {"team": "` + long + `"}}`,
			[]string{"'instanceGroups.1.member.kubernetesConfig.labels.team.value'", "length less than or equal to 63"}}, // the model's own limit
		{"HyperPod's own label", `"KubernetesConfig": {"Labels": {"sagemaker.amazonaws.com/node-health-status": "Schedulable"}}`,
			[]string{"'instanceGroups.1.member.kubernetesConfig.labels'", "HyperPod's own"}},
		{"taint twice", `"KubernetesConfig": {"Taints": [{"Key": "a", "Effect": "NoSchedule"}, {"Key": "a", "Value": "b", "Effect": "NoSchedule"}]}`,
			[]string{"'instanceGroups.1.member.kubernetesConfig.taints.2.member.key'", "appears twice"}},
		{"taint key prefix too long", `"KubernetesConfig": {"Taints": [{"Key": "` + strings.Repeat("a.", 127) + `a/x", "Effect": "NoExecute"}]}`,
			[]string{"'instanceGroups.1.member.kubernetesConfig.taints.1.member.key'", "not a valid Kubernetes taint key"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, err := DecodeInput(LookupOperation("CreateCluster"), []byte(head+c.group+`}]}`))
			if err == nil {
				err = CheckCreateCluster(in.(*CreateClusterRequest))
			}
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if !IsCode(err, CodeValidationException) {
				t.Fatalf("got %v, want a ValidationException", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q:\n%s", w, err)
				}
			}
		})
	}
}
