package api

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// This file is the one place for the rules the service model cannot say: members that exclude
// or require each other, roles across instance groups, and what UpdateCluster may change. Each
// rule names its source. Violations are worded like the model's constraint errors and returned
// as one ValidationException, before anything is stored.

// CheckCreateCluster applies CreateCluster's cross-field rules to a request that already passed
// the model's constraints.
//
// Members the model has but hale cannot honour on its machines (restricted instance groups,
// tiered storage and autoscaling enabled) are refused with the reason (refuseUnbuilt):
// accepting them silently would promise behaviour hale lacks.
func CheckCreateCluster(in *CreateClusterRequest) error {
	var v validator
	refuseUnbuilt(&v, in.RestrictedInstanceGroups != nil || in.RestrictedInstanceGroupsConfig != nil, in.TieredStorageConfig, in.AutoScaling)
	if len(in.InstanceGroups) == 0 {
		// The model made InstanceGroups optional for restricted-group-only clusters, which hale
		// does not serve; without groups there is nothing to create.
		v.violation("instanceGroups", "Member must have at least one instance group")
	}
	checkOrchestrator(&v, in.Orchestrator, "orchestrator")
	checkTags(&v, in.Tags, "tags")
	ctx := groupContext{orchestrator: in.Orchestrator, vpc: in.VpcConfig}
	seen := map[string]bool{}
	for i := range in.InstanceGroups {
		g := &in.InstanceGroups[i]
		p := listPath("instanceGroups", i)
		if seen[g.GetInstanceGroupName()] {
			v.violation(memberPath(p, "instanceGroupName"), fmt.Sprintf("Instance group names must be unique; %q appears more than once", g.GetInstanceGroupName()))
		}
		seen[g.GetInstanceGroupName()] = true
		checkGroup(&v, g, p, ctx)
	}
	checkSlurmRoles(&v, in.InstanceGroups, in.Orchestrator)
	return v.err()
}

// groupContext is what a group's rules need to know about its cluster.
type groupContext struct {
	orchestrator *ClusterOrchestrator
	vpc          *VpcConfig
}

func isEks(o *ClusterOrchestrator) bool { return o != nil && o.Eks != nil }

// checkOrchestrator: Orchestrator holds exactly one of Eks and Slurm (SageMaker API reference,
// ClusterOrchestrator; the model makes it a plain structure).
func checkOrchestrator(v *validator, o *ClusterOrchestrator, path string) {
	if o == nil {
		return
	}
	n := 0
	if o.Eks != nil {
		n++
	}
	if o.Slurm != nil {
		n++
	}
	if n != 1 {
		v.violation(path, "Orchestrator must have exactly one of Eks or Slurm")
	}
}

// checkTags: a resource's tag keys are unique (AddTags overwrites, so a request that names a
// key twice is ambiguous).
func checkTags(v *validator, tags []Tag, path string) {
	seen := map[string]bool{}
	for i, t := range tags {
		if seen[t.GetKey()] {
			v.violation(memberPath(listPath(path, i), "key"), fmt.Sprintf("Tag keys must be unique; %q appears more than once", t.GetKey()))
		}
		seen[t.GetKey()] = true
	}
}

// checkGroup applies the rules that concern one instance group specification.
func checkGroup(v *validator, g *ClusterInstanceGroupSpecification, p string, ctx groupContext) {
	// InstanceType and InstanceRequirements are mutually exclusive, and one is needed
	// (ClusterInstanceGroupSpecification docs, flexible instance groups).
	switch {
	case g.InstanceType != nil && g.InstanceRequirements != nil:
		v.violation(memberPath(p, "instanceRequirements"), "InstanceType and InstanceRequirements are mutually exclusive")
	case g.InstanceType == nil && g.InstanceRequirements == nil:
		v.violation(memberPath(p, "instanceType"), "Member must be set when InstanceRequirements is not")
	}
	if g.MinInstanceCount != nil && g.InstanceCount != nil && *g.MinInstanceCount > *g.InstanceCount {
		v.violation(memberPath(p, "minInstanceCount"), fmt.Sprintf("MinInstanceCount (%d) must not exceed InstanceCount (%d)", *g.MinInstanceCount, *g.InstanceCount))
	}
	checkStorage(v, g, p, ctx)
	checkLifeCycle(v, g, p, ctx)
	if isEks(ctx.orchestrator) && g.SlurmConfig != nil {
		v.violation(memberPath(p, "slurmConfig"), "SlurmConfig is only allowed on clusters orchestrated by Slurm")
	}
	if !isEks(ctx.orchestrator) && g.KubernetesConfig != nil {
		v.violation(memberPath(p, "kubernetesConfig"), "KubernetesConfig is only allowed on clusters orchestrated by EKS")
	}
	checkKubernetesConfig(v, g.KubernetesConfig, memberPath(p, "kubernetesConfig"))
	if sc := g.SlurmConfig; sc != nil {
		// Partitions belong to Compute groups only (HyperPod Slurm configuration reference:
		// "Partitions can only be assigned to Compute node types"); a Compute group names its
		// partition (research §6 item 4).
		switch {
		case sc.GetNodeType() != ClusterSlurmNodeTypeCompute && len(sc.PartitionNames) > 0:
			v.violation(memberPath(p, "slurmConfig.partitionNames"), "Partitions can only be assigned to Compute node types")
		case sc.GetNodeType() == ClusterSlurmNodeTypeCompute && len(sc.PartitionNames) == 0:
			v.violation(memberPath(p, "slurmConfig.partitionNames"), "A Compute group must name its partition in PartitionNames")
		}
		if sc.GetNodeType() == ClusterSlurmNodeTypeController && g.InstanceCount != nil && *g.InstanceCount < 1 {
			v.violation(memberPath(p, "instanceCount"), "The Controller group must have at least one instance")
		}
		if sc.GetNodeType() == ClusterSlurmNodeTypeController && g.InstanceCount != nil && *g.InstanceCount > 1 && SharedMountPath(g) == "" {
			// Multi-head: the controllers share slurmctld's state directory, which needs a file
			// system every one of them mounts (HyperPod's multi-head keeps it on FSx).
			v.violation(memberPath(p, "instanceStorageConfigs"), fmt.Sprintf("A Controller group of %d instances (Slurm multi-head: a primary and backup controllers) needs a shared file system for slurmctld's state: add an FsxLustreConfig or FsxOpenZfsConfig", *g.InstanceCount))
		}
	}
}

// checkStorage: EbsVolumeConfig with RootVolume=true describes the root volume (no size, a KMS
// key required); otherwise it is the secondary volume at /opt/sagemaker and needs a size. At most
// one of each FSx kind per group, and FSx needs a custom VPC (ClusterEbsVolumeConfig docs;
// HyperPod getting-started "FSx configurations are only supported for Custom VPC").
func checkStorage(v *validator, g *ClusterInstanceGroupSpecification, p string, ctx groupContext) {
	var lustre, zfs, rootEbs, dataEbs int
	for i, sc := range g.InstanceStorageConfigs {
		sp := listPath(memberPath(p, "instanceStorageConfigs"), i)
		if e := sc.EbsVolumeConfig; e != nil {
			ep := memberPath(sp, "ebsVolumeConfig")
			if e.GetRootVolume() {
				rootEbs++
				if e.VolumeSizeInGB != nil {
					v.violation(memberPath(ep, "volumeSizeInGB"), "VolumeSizeInGB must not be set when RootVolume is true; the service sizes the root volume")
				}
				if e.VolumeKmsKeyId == nil {
					v.violation(memberPath(ep, "volumeKmsKeyId"), "VolumeKmsKeyId is required when RootVolume is true")
				}
			} else {
				dataEbs++
				if e.VolumeSizeInGB == nil {
					v.violation(memberPath(ep, "volumeSizeInGB"), "VolumeSizeInGB is required for a secondary EBS volume (RootVolume false)")
				}
			}
		}
		if sc.FsxLustreConfig != nil {
			lustre++
		}
		if sc.FsxOpenZfsConfig != nil {
			zfs++
		}
	}
	sp := memberPath(p, "instanceStorageConfigs")
	if lustre > 1 {
		v.violation(sp, "At most one FsxLustreConfig per instance group")
	}
	if zfs > 1 {
		v.violation(sp, "At most one FsxOpenZfsConfig per instance group")
	}
	if rootEbs > 1 || dataEbs > 1 {
		v.violation(sp, "At most one root and one secondary EbsVolumeConfig per instance group")
	}
	if (lustre > 0 || zfs > 0) && ctx.vpc == nil && g.OverrideVpcConfig == nil {
		v.violation(sp, "FSx configurations are only supported for Custom VPC; set VpcConfig")
	}
}

// checkLifeCycle: OnCreate and OnInitComplete exclude each other, either needs SourceS3Uri, a
// LifeCycleConfig must configure something, and EKS groups need one (HyperPod getting-started,
// "Common validation errors").
func checkLifeCycle(v *validator, g *ClusterInstanceGroupSpecification, p string, ctx groupContext) {
	lc := g.LifeCycleConfig
	lp := memberPath(p, "lifeCycleConfig")
	if lc == nil {
		if isEks(ctx.orchestrator) {
			v.violation(lp, "LifeCycleConfig is required for instance groups of EKS clusters")
		}
		return
	}
	switch {
	case lc.OnCreate != nil && lc.OnInitComplete != nil:
		v.violation(lp, "OnCreate and OnInitComplete in LifeCycleConfig are mutually exclusive")
	case lc.OnCreate == nil && lc.OnInitComplete == nil:
		v.violation(lp, "LifeCycleConfig is provided but contains no configuration; set OnCreate or OnInitComplete")
	case lc.SourceS3Uri == nil:
		v.violation(memberPath(lp, "sourceS3Uri"), "LifeCycleConfig is incomplete; OnCreate or OnInitComplete needs SourceS3Uri")
	}
}

// checkSlurmRoles: on an API-driven Slurm cluster (groups carry SlurmConfig) every group has a
// role, there is exactly one Controller group and at most one Login group (HyperPod Slurm
// configuration reference; "Cluster must have exactly one InstanceGroup with Controller node
// type"). Clusters without SlurmConfig take roles from provisioning_parameters.json instead.
func checkSlurmRoles(v *validator, groups []ClusterInstanceGroupSpecification, o *ClusterOrchestrator) {
	if isEks(o) {
		return
	}
	var with, without []string
	var controllers, logins []string
	for i := range groups {
		g := &groups[i]
		if g.SlurmConfig == nil {
			without = append(without, g.GetInstanceGroupName())
			continue
		}
		with = append(with, g.GetInstanceGroupName())
		switch g.SlurmConfig.GetNodeType() {
		case ClusterSlurmNodeTypeController:
			controllers = append(controllers, g.GetInstanceGroupName())
		case ClusterSlurmNodeTypeLogin:
			logins = append(logins, g.GetInstanceGroupName())
		}
	}
	if len(with) == 0 {
		return
	}
	if len(without) > 0 {
		v.violation("instanceGroups", fmt.Sprintf("SlurmConfig must be set on every instance group once any group sets it; missing on %s", strings.Join(without, ", ")))
	}
	switch {
	case len(controllers) == 0:
		v.violation("instanceGroups", "Cluster must have exactly one InstanceGroup with Controller node type; found none")
	case len(controllers) > 1:
		v.violation("instanceGroups", fmt.Sprintf("Cluster must have exactly one InstanceGroup with Controller node type; found %d (%s)", len(controllers), strings.Join(controllers, ", ")))
	}
	if len(logins) > 1 {
		v.violation("instanceGroups", fmt.Sprintf("Cluster may have at most one InstanceGroup with Login node type; found %d (%s)", len(logins), strings.Join(logins, ", ")))
	}
}

// MergeUpdate applies UpdateCluster's rules to in against the cluster's current specification
// cur (as created and updated so far) and returns the specification after the update; cur is
// not modified. Groups the request omits stay as they are; a group the request names replaces
// the stored one, except that members it omits keep their stored values; unknown names add
// groups; InstanceGroupsToDelete removes groups (research §5.2).
//
// Immutable after creation: a group's SlurmConfig.NodeType (HyperPod Slurm configuration
// reference), a group's ImageId (changed only by UpdateClusterSoftware), the orchestrator kind
// and the EKS cluster it belongs to, and NodeProvisioningMode on Slurm clusters (Continuous is
// chosen at creation). The Controller group cannot be deleted.
func MergeUpdate(cur *CreateClusterRequest, in *UpdateClusterRequest) (*CreateClusterRequest, error) {
	var v validator
	refuseUnbuilt(&v, in.RestrictedInstanceGroups != nil || in.RestrictedInstanceGroupsConfig != nil, in.TieredStorageConfig, in.AutoScaling)
	next := *cur
	next.InstanceGroups = slices.Clone(cur.InstanceGroups)

	if in.Orchestrator != nil {
		checkOrchestrator(&v, in.Orchestrator, "orchestrator")
		switch {
		case isEks(cur.Orchestrator) != isEks(in.Orchestrator):
			v.violation("orchestrator", "The orchestrator of a cluster cannot change between Eks and Slurm")
		case isEks(cur.Orchestrator) && in.Orchestrator.Eks.GetClusterArn() != cur.Orchestrator.Eks.GetClusterArn():
			v.violation("orchestrator.eks.clusterArn", "The EKS cluster a HyperPod cluster belongs to cannot change")
		case in.Orchestrator.Slurm != nil && in.Orchestrator.Slurm.SlurmConfigStrategy != nil && cur.GetNodeProvisioningMode() == ClusterNodeProvisioningModeContinuous:
			// HyperPod migration page: Continuous clusters reject UpdateCluster requests that set
			// SlurmConfigStrategy explicitly.
			v.violation("orchestrator.slurm.slurmConfigStrategy", "Clusters with NodeProvisioningMode Continuous do not accept an explicit SlurmConfigStrategy")
		}
		next.Orchestrator = in.Orchestrator
	}
	if in.NodeProvisioningMode != nil {
		if in.GetNodeProvisioningMode() != cur.GetNodeProvisioningMode() && !isEks(cur.Orchestrator) {
			v.violation("nodeProvisioningMode", "NodeProvisioningMode of a Slurm cluster is chosen at creation and cannot change")
		}
		next.NodeProvisioningMode = in.NodeProvisioningMode
	}
	if in.NodeRecovery != nil {
		next.NodeRecovery = in.NodeRecovery
	}
	if in.TieredStorageConfig != nil { // Mode Disable (refuseUnbuilt refused the rest)
		next.TieredStorageConfig = in.TieredStorageConfig
	}
	if in.AutoScaling != nil {
		next.AutoScaling = in.AutoScaling
	}
	if in.ClusterRole != nil {
		next.ClusterRole = in.ClusterRole
	}

	index := map[string]int{}
	for i, g := range next.InstanceGroups {
		index[g.GetInstanceGroupName()] = i
	}
	deleting := map[string]bool{}
	for i, name := range in.InstanceGroupsToDelete {
		p := listPath("instanceGroupsToDelete", i)
		j, ok := index[name]
		switch {
		case deleting[name]:
			v.violation(p, fmt.Sprintf("Instance group %q is named more than once", name))
		case !ok:
			v.violation(p, fmt.Sprintf("Instance group %q does not exist in this cluster", name))
		case next.InstanceGroups[j].SlurmConfig != nil && next.InstanceGroups[j].SlurmConfig.GetNodeType() == ClusterSlurmNodeTypeController:
			v.violation(p, fmt.Sprintf("Instance group %q is the Slurm Controller group and cannot be deleted", name))
		}
		deleting[name] = true
	}

	ctx := groupContext{orchestrator: next.Orchestrator, vpc: next.VpcConfig}
	named := map[string]bool{}
	for i := range in.InstanceGroups {
		g := in.InstanceGroups[i]
		p := listPath("instanceGroups", i)
		name := g.GetInstanceGroupName()
		if named[name] {
			v.violation(memberPath(p, "instanceGroupName"), fmt.Sprintf("Instance group names must be unique; %q appears more than once", name))
		}
		named[name] = true
		if deleting[name] {
			v.violation(memberPath(p, "instanceGroupName"), fmt.Sprintf("Instance group %q cannot be both updated and deleted", name))
		}
		j, exists := index[name]
		if exists {
			old := next.InstanceGroups[j]
			fillOmitted(&g, &old)
			if old.SlurmConfig != nil && g.SlurmConfig.GetNodeType() != old.SlurmConfig.GetNodeType() {
				v.violation(memberPath(p, "slurmConfig.nodeType"), fmt.Sprintf("SlurmConfig.NodeType cannot change after creation (group %q is %s)", name, old.SlurmConfig.GetNodeType()))
			}
			if old.ImageId != nil && g.GetImageId() != old.GetImageId() {
				v.violation(memberPath(p, "imageId"), "ImageId of an existing instance group changes only through UpdateClusterSoftware")
			}
			next.InstanceGroups[j] = g
		} else {
			next.InstanceGroups = append(next.InstanceGroups, g)
			index[name] = len(next.InstanceGroups) - 1
		}
		checkGroup(&v, &g, p, ctx)
	}
	if len(deleting) > 0 {
		kept := next.InstanceGroups[:0:0]
		for _, g := range next.InstanceGroups {
			if !deleting[g.GetInstanceGroupName()] {
				kept = append(kept, g)
			}
		}
		next.InstanceGroups = kept
	}
	checkSlurmRoles(&v, next.InstanceGroups, next.Orchestrator)
	if err := v.err(); err != nil {
		return nil, err
	}
	return &next, nil
}

// fillOmitted gives the optional members g omits the values stored in old, so that a partial
// group specification never erases a lifecycle configuration, storage or role by accident.
func fillOmitted(g, old *ClusterInstanceGroupSpecification) {
	if g.InstanceType == nil && g.InstanceRequirements == nil {
		g.InstanceType, g.InstanceRequirements = old.InstanceType, old.InstanceRequirements
	}
	if g.LifeCycleConfig == nil {
		g.LifeCycleConfig = old.LifeCycleConfig
	}
	if g.ThreadsPerCore == nil {
		g.ThreadsPerCore = old.ThreadsPerCore
	}
	if g.InstanceStorageConfigs == nil {
		g.InstanceStorageConfigs = old.InstanceStorageConfigs
	}
	if g.OnStartDeepHealthChecks == nil {
		g.OnStartDeepHealthChecks = old.OnStartDeepHealthChecks
	}
	if g.TrainingPlanArn == nil {
		g.TrainingPlanArn = old.TrainingPlanArn
	}
	if g.OverrideVpcConfig == nil {
		g.OverrideVpcConfig = old.OverrideVpcConfig
	}
	if g.ScheduledUpdateConfig == nil {
		g.ScheduledUpdateConfig = old.ScheduledUpdateConfig
	}
	if g.ImageId == nil {
		g.ImageId = old.ImageId
	}
	if g.AutoPatchConfig == nil {
		g.AutoPatchConfig = old.AutoPatchConfig
	}
	if g.ImageReleaseVersion == nil {
		g.ImageReleaseVersion = old.ImageReleaseVersion
	}
	if g.KubernetesConfig == nil {
		g.KubernetesConfig = old.KubernetesConfig
	}
	if g.SlurmConfig == nil {
		g.SlurmConfig = old.SlurmConfig
	}
	if g.CapacityRequirements == nil {
		g.CapacityRequirements = old.CapacityRequirements
	}
	if g.NetworkInterface == nil {
		g.NetworkInterface = old.NetworkInterface
	}
	if g.MinInstanceCount == nil {
		g.MinInstanceCount = old.MinInstanceCount
	}
}

// CheckTags applies the tag rules to an AddTags request: keys are unique within the request.
func CheckTags(tags []Tag) error {
	var v validator
	checkTags(&v, tags, "tags")
	return v.err()
}

// CheckNodeChoice: operations that address nodes by NodeIds and/or NodeLogicalIds need at least
// one of them (BatchDeleteClusterNodes, BatchRebootClusterNodes, BatchReplaceClusterNodes
// docs); DescribeClusterNode needs exactly one (exactly=true).
func CheckNodeChoice(hasIDs, hasLogical, exactly bool, idMember, logicalMember string) error {
	var v validator
	switch {
	case exactly && hasIDs && hasLogical:
		v.violation(lowerCamelName(idMember), fmt.Sprintf("%s and %s are mutually exclusive", idMember, logicalMember))
	case !hasIDs && !hasLogical:
		v.violation(lowerCamelName(idMember), fmt.Sprintf("Either %s or %s must be set", idMember, logicalMember))
	}
	return v.err()
}

// hyperPodLabelPrefix is the prefix of HyperPod's own Node labels and taint (node-health-status,
// instance-group-name, ...), which hale sets and reads: a group's KubernetesConfig may not set
// them, or a user's label would mark a node healthy or ask for its repair.
const hyperPodLabelPrefix = "sagemaker.amazonaws.com/"

// checkKubernetesConfig applies Kubernetes' own rules for label and taint keys and values
// (k8s.io/apimachinery's validation: a qualified name with a DNS-subdomain prefix of at most 253
// characters and a name of at most 63; values of at most 63), which the service model's
// patterns do not fully state, so a group whose Nodes the API server would refuse is refused
// at CreateCluster or UpdateCluster instead. Two taints with the same key and effect are
// refused as the API server refuses them.
func checkKubernetesConfig(v *validator, k *ClusterKubernetesConfig, p string) {
	if k == nil {
		return
	}
	keys := make([]string, 0, len(k.Labels))
	for key := range k.Labels {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	lp := memberPath(p, "labels")
	for _, key := range keys {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			v.violation(lp, fmt.Sprintf("Label key %q is not a valid Kubernetes label key: %s", key, strings.Join(errs, "; ")))
		} else if strings.HasPrefix(key, hyperPodLabelPrefix) {
			v.violation(lp, fmt.Sprintf("Label key %q: keys under %s are HyperPod's own and set by the service", key, hyperPodLabelPrefix))
		}
		if errs := validation.IsValidLabelValue(k.Labels[key]); len(errs) > 0 {
			v.violation(lp, fmt.Sprintf("Label %q value %q is not a valid Kubernetes label value: %s", key, k.Labels[key], strings.Join(errs, "; ")))
		}
	}
	seen := map[string]bool{}
	for i, t := range k.Taints {
		tp := listPath(memberPath(p, "taints"), i)
		key := t.GetKey()
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			v.violation(memberPath(tp, "key"), fmt.Sprintf("Taint key %q is not a valid Kubernetes taint key: %s", key, strings.Join(errs, "; ")))
		} else if strings.HasPrefix(key, hyperPodLabelPrefix) {
			v.violation(memberPath(tp, "key"), fmt.Sprintf("Taint key %q: keys under %s are HyperPod's own and set by the service", key, hyperPodLabelPrefix))
		}
		if t.Value != nil {
			if errs := validation.IsValidLabelValue(*t.Value); len(errs) > 0 {
				v.violation(memberPath(tp, "value"), fmt.Sprintf("Taint value %q is not a valid Kubernetes taint value: %s", *t.Value, strings.Join(errs, "; ")))
			}
		}
		if id := key + ":" + string(t.GetEffect()); seen[id] {
			v.violation(memberPath(tp, "key"), fmt.Sprintf("Taint %s appears twice: a Node has one taint per key and effect", id))
		} else {
			seen[id] = true
		}
	}
}

// CheckImageIds: every instance group's ImageId names an image the server has, or "default"
// (hale's default image). usable says why an id cannot be used (unknown, still building,
// failed), or nil; the model's pattern (`ami-[0-9a-fA-F]{8,17}|default`) has been checked
// already. Errors name each group's member path and the id, as one ValidationException:
//
//	Value 'ami-…' at 'instanceGroups.2.member.imageId' failed to satisfy constraint: …
//
// HyperPod refuses an AMI it cannot find the same way (CreateCluster, custom AMIs).
func CheckImageIds(groups []ClusterInstanceGroupSpecification, usable func(id string) error) error {
	var v validator
	for i, g := range groups {
		if g.ImageId == nil {
			continue
		}
		if err := usable(*g.ImageId); err != nil {
			v.add(quote(*g.ImageId), memberPath(listPath("instanceGroups", i), "imageId"), err.Error())
		}
	}
	return v.err()
}

// CheckScheduleExpressions checks each group's ScheduledUpdateConfig.ScheduleExpression with
// parse (AWS cron, internal/schedule); every expression that does not parse is a violation
// naming its group's path and parse's reason.
func CheckScheduleExpressions(groups []ClusterInstanceGroupSpecification, parse func(expr string) error) error {
	var v validator
	for i, g := range groups {
		if g.ScheduledUpdateConfig == nil || g.ScheduledUpdateConfig.ScheduleExpression == nil {
			continue
		}
		if err := parse(*g.ScheduledUpdateConfig.ScheduleExpression); err != nil {
			v.add(quote(*g.ScheduledUpdateConfig.ScheduleExpression), memberPath(memberPath(listPath("instanceGroups", i), "scheduledUpdateConfig"), "scheduleExpression"), err.Error())
		}
	}
	return v.err()
}

// The reasons hale gives, the same at CreateCluster and UpdateCluster, for the members of the
// model it cannot honour on its machines (docs/api.md, "Members hale refuses").
const (
	// WhyNoRestrictedGroups: HyperPod's restricted instance groups run Amazon Nova customization
	// in an environment SageMaker manages and the customer cannot reach.
	WhyNoRestrictedGroups = "restricted instance groups run Amazon Nova model customization in an environment SageMaker manages; hale has no such environment on its machines. Use InstanceGroups"
	// WhyNoTieredStorage: managed tiered checkpointing keeps checkpoints in a share of each
	// node's memory through AWS's checkpointing library and daemon.
	WhyNoTieredStorage = "tiered storage is HyperPod's managed tiered checkpointing (checkpoints in a share of each node's memory, through AWS's checkpointing library), which hale does not provide; write checkpoints to the cluster's FSx mount. Mode Disable is accepted"
	// WhyNoAutoScaling: Karpenter autoscaling needs capacity to launch on demand.
	WhyNoAutoScaling = "autoscaling with Karpenter launches and removes instances on demand, and hale's providers have no such capacity (the local provider's nodes are this machine's, the static provider's a fixed list of hosts); scale with UpdateCluster or BatchAddClusterNodes. Mode Disable is accepted"
)

// refuseUnbuilt adds a violation for each member hale cannot honour: restricted groups, tiered
// storage and autoscaling enabled (Mode Disable asks for nothing, and is kept and echoed).
func refuseUnbuilt(v *validator, restricted bool, tiered *ClusterTieredStorageConfig, scaling *ClusterAutoScalingConfig) {
	if restricted {
		v.violation("restrictedInstanceGroups", WhyNoRestrictedGroups)
	}
	if tiered != nil && tiered.GetMode() != ClusterConfigModeDisable {
		v.violation("tieredStorageConfig", WhyNoTieredStorage)
	}
	if scaling != nil && scaling.GetMode() != ClusterAutoScalingModeDisable {
		v.violation("autoScaling", WhyNoAutoScaling)
	}
}
