package slurmconf

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/haleproject/hale/api"
)

// The provisioning_parameters.json hale writes for an API-driven cluster says the same roles as
// its SlurmConfig (older lifecycle scripts read one, hale the other), with the first FSx file
// system's names; a cluster without SlurmConfig gets none.
func TestProvisioningParametersSayTheAPIRoles(t *testing.T) {
	role := func(name string, t api.ClusterSlurmNodeType, parts ...string) api.ClusterInstanceGroupSpecification {
		return api.ClusterInstanceGroupSpecification{InstanceGroupName: new(name), SlurmConfig: &api.ClusterSlurmConfig{NodeType: new(t), PartitionNames: parts}}
	}
	gpu := role("gpu", api.ClusterSlurmNodeTypeCompute, "train")
	gpu.InstanceStorageConfigs = []api.ClusterInstanceStorageConfig{{FsxLustreConfig: &api.ClusterFsxLustreConfig{DnsName: new("fs-1.fsx.us-west-2.amazonaws.com"), MountName: new("abcd")}}}
	groups := []api.ClusterInstanceGroupSpecification{role("controller", api.ClusterSlurmNodeTypeController), role("login", api.ClusterSlurmNodeTypeLogin),
		gpu, role("cpu", api.ClusterSlurmNodeTypeCompute, "dev")}
	doc := BuildProvisioningParameters(groups)
	var pp ProvisioningParameters
	if err := json.Unmarshal(doc, &pp); err != nil {
		t.Fatalf("%v: %s", err, doc)
	}
	if pp.WorkloadManager != "slurm" || pp.FsxDNSName != "fs-1.fsx.us-west-2.amazonaws.com" || pp.FsxMountName != "abcd" ||
		len(pp.WorkerGroups) != 2 || pp.WorkerGroups[0].InstanceGroupName != "gpu" {
		t.Errorf("provisioning_parameters.json: %s", doc)
	}
	fromFile, err := RolesFromProvisioningParameters(doc)
	if err != nil {
		t.Fatal(err)
	}
	fromAPI, _ := RolesFromAPI(groups)
	if fromFile.Controller != fromAPI.Controller || fromFile.Login != fromAPI.Login || !maps.Equal(fromFile.Workers, fromAPI.Workers) {
		t.Errorf("roles from the file %+v, from the API %+v", fromFile, fromAPI)
	}
	if doc := BuildProvisioningParameters([]api.ClusterInstanceGroupSpecification{{InstanceGroupName: new("workers")}}); doc != nil {
		t.Errorf("a cluster without SlurmConfig got %s", doc)
	}
}
