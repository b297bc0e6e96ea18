package slurmcli

import (
	"fmt"
	"strings"

	slurm "github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
)

// inject-fault --job: which node of a running Slurm job to break. A scale-up or a repair
// changes which nodes a job runs on, so a fixed --node-id may hit an idle node; Slurm knows.

// Job is what `scontrol show job -o` says about one job, as far as choosing a node goes.
type Job struct {
	ID, State, Reason string
	NodeList          string // Slurm's compressed host list, "" when the job has no nodes
	BatchHost         string // the node running the batch script; "" for salloc/srun jobs (BatchFlag=0)
}

// ParseShowJob reads `scontrol show job -o JOBID`: one line of key=value pairs per job record.
// An array or heterogeneous job is several records; asked by one of its ids, Slurm prints them
// all, and the caller must pick one. Values with spaces (JobName, Command) are not needed here,
// and only the first occurrence of a key counts.
func ParseShowJob(out string) []Job {
	var jobs []Job
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "JobId=") {
			continue
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				if _, seen := kv[k]; !seen {
					kv[k] = v
				}
			}
		}
		null := func(v string) string {
			if v == "(null)" || v == "None" {
				return ""
			}
			return v
		}
		j := Job{ID: kv["JobId"], State: kv["JobState"], Reason: null(kv["Reason"]), NodeList: null(kv["NodeList"]), BatchHost: null(kv["BatchHost"])}
		if kv["BatchFlag"] == "0" {
			// srun and salloc jobs: Slurm names their first node BatchHost, but no batch
			// script runs there, so it is no worse a target than the others.
			j.BatchHost = ""
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// JobError is an error about the job the user named (not running, unknown, one node): exit 1.
func JobError(format string, args ...any) error {
	return &ExitError{Code: 1, Err: fmt.Errorf(format, args...)}
}

// FaultChoice is the node of a job that inject-fault --job breaks, and why.
type FaultChoice struct {
	Node    string // the Slurm node name, which is the node's hostname
	Runs    string // e.g. "job 12 runs on ip-10-1-0-12 (batch host) and ip-10-1-0-13"
	Because string // e.g. "not the batch host, so the job can resume"
}

// Line is what inject-fault prints before it injects; logical is the node's logical id.
func (c FaultChoice) Line(logical string) string {
	return fmt.Sprintf("%s; injecting into %s (%s), %s", c.Runs, c.Node, logical, c.Because)
}

// ChooseFaultNode picks the node of job j (running on nodes, Slurm's expansion of its NodeList,
// in Slurm's order) to inject a fault into: the first that is not the batch host, because a
// fault on the batch host kills the batch script and so the job, where one elsewhere shows the
// job resume; the batch host itself when batchHost is set.
func ChooseFaultNode(j Job, nodes []string, batchHost bool) (FaultChoice, error) {
	if j.State != "RUNNING" {
		state := j.State
		if j.Reason != "" {
			state += " (" + j.Reason + ")"
		}
		return FaultChoice{}, JobError("job %s is %s, not RUNNING: inject-fault --job needs a running job to pick one of its nodes", j.ID, state)
	}
	if len(nodes) == 0 {
		return FaultChoice{}, JobError("job %s is RUNNING but Slurm names no node of it (NodeList=%q)", j.ID, j.NodeList)
	}
	var others []string
	for _, n := range nodes {
		if n != j.BatchHost {
			others = append(others, n)
		}
	}
	runs := fmt.Sprintf("job %s runs on ", j.ID)
	switch {
	case j.BatchHost == "":
		runs += slurm.Hostlist(nodes) + " (no batch host: not an sbatch job)"
	case len(others) == 0:
		runs += j.BatchHost + " (batch host) alone"
	default:
		runs += j.BatchHost + " (batch host) and " + slurm.Hostlist(others)
	}
	switch {
	case batchHost && j.BatchHost == "":
		return FaultChoice{}, JobError("%s: --batch-host has nothing to aim at", runs)
	case batchHost:
		return FaultChoice{j.BatchHost, runs, "the batch host, as --batch-host asks: the job's batch script dies with it"}, nil
	case len(others) == 0:
		return FaultChoice{}, JobError("%s: a fault there ends the job instead of showing it resume; give --batch-host to break it anyway, or use a job on 2 or more nodes", runs)
	case j.BatchHost == "":
		return FaultChoice{others[0], runs, "the job's first node"}, nil
	}
	return FaultChoice{others[0], runs, "not the batch host, so the job can resume"}, nil
}
