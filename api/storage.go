package api

import "cmp"

// Where a group's nodes mount its FSx file systems when the configuration names no MountPath
// (HyperPod's defaults, research: the HyperPod API notes, §2.6).
const (
	DefaultFsxLustreMountPath  = "/fsx"
	DefaultFsxOpenZfsMountPath = "/home"
)

// SharedMountPath is where a group's nodes mount the cluster's shared file system: its FSx for
// Lustre, else its FSx for OpenZFS, "" when it has neither. A Slurm multi-head cluster keeps its
// controllers' state there.
func SharedMountPath(g *ClusterInstanceGroupSpecification) string {
	for _, s := range g.InstanceStorageConfigs {
		if f := s.FsxLustreConfig; f != nil {
			return cmp.Or(f.GetMountPath(), DefaultFsxLustreMountPath)
		}
	}
	for _, s := range g.InstanceStorageConfigs {
		if f := s.FsxOpenZfsConfig; f != nil {
			return cmp.Or(f.GetMountPath(), DefaultFsxOpenZfsMountPath)
		}
	}
	return ""
}
