package resume

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	slurm "github.com/haleproject/hale/internal/orchestrator/slurm/slurmconf"
)

// slurmCmd runs a Slurm client command and returns its output, or an error with its output.
func slurmCmd(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// job is what `scontrol show job -o` says about a job, as key=value pairs.
type job map[string]string

func showJob(ctx context.Context, id string) (job, error) {
	out, err := slurmCmd(ctx, "scontrol", "show", "job", "-o", id)
	if err != nil {
		return nil, err
	}
	j := job{}
	for _, f := range strings.Fields(out) {
		if k, v, ok := strings.Cut(f, "="); ok {
			if _, seen := j[k]; !seen {
				j[k] = v
			}
		}
	}
	return j, nil
}

// hostnames expands a Slurm host list (ip-10-1-0-[1-3]).
func hostnames(ctx context.Context, list string) ([]string, error) {
	if list == "" || list == "(null)" {
		return nil, nil
	}
	out, err := slurmCmd(ctx, "scontrol", "show", "hostnames", list)
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

var granted = regexp.MustCompile(`Granted job allocation (\d+)`)

// expand grows job id onto hosts with Slurm's job expansion: a helper allocation of those
// hosts that depends on "expand:<id>" gives its nodes up (NumNodes=0) and the job takes them
// (NumNodes=ALL); the helper then ends. It needs SchedulerParameters=permit_job_expansion, which
// hale's slurm.conf sets, as HyperPod's does.
func expand(ctx context.Context, id string, j job, hosts []string) error {
	list := slurm.Hostlist(hosts)
	args := []string{"--no-shell", "-J", "auto-resume-" + id, "-N", fmt.Sprint(len(hosts)), "-w", list, "--dependency=expand:" + id}
	if p := j["Partition"]; p != "" {
		args = append(args, "-p", p)
	}
	if g := gresOf(j["TresPerNode"]); g != "" {
		args = append(args, "--gres="+g)
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(actx, "salloc", args...).CombinedOutput() // salloc speaks on stderr
	m := granted.FindStringSubmatch(string(out))
	if m == nil {
		return fmt.Errorf("salloc %s: no allocation granted: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	helper := m[1]
	defer slurmCmd(context.WithoutCancel(ctx), "scancel", helper)
	if _, err := slurmCmd(ctx, "scontrol", "update", "JobId="+helper, "NumNodes=0"); err != nil {
		return err
	}
	// Slurm 22.05 without accounting answers this update with "the DB index is being set"
	// even though the job took the nodes; what the job's node list says is what counts.
	_, updErr := slurmCmd(ctx, "scontrol", "update", "JobId="+id, "NumNodes=ALL")
	j2, err := showJob(ctx, id)
	if err != nil {
		return err
	}
	have, err := hostnames(ctx, j2["NodeList"])
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if !slices.Contains(have, h) {
			return fmt.Errorf("job %s did not take %s back (NodeList=%s): %v", id, h, j2["NodeList"], updErr)
		}
	}
	return nil
}

// holdsGRES says whether the job holds generic resources (GPUs). Slurm will not expand such a
// job: select/cons_tres refuses to merge a job whose GRES list is set ("JobId=N has allocated
// GRES" in slurmctld's log, "Unspecified error" to scontrol), on 22.05, 24.11 and 26.05 alike
// (TestSlurmVersions' resilience check tries it on each). A job holds GRES when it asked for them
// (TresPerNode, TresPerJob, ...) and when it has nodes with GRES to itself (--exclusive): Slurm
// gives it all of theirs. `scontrol show job -d` lists what the job holds (JOB_GRES=, and each
// node's GRES=) on every version, where the flags that say why it holds them do not: 26.05 shows
// OverSubscribe=NO for a job that shares its nodes, which 22.05 and 24.11 show as OK.
func holdsGRES(ctx context.Context, id string, j job) bool {
	for k, v := range j {
		if strings.HasPrefix(k, "TresPer") && strings.Contains(v, "gres") {
			return true
		}
	}
	out, err := slurmCmd(ctx, "scontrol", "show", "job", "-d", id)
	if err != nil {
		return true // cannot tell: do not risk an expansion Slurm refuses
	}
	return gresHeld(out)
}

// gresHeld reads `scontrol show job -d`: the job holds GRES when its JOB_GRES or any node's
// GRES is set ("gpu:1(IDX:0)"); unset, they are empty or "(null)".
func gresHeld(detail string) bool {
	for _, f := range strings.Fields(detail) {
		k, v, ok := strings.Cut(f, "=")
		if ok && (k == "GRES" || k == "JOB_GRES") && v != "" && v != "(null)" {
			return true
		}
	}
	return false
}

// gresOf is the --gres value of a job's TresPerNode: 22.05 shows "gres:gpu:1", 24.11 and
// 26.05 "gres/gpu:1"; "" when it names no GRES.
func gresOf(tresPerNode string) string {
	for _, p := range []string{"gres:", "gres/"} {
		if g, ok := strings.CutPrefix(tresPerNode, p); ok {
			return g
		}
	}
	return ""
}
