package client

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// DecodeCreateClusterInput reads a CreateCluster JSON document (what `aws sagemaker
// create-cluster --cli-input-json` takes) into the AWS SDK for Go v2's input type, for Go
// programs that keep their cluster definitions as such files. The SDK's types share the wire's
// member names but carry no JSON tags, so encoding/json fills them, except for the
// InstanceStorageConfigs union, which the SDK models as an interface and which is filled here.
// Unknown members are an error.
func DecodeCreateClusterInput(doc []byte) (*sagemaker.CreateClusterInput, error) {
	var raw struct {
		InstanceGroups []struct {
			InstanceStorageConfigs []map[string]json.RawMessage
		}
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, fmt.Errorf("CreateCluster document: %w", err)
	}
	var generic map[string]any
	json.Unmarshal(doc, &generic)
	if groups, ok := generic["InstanceGroups"].([]any); ok {
		for _, g := range groups {
			if m, ok := g.(map[string]any); ok {
				delete(m, "InstanceStorageConfigs")
			}
		}
	}
	rest, _ := json.Marshal(generic)
	in := new(sagemaker.CreateClusterInput)
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(in); err != nil {
		return nil, fmt.Errorf("CreateCluster document: %w", err)
	}
	for i, g := range raw.InstanceGroups {
		for j, item := range g.InstanceStorageConfigs {
			member, err := storageConfig(item)
			if err != nil {
				return nil, fmt.Errorf("CreateCluster document: InstanceGroups[%d].InstanceStorageConfigs[%d]: %w", i, j, err)
			}
			in.InstanceGroups[i].InstanceStorageConfigs = append(in.InstanceGroups[i].InstanceStorageConfigs, member)
		}
	}
	return in, nil
}

// storageConfig turns one ClusterInstanceStorageConfig union value into the SDK's member type.
func storageConfig(item map[string]json.RawMessage) (types.ClusterInstanceStorageConfig, error) {
	if len(item) != 1 {
		return nil, fmt.Errorf("a ClusterInstanceStorageConfig sets exactly one member, not %d", len(item))
	}
	strict := func(b []byte, v any) error {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		return dec.Decode(v)
	}
	for name, b := range item {
		switch name {
		case "EbsVolumeConfig":
			m := &types.ClusterInstanceStorageConfigMemberEbsVolumeConfig{}
			return m, strict(b, &m.Value)
		case "FsxLustreConfig":
			m := &types.ClusterInstanceStorageConfigMemberFsxLustreConfig{}
			return m, strict(b, &m.Value)
		case "FsxOpenZfsConfig":
			m := &types.ClusterInstanceStorageConfigMemberFsxOpenZfsConfig{}
			return m, strict(b, &m.Value)
		}
		return nil, fmt.Errorf("unknown ClusterInstanceStorageConfig member %q", name)
	}
	return nil, nil
}
