package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/haleproject/hale/internal/orchestrator/slurm/resume"
	"github.com/spf13/cobra"
)

func newSrunCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "srun [--auto-resume=1] [--run-policy=FILE] [SRUN OPTIONS] COMMAND [ARG...]",
		Short: "Slurm's srun with HyperPod's --auto-resume=1 (every node's /usr/local/bin/srun)",
		Long: `srun --auto-resume=1 runs a job step and, when it fails because a node of the step has a
fault, drops the faulty nodes from the job, waits for hale to replace them, takes them back and
runs the step again in the same job, as SageMaker HyperPod does. A step that fails on healthy
nodes is not retried. Lines that start with [Auto Resume] say what happened.

Without --auto-resume (or with --auto-resume=0) it is Slurm's srun, unchanged. Every node of a
hale cluster has this command as /usr/local/bin/srun, so job scripts written for HyperPod run
as they are. The application must save checkpoints to shared storage (/fsx) and load the
latest one when it starts: a retried step starts the command again.

Outside a job it first makes one with salloc (with srun's allocation options). If the node at
fault is the one the job's batch script runs on, the job cannot shrink away from it: the job is
requeued instead (same job id) and the batch script runs again.

--run-policy=FILE holds the step to a run policy, HyperPod's runPolicy (YAML or JSON, or the
policy itself): its logMonitoringConfiguration rules find a step that hangs (no progress line
in time), never starts, or slows down, and its restartPolicy budgets climb the restart ladder:
the step restarts in place on the same nodes, then the whole job is requeued, and a node blamed
again and again is replaced. A step that fails on healthy nodes climbs the same ladder. See
docs/autoresume.md, "Run policies".

Environment:
  HALE_RUN_POLICY                the run policy when --run-policy is not given
  HALE_AUTO_RESUME_MAX_RETRIES   retries of one step without a run policy (default 3)
  HALE_AUTO_RESUME_TIMEOUT       how long a retry waits for the repair (default 15m)
  HALE_AGENT_SOCKET              the node agent's endpoint (default /var/lib/hale-agent/agent.sock)`,
		Example: `  srun --auto-resume=1 -N2 --ntasks-per-node=1 /usr/bin/python3 /fsx/train.py
  sbatch -N2 --wrap "srun --auto-resume=1 /usr/bin/python3 /fsx/train.py"
  srun --auto-resume=1 --run-policy=/fsx/policy.yaml -N2 /usr/bin/python3 /fsx/train.py`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := resume.Parse(args)
			if err != nil {
				return &exitError{Code: 2, Err: err}
			}
			real, err := resume.RealSrun()
			if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
				// Slurm's own help follows hale's, so srun --help on a node still shows srun's.
				cmd.Help()
				if err != nil {
					return nil
				}
				fmt.Printf("\nSlurm's srun (%s):\n\n", real)
				os.Stdout.Sync()
				return syscall.Exec(real, []string{real, "--help"}, os.Environ())
			}
			if err != nil {
				return &exitError{Code: 2, Err: err}
			}
			policyFrom := "--run-policy"
			if a.RunPolicy == "" {
				a.RunPolicy, policyFrom = os.Getenv("HALE_RUN_POLICY"), "HALE_RUN_POLICY"
			}
			if !a.AutoResume && a.RunPolicy == "" {
				return syscall.Exec(real, append([]string{real}, a.Srun()...), os.Environ())
			}
			self, _ := os.Executable()
			host, _ := os.Hostname()
			r := &resume.Runner{Srun: real, Self: []string{self, "srun"}, Socket: envOr("HALE_AGENT_SOCKET", resume.DefaultSocket),
				MaxRetries: resume.DefaultMaxRetries, RepairTimeout: resume.DefaultRepairTimeout, Stderr: os.Stderr, Hostname: host}
			if v := os.Getenv("HALE_AUTO_RESUME_MAX_RETRIES"); v != "" {
				if r.MaxRetries, err = strconv.Atoi(v); err != nil || r.MaxRetries < 0 {
					return &exitError{Code: 2, Err: fmt.Errorf("srun: HALE_AUTO_RESUME_MAX_RETRIES=%s is not a count", v)}
				}
			}
			if v := os.Getenv("HALE_AUTO_RESUME_TIMEOUT"); v != "" {
				if r.RepairTimeout, err = time.ParseDuration(v); err != nil {
					return &exitError{Code: 2, Err: fmt.Errorf("srun: HALE_AUTO_RESUME_TIMEOUT=%s: %v", v, err)}
				}
			}
			if a.RunPolicy != "" {
				if r.Policy, err = resume.LoadPolicy(policyFrom, a.RunPolicy); err != nil {
					return &exitError{Code: 2, Err: err}
				}
			}
			if err := r.Check(); err != nil {
				return &exitError{Code: 2, Err: err}
			}
			err = r.Run(cmd.Context(), a)
			var code resume.Exit
			var stopped resume.Stopped
			switch {
			case errors.As(err, &code):
				os.Exit(int(code))
			case errors.As(err, &stopped):
				os.Exit(int(stopped))
			case err != nil:
				return &exitError{Code: 1, Err: err}
			}
			return nil
		},
	}
}
