package slurm

// The Slurm orchestrator's background jobs (orchestrator.RoundHost.Go), by kind; each is keyed
// by what it works on, and at most one per key runs at a time.
const (
	jobRoles      = "roles"      // the cluster's Slurm roles read (by cluster)
	jobFiles      = "files"      // a node's Slurm files written (by instance)
	jobApply      = "apply"      // a rendering applied: restart, reconfigure (by cluster)
	jobAccounting = "accounting" // accounting turned on again once slurmdbd answers, or watched while on (by cluster)
	jobPoll       = "poll"       // slurmctld's view of the nodes read (by cluster)
	jobMunge      = "munge"      // a node's munge clock checked against the controller's (by instance)
	jobJoin       = "join"       // a joining node asked about (by instance)
	jobOut        = "out"        // a node taken out of Slurm (by instance)
	jobDrain      = "drain"      // a repair's drain (by repair)
	jobResume     = "resume"     // a repair's resume (by repair)
	jobUndrain    = "undrain"    // a cancelled repair's drain lifted (by repair)
)
