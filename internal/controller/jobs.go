package controller

// The controller's background jobs, by kind. A job's key is its kind and what it works on: at
// most one job per key runs at a time (Controller.background), and a round asks whether one
// runs (Controller.busy) by the same typed key, so a key is never spelled twice.
type jobKind string

const (
	jobLaunch       jobKind = "launch"    // a node's launch by the provider (by logical id)
	jobLifecycle    jobKind = "lifecycle" // a node's bring-up: Slurm set-up, lifecycle scripts, checks (by instance)
	jobReboot       jobKind = "reboot"    // a node's reboot (by instance)
	jobTerminate    jobKind = "terminate" // a node's termination (by logical id)
	jobDeepHealth   jobKind = "dhc"       // a deep health check action (by action id)
	jobRepairDrain  jobKind = "repair-drain"
	jobRepairResume jobKind = "repair-resume"
	jobRepairUndo   jobKind = "repair-undrain" // a cancelled repair's drain lifted (by repair id)
	jobSlurmRoles   jobKind = "slurm-roles"    // the cluster's Slurm roles read (by cluster)
	jobSlurmFiles   jobKind = "slurm-files"    // a node's Slurm files written (by instance)
	jobSlurmApply   jobKind = "slurm-apply"    // a rendering applied: restart, reconfigure (by cluster)
	jobSlurmAcct    jobKind = "slurm-accounting"
	jobSlurmPoll    jobKind = "slurm-poll" // slurmctld's view of the nodes read (by cluster)
	jobSlurmJoin    jobKind = "slurm-join" // a joining node asked about (by instance)
	jobSlurmOut     jobKind = "slurm-out"  // a node taken out of Slurm (by instance)
)

// jobKey names one background job.
type jobKey struct {
	kind jobKind
	id   string
}

func key(kind jobKind, id string) jobKey { return jobKey{kind, id} }
