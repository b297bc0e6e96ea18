// Package resume is hale's `srun --auto-resume=1` (research hyperpod-api-slurm.md §3.7): it
// runs a job step with Slurm's srun and, when the step fails because a node of it has a fault,
// shrinks the job to its healthy nodes, waits for hale to replace the faulty ones, expands the
// job back onto them and runs the step again, in the same job id, as HyperPod's SPANK plugin
// does. A step that fails on healthy nodes is not retried.
package resume

import (
	"fmt"
	"strings"
)

// srunValueShort are srun's short options that take a value (srun(1), Slurm 22.05).
const srunValueShort = "AbcDdeGiJLmMnNopqrSTtWwxCB"

// srunValueLong are srun's long options that take a value, so that "--opt VALUE" keeps VALUE.
var srunValueLong = map[string]bool{
	"account": true, "acctg-freq": true, "bb": true, "bbf": true, "begin": true, "chdir": true, "cluster-constraint": true,
	"clusters": true, "comment": true, "constraint": true, "container": true, "core-spec": true, "cores-per-socket": true,
	"cpu-bind": true, "cpu-freq": true, "cpus-per-gpu": true, "cpus-per-task": true, "deadline": true, "delay-boot": true,
	"dependency": true, "distribution": true, "epilog": true, "error": true, "export": true, "extra-node-info": true,
	"gid": true, "gpu-bind": true, "gpu-freq": true, "gpus": true, "gpus-per-node": true, "gpus-per-socket": true,
	"gpus-per-task": true, "gres": true, "gres-flags": true, "het-group": true, "hint": true, "input": true, "job-name": true,
	"jobid": true, "licenses": true, "mail-type": true, "mail-user": true, "mcs-label": true, "mem": true, "mem-bind": true,
	"mem-per-cpu": true, "mem-per-gpu": true, "mincpus": true, "mpi": true, "network": true, "nodefile": true, "nodelist": true,
	"nodes": true, "ntasks": true, "ntasks-per-core": true, "ntasks-per-gpu": true, "ntasks-per-node": true,
	"ntasks-per-socket": true, "open-mode": true, "output": true, "partition": true, "power": true, "prolog": true,
	"qos": true, "reservation": true, "signal": true, "slurmd-debug": true, "sockets-per-node": true, "switches": true,
	"task-epilog": true, "task-prolog": true, "tasks-per-node": true, "thread-spec": true, "threads-per-core": true,
	"time": true, "time-min": true, "tmp": true, "uid": true, "wckey": true, "exclude": true, "wait": true,
}

// allocShort and allocLong are the srun options that shape the allocation; they are handed to
// salloc when srun --auto-resume=1 runs outside any job and hale makes the job first.
const allocShort = "ANncptJwxCGq"

var allocLong = map[string]bool{
	"account": true, "nodes": true, "ntasks": true, "ntasks-per-node": true, "cpus-per-task": true, "partition": true,
	"time": true, "job-name": true, "nodelist": true, "exclude": true, "constraint": true, "gpus": true, "gpus-per-node": true,
	"gres": true, "mem": true, "mem-per-cpu": true, "qos": true, "reservation": true, "switches": true, "exclusive": true,
}

// Args is an srun command line split: whether auto-resume was asked for, the srun options
// (without --auto-resume) and the command with its arguments.
type Args struct {
	AutoResume bool
	// RunPolicy is --run-policy's value (a file, or the policy itself): hang detection and the
	// restart ladder (LoadPolicy); "" for none.
	RunPolicy string
	Options   [][]string // each option with its value, as given (one or two words)
	Command   []string
}

// Parse splits an srun command line. --auto-resume takes 1 (on) or 0 (off), as on HyperPod,
// written --auto-resume=1 or --auto-resume 1; --run-policy takes a file or a policy; the first word that is not an option starts the
// command, and nothing of the command is touched.
func Parse(args []string) (*Args, error) {
	a := &Args{}
	for i := 0; i < len(args); i++ {
		w := args[i]
		switch {
		case w == "--":
			a.Command = args[i+1:]
			return a, nil
		case w == "--auto-resume" || strings.HasPrefix(w, "--auto-resume="):
			v, ok := strings.CutPrefix(w, "--auto-resume=")
			if !ok {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("srun: option --auto-resume needs a value (1 or 0)")
				}
				i++
				v = args[i]
			}
			switch v {
			case "1":
				a.AutoResume = true
			case "0":
				a.AutoResume = false
			default:
				return nil, fmt.Errorf("srun: --auto-resume=%s: the value is 1 (on) or 0 (off)", v)
			}
		case w == "--run-policy" || strings.HasPrefix(w, "--run-policy="):
			v, ok := strings.CutPrefix(w, "--run-policy=")
			if !ok {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("srun: option --run-policy needs a value (a file with the run policy, or the policy)")
				}
				i++
				v = args[i]
			}
			if v == "" {
				return nil, fmt.Errorf("srun: --run-policy= is empty: give a file with the run policy, or the policy")
			}
			a.RunPolicy = v
		case strings.HasPrefix(w, "--"):
			name, _, hasValue := strings.Cut(w[2:], "=")
			if !hasValue && srunValueLong[name] && i+1 < len(args) {
				a.Options = append(a.Options, []string{w, args[i+1]})
				i++
				continue
			}
			a.Options = append(a.Options, []string{w})
		case len(w) > 1 && w[0] == '-':
			// -N2, -N 2, or grouped flags such as -lK: a value-taking letter takes the rest of
			// the word, or the next word when it ends the word.
			opt := []string{w}
			for j := 1; j < len(w); j++ {
				if strings.IndexByte(srunValueShort, w[j]) >= 0 {
					if j == len(w)-1 && i+1 < len(args) {
						opt = append(opt, args[i+1])
						i++
					}
					break
				}
			}
			a.Options = append(a.Options, opt)
		default:
			a.Command = args[i:]
			return a, nil
		}
	}
	return a, nil
}

// Srun is the command line for Slurm's srun: the options, then the command.
func (a *Args) Srun() []string {
	var out []string
	for _, o := range a.Options {
		out = append(out, o...)
	}
	return append(out, a.Command...)
}

// Alloc is the options that shape the allocation, for salloc.
func (a *Args) Alloc() []string {
	var out []string
	for _, o := range a.Options {
		w := o[0]
		if strings.HasPrefix(w, "--") {
			name, _, _ := strings.Cut(w[2:], "=")
			if allocLong[name] {
				out = append(out, o...)
			}
		} else if len(w) > 1 && strings.IndexByte(allocShort, w[1]) >= 0 {
			out = append(out, o...)
		}
	}
	return out
}
