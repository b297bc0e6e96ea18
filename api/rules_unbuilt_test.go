package api

import (
	"strings"
	"testing"
)

// The members hale cannot honour are refused with the same reason at CreateCluster and
// UpdateCluster, naming the member; Mode Disable asks for nothing and is accepted (and kept).
func TestUnbuiltMembersAreRefusedWithTheirReason(t *testing.T) {
	const group = `"InstanceGroups": [{"InstanceGroupName": "workers", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1,
		"ExecutionRole": "arn:aws:iam::123456789012:role/HyperPodRole", "LifeCycleConfig": {"SourceS3Uri": "s3://b/p/", "OnCreate": "on_create.sh"}}]`
	for _, c := range []struct {
		member, value, path, why string
	}{
		{"TieredStorageConfig", `{"Mode": "Enable", "InstanceMemoryAllocationPercentage": 20}`, "tieredStorageConfig", WhyNoTieredStorage},
		{"AutoScaling", `{"Mode": "Enable", "AutoScalerType": "Karpenter"}`, "autoScaling", WhyNoAutoScaling},
		{"TieredStorageConfig", `{"Mode": "Disable"}`, "", ""},
		{"AutoScaling", `{"Mode": "Disable"}`, "", ""},
	} {
		create, err := DecodeInput(LookupOperation("CreateCluster"), []byte(`{"ClusterName": "c", `+group+`, "`+c.member+`": `+c.value+`}`))
		if err != nil {
			t.Fatal(err)
		}
		update, err := DecodeInput(LookupOperation("UpdateCluster"), []byte(`{"ClusterName": "c", "`+c.member+`": `+c.value+`}`))
		if err != nil {
			t.Fatal(err)
		}
		errs := []error{CheckCreateCluster(create.(*CreateClusterRequest))}
		next, err := MergeUpdate(create.(*CreateClusterRequest), update.(*UpdateClusterRequest))
		errs = append(errs, err)
		for i, err := range errs {
			op := []string{"CreateCluster", "UpdateCluster"}[i]
			if c.why == "" {
				if err != nil {
					t.Errorf("%s %s %s: %v, want accepted", op, c.member, c.value, err)
				}
				continue
			}
			if !IsCode(err, CodeValidationException) || !strings.Contains(err.Error(), "'"+c.path+"'") || !strings.Contains(err.Error(), c.why) {
				t.Errorf("%s %s %s: %v, want a ValidationException at %s saying %q", op, c.member, c.value, err, c.path, c.why)
			}
		}
		if c.why == "" && c.member == "TieredStorageConfig" && (next == nil || next.TieredStorageConfig.GetMode() != ClusterConfigModeDisable) {
			t.Errorf("UpdateCluster did not keep TieredStorageConfig Mode Disable: %+v", next)
		}
	}
	restricted, err := DecodeInput(LookupOperation("CreateCluster"), []byte(`{"ClusterName": "c", `+group+`, "RestrictedInstanceGroups": [{"InstanceGroupName": "nova", "InstanceType": "ml.p5.48xlarge", "InstanceCount": 1, "ExecutionRole": "arn:aws:iam::123456789012:role/HyperPodRole", "EnvironmentConfig": {}}]}`))
	if err == nil {
		err = CheckCreateCluster(restricted.(*CreateClusterRequest))
	}
	if !IsCode(err, CodeValidationException) || !strings.Contains(err.Error(), WhyNoRestrictedGroups) {
		t.Errorf("restricted instance groups: %v", err)
	}
}
