package service

import (
	"reflect"
	"time"

	"github.com/haleproject/hale/api"
	"github.com/haleproject/hale/internal/store"
)

// This file turns store records into the API's output shapes.

// inService counts as a group's CurrentCount: instances that exist and serve the group.
func inService(s api.ClusterInstanceStatus) bool {
	switch s {
	case api.ClusterInstanceStatusRunning, api.ClusterInstanceStatusSystemUpdating, api.ClusterInstanceStatusDeepHealthCheckInProgress:
		return true
	}
	return false
}

// ClusterDescription is DescribeCluster's answer for a stored cluster, its groups (tx.Groups) and
// its nodes' counts by group and status (tx.NodeCounts): the one conversion of a cluster record,
// which internal/eventbridge's "SageMaker HyperPod Cluster State Change" events reuse. (An Eks
// cluster's nodes' current Kubernetes labels, which DescribeCluster adds, are not in it.)
func ClusterDescription(c *store.Cluster, groups []*store.Group, counts map[string]map[api.ClusterInstanceStatus]int) *api.DescribeClusterResponse {
	return describeCluster(c, groups, counts)
}

func describeCluster(c *store.Cluster, groups []*store.Group, counts map[string]map[api.ClusterInstanceStatus]int) *api.DescribeClusterResponse {
	out := &api.DescribeClusterResponse{
		ClusterArn:           new(c.ARN),
		ClusterName:          new(c.Name),
		ClusterStatus:        new(c.Status),
		CreationTime:         api.TimePtr(c.CreatedAt),
		InstanceGroups:       make([]api.ClusterInstanceGroupDetails, 0, len(groups)),
		VpcConfig:            c.Spec.VpcConfig,
		Orchestrator:         c.Spec.Orchestrator,
		NodeRecovery:         c.Spec.NodeRecovery,
		NodeProvisioningMode: c.Spec.NodeProvisioningMode,
		TieredStorageConfig:  c.Spec.TieredStorageConfig, // Mode Disable, the one hale accepts
		ClusterRole:          c.Spec.ClusterRole,
	}
	if c.FailureMessage != "" {
		out.FailureMessage = new(c.FailureMessage)
	}
	for _, g := range groups {
		out.InstanceGroups = append(out.InstanceGroups, groupDetails(g, counts[g.Name]))
	}
	return out
}

func groupDetails(g *store.Group, counts map[api.ClusterInstanceStatus]int) api.ClusterInstanceGroupDetails {
	sp := &g.Spec
	current := 0
	for st, n := range counts {
		if inService(st) {
			current += n
		}
	}
	d := api.ClusterInstanceGroupDetails{
		CurrentCount:            new(int32(current)),
		TargetCount:             new(sp.GetInstanceCount()),
		MinCount:                sp.MinInstanceCount,
		InstanceGroupName:       new(g.Name),
		InstanceType:            sp.InstanceType,
		LifeCycleConfig:         sp.LifeCycleConfig,
		ExecutionRole:           sp.ExecutionRole,
		ThreadsPerCore:          sp.ThreadsPerCore,
		InstanceStorageConfigs:  sp.InstanceStorageConfigs,
		OnStartDeepHealthChecks: sp.OnStartDeepHealthChecks,
		Status:                  new(g.State.Status),
		TrainingPlanArn:         sp.TrainingPlanArn,
		OverrideVpcConfig:       sp.OverrideVpcConfig,
		ScheduledUpdateConfig:   sp.ScheduledUpdateConfig,
		CapacityRequirements:    sp.CapacityRequirements,
	}
	if g.State.TrainingPlanStatus != "" {
		d.TrainingPlanStatus = new(g.State.TrainingPlanStatus)
	}
	if g.State.CurrentImageID != "" {
		d.CurrentImageId = new(g.State.CurrentImageID)
	}
	if g.State.DesiredImageID != "" {
		d.DesiredImageId = new(g.State.DesiredImageID)
	}
	if v := g.State.CurrentImageReleaseVersion; v != "" {
		d.CurrentImageReleaseVersion = new(v)
	}
	if v := g.State.DesiredImageReleaseVersion; v != "" {
		d.DesiredImageReleaseVersion = new(v)
	}
	if g.State.SoftwareUpdateStatus != "" {
		d.SoftwareUpdateStatus = new(g.State.SoftwareUpdateStatus)
		d.ActiveSoftwareUpdateConfig = g.State.ActiveSoftwareUpdateConfig
	}
	if g.State.Scaling {
		d.ActiveOperations = map[api.ActiveClusterOperationName]int32{api.ActiveClusterOperationNameScaling: 1}
	}
	if r := sp.InstanceRequirements; r != nil {
		d.InstanceRequirements = &api.ClusterInstanceRequirementDetails{CurrentInstanceTypes: r.InstanceTypes, DesiredInstanceTypes: r.InstanceTypes}
	}
	if k := sp.KubernetesConfig; k != nil {
		d.KubernetesConfig = &api.ClusterKubernetesConfigDetails{DesiredLabels: k.Labels, DesiredTaints: k.Taints}
	}
	if a := sp.AutoPatchConfig; a != nil {
		d.AutoPatchConfig = &api.ClusterAutoPatchConfigDetails{PatchingStrategy: a.PatchingStrategy, DeploymentConfig: a.DeploymentConfig}
		// Current: the date the controller will patch at (none once a patch ran); Desired: a
		// date asked for and not taken yet (a patch under way takes it when it ends), else
		// the current one.
		if t := g.State.PatchDate; !t.IsZero() {
			d.AutoPatchConfig.CurrentPatchSchedule = &api.ClusterPatchScheduleDetails{NextPatchDate: new(api.NewTime(t))}
			d.AutoPatchConfig.DesiredPatchSchedule = &api.ClusterPatchScheduleDetails{NextPatchDate: new(api.NewTime(t))}
		}
		if a.PatchSchedule != nil && a.PatchSchedule.NextPatchDate != nil && !a.PatchSchedule.NextPatchDate.Equal(g.State.PatchRequested) {
			d.AutoPatchConfig.DesiredPatchSchedule = &api.ClusterPatchScheduleDetails{NextPatchDate: a.PatchSchedule.NextPatchDate}
		}
	}
	if sc := sp.SlurmConfig; sc != nil {
		d.SlurmConfig = &api.ClusterSlurmConfigDetails{NodeType: sc.NodeType, PartitionNames: sc.PartitionNames}
	}
	if ni := sp.NetworkInterface; ni != nil {
		d.NetworkInterface = &api.ClusterNetworkInterfaceDetails{InterfaceType: ni.InterfaceType}
	}
	return d
}

func clusterSummary(c *store.Cluster, groups []*store.Group) api.ClusterSummary {
	sum := api.ClusterSummary{
		ClusterArn:    new(c.ARN),
		ClusterName:   new(c.Name),
		CreationTime:  api.TimePtr(c.CreatedAt),
		ClusterStatus: new(c.Status),
	}
	for _, g := range groups {
		if p := g.Spec.TrainingPlanArn; p != nil {
			sum.TrainingPlanArns = append(sum.TrainingPlanArns, *p)
		}
	}
	return sum
}

func statusDetails(n *store.Node) *api.ClusterInstanceStatusDetails {
	d := &api.ClusterInstanceStatusDetails{Status: new(n.Status)}
	msg := n.StatusMessage
	if o := n.Details.OrchestratorStatus; o != "" && n.Status == api.ClusterInstanceStatusRunning {
		// The orchestrator's view of the node, e.g. "Slurm node ip-10-1-0-3: idle".
		if msg != "" {
			msg += "; "
		}
		msg += o
	}
	if r := n.Details.RepairStatus; r != "" {
		if msg != "" {
			msg += "; "
		}
		msg += r
	}
	if msg != "" {
		d.Message = new(msg)
	}
	return d
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nodeSummary(n *store.Node, withLogical bool) api.ClusterNodeSummary {
	s := api.ClusterNodeSummary{
		InstanceGroupName:          new(n.GroupName),
		InstanceId:                 new(n.InstanceID),
		InstanceType:               new(api.ClusterInstanceType(n.InstanceType)),
		LaunchTime:                 api.TimePtr(n.LaunchTime),
		InstanceStatus:             statusDetails(n),
		PrivateDnsHostname:         optString(n.Details.PrivateDNSHostname),
		CurrentImageReleaseVersion: optString(n.Details.ImageReleaseVersion),
		UltraServerInfo:            ultraServer(n),
	}
	if withLogical {
		s.NodeLogicalId = new(n.LogicalID)
	}
	if t := n.Details.LastSoftwareUpdateTime; t != nil {
		s.LastSoftwareUpdateTime = api.TimePtr(*t)
	}
	return s
}

func ultraServer(n *store.Node) *api.UltraServerInfo {
	if n.Details.UltraServerID == "" {
		return nil
	}
	return &api.UltraServerInfo{Id: new(n.Details.UltraServerID), Type: optString(n.Details.UltraServerType)}
}

func nodeDetails(n *store.Node, g *store.Group) *api.ClusterNodeDetails {
	d := &api.ClusterNodeDetails{
		InstanceGroupName:          new(n.GroupName),
		InstanceId:                 optString(n.InstanceID),
		NodeLogicalId:              optString(n.LogicalID),
		InstanceStatus:             statusDetails(n),
		InstanceType:               new(api.ClusterInstanceType(n.InstanceType)),
		LaunchTime:                 api.TimePtr(n.LaunchTime),
		PrivatePrimaryIp:           optString(n.Details.PrivateIP),
		PrivateDnsHostname:         optString(n.Details.PrivateDNSHostname),
		CurrentImageId:             optString(n.Details.ImageID),
		CurrentImageReleaseVersion: optString(n.Details.ImageReleaseVersion),
		UltraServerInfo:            ultraServer(n),
	}
	if n.Details.AvailabilityZone != "" || n.Details.AvailabilityZoneID != "" {
		d.Placement = &api.ClusterInstancePlacement{AvailabilityZone: optString(n.Details.AvailabilityZone), AvailabilityZoneId: optString(n.Details.AvailabilityZoneID)}
	}
	if t := n.Details.LastSoftwareUpdateTime; t != nil {
		d.LastSoftwareUpdateTime = api.TimePtr(*t)
	}
	if n.Details.ThreadsPerCore != 0 {
		d.ThreadsPerCore = new(n.Details.ThreadsPerCore)
	}
	if c := n.Details.CapacityType; c != "" {
		d.CapacityType = new(api.ClusterCapacityType(c))
	}
	if g != nil {
		sp := &g.Spec
		d.LifeCycleConfig = sp.LifeCycleConfig
		d.OverrideVpcConfig = sp.OverrideVpcConfig
		d.InstanceStorageConfigs = sp.InstanceStorageConfigs
		if d.ThreadsPerCore == nil {
			d.ThreadsPerCore = sp.ThreadsPerCore
		}
		d.DesiredImageId = optString(g.State.DesiredImageID)
		d.DesiredImageReleaseVersion = optString(g.State.DesiredImageReleaseVersion)
		if k, cur := sp.KubernetesConfig, n.Details.KubernetesConfig; k != nil || cur != nil {
			d.KubernetesConfig = &api.ClusterKubernetesConfigNodeDetails{}
			if k != nil {
				d.KubernetesConfig.DesiredLabels, d.KubernetesConfig.DesiredTaints = k.Labels, k.Taints
			}
			if cur != nil {
				d.KubernetesConfig.CurrentLabels, d.KubernetesConfig.CurrentTaints = cur.Labels, cur.Taints
			}
		}
		if ni := sp.NetworkInterface; ni != nil {
			d.NetworkInterface = &api.ClusterNetworkInterfaceDetails{InterfaceType: ni.InterfaceType}
		}
	}
	return d
}

func eventSummary(e *store.Event) api.ClusterEventSummary {
	return api.ClusterEventSummary{
		EventId:           new(e.ID),
		ClusterArn:        new(e.ClusterARN),
		ClusterName:       new(e.ClusterName),
		InstanceGroupName: optString(e.GroupName),
		InstanceId:        optString(e.InstanceID),
		ResourceType:      new(e.ResourceType),
		EventTime:         api.TimePtr(e.Time),
		Description:       optString(e.Description),
		EventLevel:        new(e.Level),
	}
}

// EventDetail is DescribeClusterEvent's record of a stored event (its EventDetails member), which
// internal/eventbridge's "SageMaker HyperPod Cluster Event" events carry.
func EventDetail(e *store.Event) *api.ClusterEventDetail { return eventDetail(e) }

func eventDetail(e *store.Event) *api.ClusterEventDetail {
	d := &api.ClusterEventDetail{
		EventId:           new(e.ID),
		ClusterArn:        new(e.ClusterARN),
		ClusterName:       new(e.ClusterName),
		InstanceGroupName: optString(e.GroupName),
		InstanceId:        optString(e.InstanceID),
		ResourceType:      new(e.ResourceType),
		EventTime:         api.TimePtr(e.Time),
		Description:       optString(e.Description),
		EventLevel:        new(e.Level),
	}
	if e.Metadata != nil {
		d.EventDetails = &api.EventDetails{EventMetadata: e.Metadata}
	}
	return d
}

func timePtr(t *api.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.Time
	return &v
}

func order(o *api.SortOrder, def store.SortOrder) store.SortOrder {
	switch {
	case o == nil:
		return def
	case *o == api.SortOrderDescending:
		return store.Descending
	}
	return store.Ascending
}

// currentKubernetesConfig fills in each group's Current KubernetesConfig: what was last applied
// to the Nodes of its Running instances, the one not yet updated while an UpdateCluster is
// being applied (none before a node has its Node).
func currentKubernetesConfig(out *api.DescribeClusterResponse, nodes []*store.Node) {
	for i := range out.InstanceGroups {
		g := &out.InstanceGroups[i]
		var cur *api.ClusterKubernetesConfig
		for _, n := range nodes {
			if n.GroupName != g.GetInstanceGroupName() || n.Status != api.ClusterInstanceStatusRunning || n.Details.KubernetesConfig == nil {
				continue
			}
			if cur == nil || sameKubernetesConfig(cur, g.KubernetesConfig) {
				cur = n.Details.KubernetesConfig
			}
		}
		if cur == nil {
			continue
		}
		if g.KubernetesConfig == nil {
			g.KubernetesConfig = &api.ClusterKubernetesConfigDetails{}
		}
		g.KubernetesConfig.CurrentLabels, g.KubernetesConfig.CurrentTaints = cur.Labels, cur.Taints
	}
}

// sameKubernetesConfig: the applied config c is the group's desired one.
func sameKubernetesConfig(c *api.ClusterKubernetesConfig, d *api.ClusterKubernetesConfigDetails) bool {
	if d == nil {
		return len(c.Labels) == 0 && len(c.Taints) == 0
	}
	return reflect.DeepEqual(c.Labels, d.DesiredLabels) && reflect.DeepEqual(c.Taints, d.DesiredTaints)
}
