package runpolicy

import (
	"fmt"
	"strings"
)

// ProcessProbe is a command for a node's agent that lists the processes whose environment has
// every one of env ("SLURM_JOB_ID=12", "HOSTNAME=train-worker-0"), one "pid state command" line
// each: the ranks of a job on that node. ps's e shows each process's environment after its
// arguments. The words are kept to what job ids, step ids and node and pod names have.
func ProcessProbe(env ...string) []string {
	var conds []string
	for _, e := range env {
		conds = append(conds, fmt.Sprintf(`want[%q] = 1`, shellWord(e)))
	}
	// The count is given, not taken with length(want): mawk, Debian's awk, has no length of
	// an array before 1.3.4's later releases.
	return []string{"/bin/sh", "-c", fmt.Sprintf(`ps -e e -ww -o pid=,stat=,args= | awk 'BEGIN { %s }
{ got = 0; for (i = 3; i <= NF; i++) if ($i in want) got++
  if (got >= %d) print $1, $2, $3 }'`, strings.Join(conds, "; "), len(env))}
}

// shellWord keeps only what a job id, step id, node or pod name and their variables' names
// have: digits, letters, '-', '.', '_' and '=' (the words go into a shell command).
func shellWord(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '-', r == '.', r == '_', r == '=':
			return r
		}
		return -1
	}, s)
}

// Blamed is what ProcessProbe's lines say of a node: why it is to blame for a hang ("" when it
// is not), and whether any of the job's processes runs there. A process stopped (T, t: SIGSTOP,
// a debugger), in uninterruptible sleep (D: a wedged driver or file system) or a zombie (Z:
// dead, its parent not told) is a rank that cannot take part in a collective.
func Blamed(out string) (why string, runs bool) {
	var bad []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		runs = true
		var what string
		switch f[1][0] {
		case 'T', 't':
			what = "stopped"
		case 'D':
			what = "in uninterruptible sleep"
		case 'Z':
			what = "a zombie"
		default:
			continue
		}
		bad = append(bad, fmt.Sprintf("process %s (%s) is %s (%s)", f[0], f[2], what, f[1]))
	}
	return strings.Join(bad, ", "), runs
}
