package slurmconf

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// CandidatePath is where hale writes a slurm.conf it is about to hand to the daemons, to have
// the node's own Slurm read it first. It sits beside slurm.conf so that a relative Include in
// it means what it will mean there.
const CandidatePath = ConfDir + "/.slurm.conf.candidate"

// RefusedPath keeps the controller's slurm.conf as an operator left it when hale refused it
// (it did not parse), so the edit is not lost when hale writes its last good one back.
const RefusedPath = ConfPath + ".refused"

// CheckConf is a command that reads the slurm.conf at path with the node's own Slurm release,
// as its daemons would, and asks slurmctld nothing: Slurm's clients parse the whole file with
// the daemons' parser before anything else (22.05, 24.11 and 26.05 alike), and `sinfo
// --version` does nothing else. It exits 0 when the file parses, and when there is no verdict
// to give (no Slurm on the node yet, no file: a configless slurmd has none to read; it then
// prints NoVerdict); else 1, with Slurm's own error lines on its output. An Include of a
// missing file is retried by Slurm for 60 s: 25 s of it is the verdict.
func CheckConf(path string) []string {
	const script = `command -v sinfo >/dev/null 2>&1 && [ -f "$1" ] || { echo "` + NoVerdict + `"; exit 0; }
out=$(SLURM_CONF="$1" timeout 25 sinfo --version 2>&1 >/dev/null) && exit 0
printf '%s\n' "$out" | grep -v -e 'resolve_ctls_from_dns_srv' -e 'Unable to process configuration file'
exit 1`
	return []string{"sh", "-c", script, "slurm-conf-check", path}
}

// NoVerdict is what CheckConf prints when the node cannot judge the file.
const NoVerdict = "slurm-conf-check: no verdict (no Slurm or no file here)"

// Problem is one thing Slurm refused in a slurm.conf: the line (1-based; 0 when Slurm's words
// name none that can be found) and its text, and Slurm's message.
type Problem struct {
	Line    int
	Text    string
	Message string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return p.Message
	}
	return fmt.Sprintf("line %d (%s): %s", p.Line, p.Text, p.Message)
}

var (
	// "Parse error in file /etc/slurm/slurm.conf line 5: " CPUs=abc"": the line of the
	// error lines printed just before it.
	parseErrorLine = regexp.MustCompile(`Parse error in file \S+ line (\d+)`)
	// Errors that name a key but no line (a key of the file's top level).
	unknownKey  = regexp.MustCompile(`unrecognized key: (\S+)`)
	badValueKey = regexp.MustCompile(`^(\w+) value .* is not a valid|is not a valid option for "(\w+)"`)
	errorPrefix = regexp.MustCompile(`^\S+: (?:error|fatal): (?:\w+: )?`)
)

// Problems reads CheckConf's output for the candidate conf it checked: each error, with the
// line of conf it is about. Slurm names the line of an error inside a NodeName or
// PartitionName line; for a key of the top level it names only the key, and the first line
// that sets it is the one.
func Problems(out, conf string) []Problem {
	lines := strings.Split(conf, "\n")
	var ps []Problem
	var pending []string // error lines not yet tied to a line
	flush := func(line int) {
		msg := strings.Join(pending, "; ")
		pending = nil
		if line == 0 {
			for _, m := range strings.Split(msg, "; ") {
				if line = keyLine(lines, m); line != 0 {
					break
				}
			}
		}
		p := Problem{Line: line, Message: msg}
		if line > 0 && line <= len(lines) {
			p.Text = strings.TrimSpace(lines[line-1])
		}
		if p.Message != "" || p.Line != 0 {
			ps = append(ps, p)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		l = strings.TrimSpace(errorPrefix.ReplaceAllString(strings.TrimSpace(l), ""))
		if l == "" {
			continue
		}
		if m := parseErrorLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			if len(pending) == 0 {
				pending = []string{l}
			}
			flush(n)
			continue
		}
		if len(pending) > 0 && (unknownKey.MatchString(l) || badValueKey.MatchString(l)) {
			flush(0) // an error of its own before this one
		}
		pending = append(pending, l)
	}
	if len(pending) > 0 {
		flush(0)
	}
	return ps
}

// keyLine is the first line of a slurm.conf that sets the key an error message names, 0 when
// it names none or none sets it (keys are case-insensitive to Slurm).
func keyLine(lines []string, msg string) int {
	key := ""
	if m := unknownKey.FindStringSubmatch(msg); m != nil {
		key = m[1]
	} else if m := badValueKey.FindStringSubmatch(msg); m != nil {
		key = m[1] + m[2]
	}
	if key == "" {
		return 0
	}
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if k, _, ok := strings.Cut(l, "="); ok && strings.EqualFold(strings.TrimSpace(k), key) {
			return i + 1
		}
	}
	return 0
}

// Refusal says in one sentence what Slurm found wrong in a slurm.conf.
func Refusal(ps []Problem) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, p.String())
	}
	if len(parts) == 0 {
		return "Slurm could not read it"
	}
	return strings.Join(parts, "; ")
}
