package client

import (
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

func TestDecodeCreateClusterInput(t *testing.T) {
	doc, err := os.ReadFile("../examples/cluster.json")
	if err != nil {
		t.Fatal(err)
	}
	in, err := DecodeCreateClusterInput(doc)
	if err != nil {
		t.Fatal(err)
	}
	if *in.ClusterName != "demo" || len(in.InstanceGroups) != 4 || in.InstanceGroups[2].SlurmConfig.NodeType != types.ClusterSlurmNodeTypeCompute {
		t.Fatalf("decoded %+v", in)
	}
	fsx, ok := in.InstanceGroups[2].InstanceStorageConfigs[0].(*types.ClusterInstanceStorageConfigMemberFsxLustreConfig)
	if !ok || *fsx.Value.MountPath != "/fsx" {
		t.Fatalf("storage config %#v", in.InstanceGroups[2].InstanceStorageConfigs)
	}
	for _, bad := range []string{
		`{"ClusterName": "x", "ResilienceConfig": {}}`,
		`{"ClusterName": "x", "InstanceGroups": [{"InstanceStorageConfigs": [{"EbsVolumeConfig": {"Size": 1}}]}]}`,
		`{"ClusterName": "x", "InstanceGroups": [{"InstanceStorageConfigs": [{}]}]}`,
		`{"ClusterName": "x",}`,
	} {
		if _, err := DecodeCreateClusterInput([]byte(bad)); err == nil || !strings.Contains(err.Error(), "CreateCluster document") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
