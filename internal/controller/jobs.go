package controller

// The controller's background jobs, by kind. A job's key is its kind and what it works on: at
// most one job per key runs at a time (Controller.background), and a round asks whether one
// runs (Controller.busy) by the same typed key, so a key is never spelled twice.
type jobKind string

const (
	jobLaunch     jobKind = "launch"    // a node's launch by the provider (by logical id)
	jobLifecycle  jobKind = "lifecycle" // a node's bring-up: orchestrator steps, lifecycle scripts, checks (by instance)
	jobReboot     jobKind = "reboot"    // a node's reboot (by instance)
	jobTerminate  jobKind = "terminate" // a node's termination (by logical id)
	jobDeepHealth jobKind = "dhc"       // a deep health check action (by action id)
	jobTakeOut    jobKind = "take-out"  // a replaced node taken out of service by its orchestrator (by instance)
	jobResetGPU   jobKind = "reset-gpu" // a GPU reset asked of a node's agent (by repair id)
	jobAlarms     jobKind = "alarms"    // a software update's rollback alarms read (by cluster, group, generation)
	jobResync     jobKind = "resync"    // a skewed node's clock resynced by its time daemon (by instance)
	jobCordon     jobKind = "cordon"    // a node cordoned for an auto-patch (by cluster, logical id, generation)
	jobUncordon   jobKind = "uncordon"  // a node given back to the jobs after an auto-patch (the same)
	jobPreDrain   jobKind = "pre-drain" // a node drained before a software update re-images it (the same)
)

// An orchestrator's jobs have kinds of its own, "<orchestrator>:<kind>" (round.Go).

// jobKey names one background job.
type jobKey struct {
	kind jobKind
	id   string
}

func key(kind jobKind, id string) jobKey { return jobKey{kind, id} }
