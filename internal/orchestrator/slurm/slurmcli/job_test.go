package slurmcli

import (
	"strings"
	"testing"

	"github.com/haleproject/hale/internal/exitcode"
)

// scontrol show job -o output from Slurm 22.05 on a hale cluster (examples/cluster-p5.json):
// an sbatch job on two nodes, one on its batch host alone, a pending one, a finished one and an
// srun job (BatchFlag=0, whose BatchHost runs no script).
const (
	showJobTwoNodes = `JobId=2 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901758 Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:03 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-12-01T14:15:36 EligibleTime=2026-12-01T14:15:36 AccrueTime=2026-12-01T14:15:36 StartTime=2026-12-01T14:15:37 EndTime=Unknown Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-12-01T14:15:37 Scheduler=Main Partition=dev AllocNode:Sid=ip-10-233-0-12:7715 ReqNodeList=(null) ExcNodeList=(null) NodeList=ip-10-233-0-[11,13] BatchHost=ip-10-233-0-11 NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=(null) WorkDir=/fsx StdErr=/fsx/j-2.out StdIn=/dev/null StdOut=/fsx/j-2.out Power= 
`
	showJobOneNode = `JobId=3 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901757 Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:03 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-12-01T14:15:36 EligibleTime=2026-12-01T14:15:36 AccrueTime=2026-12-01T14:15:36 StartTime=2026-12-01T14:15:37 EndTime=Unknown Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-12-01T14:15:37 Scheduler=Main Partition=dev AllocNode:Sid=ip-10-233-0-12:7715 ReqNodeList=(null) ExcNodeList=(null) NodeList=ip-10-233-0-11 BatchHost=ip-10-233-0-11 NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=(null) WorkDir=/fsx StdErr=/fsx/slurm-3.out StdIn=/dev/null StdOut=/fsx/slurm-3.out Power= 
`
	showJobPending = `JobId=4 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901756 Nice=0 Account=(null) QOS=(null) JobState=PENDING Reason=Resources Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-12-01T14:15:36 EligibleTime=2026-12-01T14:15:36 AccrueTime=2026-12-01T14:15:36 StartTime=2027-12-01T14:15:37 EndTime=Unknown Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-12-01T14:15:39 Scheduler=Main Partition=dev AllocNode:Sid=ip-10-233-0-12:7715 ReqNodeList=(null) ExcNodeList=(null) NodeList= NumNodes=4-4 NumCPUs=4 NumTasks=4 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=4,mem=86776M,node=4,billing=4 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=NO Contiguous=0 Licenses=(null) Network=(null) Command=(null) WorkDir=/fsx StdErr=/fsx/slurm-4.out StdIn=/dev/null StdOut=/fsx/slurm-4.out Power= 
`
	showJobDone = `JobId=5 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901755 Nice=0 Account=(null) QOS=(null) JobState=COMPLETED Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=365-00:00:00 TimeMin=N/A SubmitTime=2026-12-01T14:15:36 EligibleTime=2026-12-01T14:15:36 AccrueTime=2026-12-01T14:15:36 StartTime=2026-12-01T14:15:39 EndTime=2026-12-01T14:15:39 Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-12-01T14:15:39 Scheduler=Backfill Partition=dev AllocNode:Sid=ip-10-233-0-12:7715 ReqNodeList=(null) ExcNodeList=(null) NodeList=ip-10-233-0-13 BatchHost=ip-10-233-0-13 NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=(null) WorkDir=/fsx StdErr=/fsx/slurm-5.out StdIn=/dev/null StdOut=/fsx/slurm-5.out Power= 
`
	showJobSrun = `JobId=1 JobName=hostname UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=0 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-12-01T14:15:36 EligibleTime=2026-12-01T14:15:36 AccrueTime=Unknown StartTime=2026-12-01T14:15:36 EndTime=Unknown Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-12-01T14:15:36 Scheduler=Main Partition=dev AllocNode:Sid=ip-10-233-0-12:7715 ReqNodeList=(null) ExcNodeList=(null) NodeList=ip-10-233-0-[11,13] BatchHost=ip-10-233-0-11 NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=hostname WorkDir=/root Switches=1@00:05:00 Power= 
`
)

// inject-fault --job breaks a node of the job that is not its batch host (the batch script runs
// there, so a fault there ends the job instead of showing it resume), or the batch host with
// --batch-host; a job that is not running, or a one-node job without --batch-host, is an error
// (exit 1) that names the job and says why.
func TestChooseFaultNode(t *testing.T) {
	for _, c := range []struct {
		name, showJob, hostnames string
		batchHost                bool
		want, line, err          string // line: what inject-fault prints, with logical id gpu-2
	}{
		{name: "two nodes: the one that is not the batch host", showJob: showJobTwoNodes, hostnames: "ip-10-233-0-11\nip-10-233-0-13\n",
			want: "ip-10-233-0-13", line: "job 2 runs on ip-10-233-0-11 (batch host) and ip-10-233-0-13; injecting into ip-10-233-0-13 (gpu-2), not the batch host, so the job can resume"},
		{name: "two nodes, --batch-host", showJob: showJobTwoNodes, hostnames: "ip-10-233-0-11\nip-10-233-0-13\n", batchHost: true,
			want: "ip-10-233-0-11", line: "job 2 runs on ip-10-233-0-11 (batch host) and ip-10-233-0-13; injecting into ip-10-233-0-11 (gpu-2), the batch host, as --batch-host asks: the job's batch script dies with it"},
		{name: "the batch host is not the first node", showJob: strings.Replace(strings.Replace(showJobTwoNodes, "BatchHost=ip-10-233-0-11", "BatchHost=ip-10-233-0-13", 1), "NodeList=ip-10-233-0-[11,13]", "NodeList=ip-10-233-0-[11,13-15]", 1),
			hostnames: "ip-10-233-0-11\nip-10-233-0-13\nip-10-233-0-14\nip-10-233-0-15\n",
			want:      "ip-10-233-0-11", line: "job 2 runs on ip-10-233-0-13 (batch host) and ip-10-233-0-[11,14-15]; injecting into ip-10-233-0-11 (gpu-2), not the batch host, so the job can resume"},
		{name: "one node", showJob: showJobOneNode, hostnames: "ip-10-233-0-11\n",
			err: "job 3 runs on ip-10-233-0-11 (batch host) alone: a fault there ends the job instead of showing it resume; give --batch-host"},
		{name: "one node, --batch-host", showJob: showJobOneNode, hostnames: "ip-10-233-0-11\n", batchHost: true, want: "ip-10-233-0-11"},
		{name: "pending", showJob: showJobPending, err: "job 4 is PENDING (Resources), not RUNNING"},
		{name: "finished", showJob: showJobDone, hostnames: "ip-10-233-0-13\n", err: "job 5 is COMPLETED, not RUNNING"},
		{name: "an srun job has no batch script: its first node", showJob: showJobSrun, hostnames: "ip-10-233-0-11\nip-10-233-0-13\n",
			want: "ip-10-233-0-11", line: "job 1 runs on ip-10-233-0-[11,13] (no batch host: not an sbatch job); injecting into ip-10-233-0-11 (gpu-2), the job's first node"},
		{name: "an srun job, --batch-host", showJob: showJobSrun, hostnames: "ip-10-233-0-11\nip-10-233-0-13\n", batchHost: true, err: "--batch-host has nothing to aim at"},
	} {
		t.Run(c.name, func(t *testing.T) {
			jobs := ParseShowJob(c.showJob)
			if len(jobs) != 1 {
				t.Fatalf("parsed %d jobs: %+v", len(jobs), jobs)
			}
			got, err := ChooseFaultNode(jobs[0], strings.Fields(c.hostnames), c.batchHost)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || exitcode.Of(err) != 1 {
					t.Fatalf("got %+v, %v (exit %d); want the error %q, exit 1", got, err, exitcode.Of(err), c.err)
				}
				return
			}
			if err != nil || got.Node != c.want {
				t.Fatalf("got %+v, %v; want %s", got, err, c.want)
			}
			if c.line != "" && got.Line("gpu-2") != c.line {
				t.Errorf("prints\n %s\nwant\n %s", got.Line("gpu-2"), c.line)
			}
		})
	}
}

// An array job asked by its array id is several records; each is parsed, so the command can
// ask for one.
func TestParseShowJobSeveral(t *testing.T) {
	two := strings.Replace(showJobTwoNodes, "JobId=2 ", "JobId=7 ArrayJobId=7 ArrayTaskId=1 ", 1) + strings.Replace(showJobPending, "JobId=4 ", "JobId=8 ArrayJobId=7 ArrayTaskId=2 ", 1)
	jobs := ParseShowJob(two)
	if len(jobs) != 2 || jobs[0].ID != "7" || jobs[0].State != "RUNNING" || jobs[0].NodeList != "ip-10-233-0-[11,13]" || jobs[1].ID != "8" || jobs[1].NodeList != "" || jobs[1].Reason != "Resources" {
		t.Errorf("%+v", jobs)
	}
}
