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
	if g, ok := strings.CutPrefix(j["TresPerNode"], "gres:"); ok {
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

// holdsGRES says whether the job holds generic resources: it asked for them (TresPerNode,
// TresPerJob, ...), or it has its nodes to itself (OverSubscribe=NO, --exclusive) and they have
// GRES, all of which an exclusive job is given.
func holdsGRES(ctx context.Context, j job, nodes []string) bool {
	for k, v := range j {
		if strings.HasPrefix(k, "TresPer") && strings.Contains(v, "gres") {
			return true
		}
	}
	if j["OverSubscribe"] != "NO" {
		return false
	}
	for _, n := range nodes {
		out, err := slurmCmd(ctx, "scontrol", "show", "node", "-o", n)
		if err != nil {
			return true // cannot tell: do not risk an expansion Slurm refuses
		}
		for _, f := range strings.Fields(out) {
			if g, ok := strings.CutPrefix(f, "Gres="); ok && g != "(null)" && g != "" {
				return true
			}
		}
	}
	return false
}
