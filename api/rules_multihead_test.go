package api

import (
	"strings"
	"testing"
)

// TestMultiHeadNeedsASharedFileSystem: a Slurm Controller group of two or more instances
// (multi-head) shares slurmctld's state, so it must mount an FSx file system; one controller
// needs none, and two with FSx for Lustre or OpenZFS are valid.
func TestMultiHeadNeedsASharedFileSystem(t *testing.T) {
	const vpc = `"VpcConfig": {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]}, `
	group := func(count, storage string) string {
		return `{"ClusterName": "mh", ` + vpc + `"InstanceGroups": [{"InstanceGroupName": "controller", "InstanceType": "ml.c5.xlarge", "InstanceCount": ` + count + `,
		"ExecutionRole": "arn:aws:iam::123456789012:role/HyperPodRole", "SlurmConfig": {"NodeType": "Controller"}, ` + storage + `
		"LifeCycleConfig": {"SourceS3Uri": "s3://b/p/", "OnCreate": "on_create.sh"}}]}`
	}
	const lustre = `"InstanceStorageConfigs": [{"FsxLustreConfig": {"DnsName": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com", "MountName": "abc"}}],`
	const zfs = `"InstanceStorageConfigs": [{"FsxOpenZfsConfig": {"DnsName": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com"}}],`
	for _, c := range []struct {
		name, body string
		bad        bool
	}{
		{"one controller, no FSx", group("1", ""), false},
		{"two controllers, no FSx", group("2", ""), true},
		{"two controllers, FSx for Lustre", group("2", lustre), false},
		{"three controllers, FSx for OpenZFS", group("3", zfs), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, err := DecodeInput(LookupOperation("CreateCluster"), []byte(c.body))
			if err == nil {
				err = CheckCreateCluster(in.(*CreateClusterRequest))
			}
			if !c.bad {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if !IsCode(err, CodeValidationException) || !strings.Contains(err.Error(), "'instanceGroups.1.member.instanceStorageConfigs'") ||
				!strings.Contains(err.Error(), "Slurm multi-head") {
				t.Fatalf("got %v, want a ValidationException naming instanceStorageConfigs and multi-head", err)
			}
		})
	}
}
