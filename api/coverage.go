package api

// Coverage says how hale answers every operation of the model and the members whose behaviour
// differs from their operation's: docs/api-coverage.md is rendered from it, and
// TestCoverageOfTheModel checks it lists every operation, names only members the model has,
// and names tests that exist.

// Behaviour is how hale answers an operation or a member.
type Behaviour struct {
	// Status: "works" (as HyperPod documents it), "refused" (with the error HyperPod gives in
	// the same situation, and the reason), "kept" (accepted, stored and echoed; nothing on
	// hale's machines acts on it, for the reason given) or "not served" (a ValidationException
	// naming the operation).
	Status string
	Note   string
	Tests  []string // the tests that show it
}

// Coverage statuses.
const (
	Works     = "works"
	Refused   = "refused"
	Kept      = "kept"
	NotServed = "not served"
)

// OperationCoverage is every operation of the model, by name.
var OperationCoverage = map[string]Behaviour{
	"AddTags":                        {Works, "", []string{"TestSDKEveryOperation"}},
	"AttachClusterNodeVolume":        {Refused, "ResourceNotFound for the volume after the cluster, its orchestrator and the node are checked: hale has no block-storage service, so no VolumeId exists", []string{"TestVolumesAreNotFound"}},
	"BatchAddClusterNodes":           {Works, "Continuous provisioning clusters; ClientToken kept 8 hours", []string{"TestBatchAddClusterNodes", "TestBatchAddNeedsContinuous"}},
	"BatchDeleteClusterNodes":        {Works, "", []string{"TestSDKEveryOperation", "TestScalingAndNodeOperations"}},
	"BatchRebootClusterNodes":        {Works, "", []string{"TestSDKEveryOperation", "TestScalingAndNodeOperations"}},
	"BatchReplaceClusterNodes":       {Works, "", []string{"TestSDKEveryOperation", "TestRunningMeansSlurmAccepts"}},
	"CreateCluster":                  {Works, "", []string{"TestSDKEveryOperation", "TestFourNodeClusterComesUp"}},
	"CreateClusterSchedulerConfig":   {Works, "Eks clusters: priority classes become Kueue WorkloadPriorityClasses", []string{"TestSDKEveryOperation", "TestTaskGovernance"}},
	"CreateComputeQuota":             {Works, "a team's namespace, ClusterQueue (cohort shared-pool) and LocalQueue in Kueue", []string{"TestTaskGovernance", "TestObjects"}},
	"DeleteComputeQuota":             {Works, "its queues leave Kueue; it stays listed, Deleted", []string{"TestTaskGovernance"}},
	"DescribeComputeQuota":           {Works, "", []string{"TestSDKEveryOperation", "TestTaskGovernance"}},
	"ListComputeQuotas":              {Works, "", []string{"TestSDKEveryOperation", "TestTaskGovernance"}},
	"UpdateComputeQuota":             {Works, "TargetVersion must be the newest", []string{"TestTaskGovernance"}},
	"DeleteCluster":                  {Works, "", []string{"TestSDKEveryOperation"}},
	"DeleteClusterSchedulerConfig":   {Works, "its priority classes leave Kueue; it stays listed, Deleted", []string{"TestGovernanceAPI"}},
	"DeleteTags":                     {Works, "", []string{"TestSDKEveryOperation"}},
	"DescribeCluster":                {Works, "", []string{"TestSDKEveryOperation"}},
	"DescribeClusterEvent":           {Works, "every cluster's events, not only Continuous ones", []string{"TestSDKEveryOperation"}},
	"DescribeClusterNode":            {Works, "", []string{"TestSDKEveryOperation"}},
	"DescribeClusterSchedulerConfig": {Works, "", []string{"TestTaskGovernance"}},
	"DetachClusterNodeVolume":        {Refused, "as AttachClusterNodeVolume", []string{"TestVolumesAreNotFound"}},
	"ListClusterEvents":              {Works, "every cluster's events, not only Continuous ones", []string{"TestSDKEveryOperation"}},
	"ListClusterNodes":               {Works, "", []string{"TestSDKEveryOperation"}},
	"ListClusterSchedulerConfigs":    {Works, "", []string{"TestSDKEveryOperation", "TestGovernanceAPI"}},
	"ListClusters":                   {Works, "", []string{"TestSDKEveryOperation"}},
	"ListTags":                       {Works, "", []string{"TestSDKEveryOperation"}},
	"StartClusterHealthCheck":        {Works, "InstanceStress and InstanceConnectivity", []string{"TestSDKEveryOperation", "TestDeepHealthChecks"}},
	"UpdateCluster":                  {Works, "", []string{"TestSDKEveryOperation", "TestScalingAndNodeOperations"}},
	"UpdateClusterSchedulerConfig":   {Works, "TargetVersion must be the newest", []string{"TestGovernanceAPI"}},
	"UpdateClusterSoftware":          {Works, "rolling batches, wait interval, alarm rollback", []string{"TestSDKEveryOperation", "TestSoftwareUpdateBatchSizes"}},
}

// MemberCoverage is the members whose behaviour differs from their operation's, as
// "<Shape>.<Member>"; every other member of an operation's input works as its operation does.
var MemberCoverage = map[string]Behaviour{
	"CreateClusterRequest.RestrictedInstanceGroups":           {Refused, WhyNoRestrictedGroups, []string{"TestUnbuiltMembersAreRefusedWithTheirReason"}},
	"CreateClusterRequest.RestrictedInstanceGroupsConfig":     {Refused, WhyNoRestrictedGroups, []string{"TestUnbuiltMembersAreRefusedWithTheirReason"}},
	"CreateClusterRequest.TieredStorageConfig":                {Refused, WhyNoTieredStorage, []string{"TestUnbuiltMembersAreRefusedWithTheirReason"}},
	"CreateClusterRequest.AutoScaling":                        {Refused, WhyNoAutoScaling, []string{"TestUnbuiltMembersAreRefusedWithTheirReason"}},
	"CreateClusterRequest.ClusterRole":                        {Kept, "the role HyperPod's autoscaler assumes; hale has no autoscaler (AutoScaling)", nil},
	"CreateClusterRequest.VpcConfig":                          {Kept, "hale's nodes are on its own network (the local provider's bridge, the static provider's hosts); FSx needs it, as HyperPod's rules say", nil},
	"UpdateClusterRequest.RestrictedInstanceGroups":           {Refused, WhyNoRestrictedGroups, []string{"TestUnbuiltMembersAreRefusedWithTheirReason"}},
	"UpdateClusterRequest.RestrictedInstanceGroupsConfig":     {Refused, WhyNoRestrictedGroups, []string{"TestUnbuiltMembersAreRefusedWithTheirReason"}},
	"UpdateClusterRequest.TieredStorageConfig":                {Refused, WhyNoTieredStorage, []string{"TestUnbuiltMembersAreRefusedWithTheirReason"}},
	"UpdateClusterRequest.AutoScaling":                        {Refused, WhyNoAutoScaling, []string{"TestUnbuiltMembersAreRefusedWithTheirReason"}},
	"UpdateClusterRequest.ClusterRole":                        {Kept, "as CreateCluster's", nil},
	"ClusterInstanceGroupSpecification.ScheduledUpdateConfig": {Works, "AWS cron, UTC; the next run in an event", []string{"TestScheduledUpdateStartsAtItsTime", "TestScheduledUpdateRuns"}},
	"ClusterInstanceGroupSpecification.AutoPatchConfig":       {Works, "WhenIdle and WhenAllIdle at NextPatchDate; the date is the operator's (hale has no patch feed)", []string{"TestWhenIdlePatchWaitsForTheJob", "TestWhenAllIdlePatchesAllOrNone"}},
	"ClusterInstanceGroupSpecification.TrainingPlanArn":       {Kept, "training plans reserve AWS capacity; hale's machines are the site's own", nil},
	"ClusterInstanceGroupSpecification.OverrideVpcConfig":     {Kept, "as VpcConfig", nil},
	"ClusterInstanceGroupSpecification.CapacityRequirements":  {Kept, "Spot and On-Demand are EC2 purchase options; hale's machines are the site's own", nil},
	"ClusterInstanceGroupSpecification.NetworkInterface":      {Kept, "the interface type (EFA) of an EC2 instance; hale's nodes have the network their provider gives", nil},
	"ClusterInstanceGroupSpecification.MinInstanceCount":      {Kept, "checked against InstanceCount and echoed as MinCount; the 3-hour deadline to reach it is not enforced", nil},
}
