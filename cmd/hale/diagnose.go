package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/haleproject/hale/internal/health"
	"github.com/spf13/cobra"
)

func newDiagnoseCommand() *cobra.Command {
	var output string
	var all bool
	cmd := &cobra.Command{
		Use:   "diagnose FILE|-",
		Short: "Classify the faults in a kernel log, offline (dmesg, journal, /var/log/messages)",
		Long: `Run hale's fault classifier over a log from any machine (a node hale does not manage
included) and print each finding: its fault type, the action hale would take (Ignore, ResetGPU,
Reboot, Replace), the Xid and GPU, and the line it comes from as evidence. The worst finding,
the one that decides in a burst, is printed last.

It reads /dev/kmsg records, dmesg (plain, -T/--ctime, --time-format iso, --decode),
/var/log/messages and syslog lines, journalctl output (short, short-iso, -o json), nvidia-smi -q
output, and the DCGM, NCCL and EFA messages in hale's fault catalog. Actions are the catalog's,
before escalation (a recurrence after a repair would make a Reboot a Replace).

Exit status: 0 when nothing asks for a node action, 1 when something does (Reboot or
Replace), 2 on a usage or read error.`,
		Example: `  dmesg -T | hale diagnose -
  journalctl -k -o short-iso --since today | hale diagnose -
  hale diagnose /var/log/messages --output json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return &exitError{2, err}
				}
				defer f.Close()
				in = f
			}
			findings, err := health.Default().ClassifyText(in)
			if err != nil {
				return &exitError{2, err}
			}
			if !all {
				findings = distinct(findings)
			}
			w := cmd.OutOrStdout()
			worst, any := health.Worst(findings)
			switch output {
			case "json":
				enc := json.NewEncoder(w)
				for _, f := range findings {
					enc.Encode(findingJSON(f))
				}
			case "text", "":
				printFindings(w, findings, worst, any)
			default:
				return &exitError{2, fmt.Errorf("--output %s: use text or json", output)}
			}
			if any && worst.Action.Effective() != health.Ignore {
				return &exitError{1, fmt.Errorf("diagnose: %s asks for a %s", worst.Fault, worst.Action.Effective())}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&output, "output", "text", "text or json (one finding per line)")
	cmd.Flags().BoolVar(&all, "all", false, "print every finding, also repeats of the same fault on the same GPU")
	return cmd
}

// distinct keeps the first finding of each fault type, Xid and GPU: a burst of the same Xid
// is one finding to read.
func distinct(fs []health.Finding) []health.Finding {
	seen := map[string]bool{}
	var out []health.Finding
	for _, f := range fs {
		k := fmt.Sprintf("%s|%d|%s", f.Fault, f.Xid, f.PCI)
		if !seen[k] {
			seen[k] = true
			out = append(out, f)
		}
	}
	return out
}

func findingJSON(f health.Finding) map[string]any {
	m := map[string]any{"fault": f.Fault, "action": f.Action, "nodeAction": f.Action.Effective(), "meaning": f.Meaning,
		"source": f.Source, "evidence": f.Evidence}
	if f.Xid != 0 {
		m["xid"] = f.Xid
	}
	if f.PCI != "" {
		m["pci"] = f.PCI
	}
	if f.Cause != 0 {
		m["causedByXid"] = f.Cause
	}
	if !f.Time.IsZero() {
		m["time"] = f.Time
	}
	return m
}

func printFindings(w io.Writer, fs []health.Finding, worst health.Finding, any bool) {
	if !any {
		fmt.Fprintln(w, "no faults found")
		return
	}
	for _, f := range fs {
		head := fmt.Sprintf("%-8s %s", f.Action, f.Fault)
		if f.Xid != 0 {
			head += fmt.Sprintf("  Xid %d", f.Xid)
		}
		if f.PCI != "" {
			head += "  GPU " + f.PCI
		}
		if f.Cause != 0 {
			head += fmt.Sprintf("  (caused by Xid %d)", f.Cause)
		}
		fmt.Fprintf(w, "%s\n  %s\n  evidence: %s\n", head, f.Meaning, strings.TrimSpace(f.Evidence))
	}
	fmt.Fprintf(w, "\nworst: %s: node action %s (%s). Source: %s\n", worst.Fault, worst.Action.Effective(), worst.Meaning, worst.Source)
}
