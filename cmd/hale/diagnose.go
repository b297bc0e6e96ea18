package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/haleproject/hale/internal/health"
	"github.com/haleproject/hale/internal/topology"
	"github.com/spf13/cobra"
)

func newDiagnoseCommand() *cobra.Command {
	var output, instanceType string
	var all bool
	cmd := &cobra.Command{
		Use:   "diagnose FILE|-",
		Short: "Classify the faults in a kernel log or a tool's output, offline (dmesg, journal, dcgmi, ...)",
		Long: `Run hale's fault classifier over a log from any machine (a node hale does not manage
included) and print each fault found: the node action hale would take (Ignore, Reboot,
Replace; a GPU reset NVIDIA asks for is a reboot on a VM, and says so), its fault type, the Xid
and GPU (or NVSwitch), and the lines it comes from as evidence.

A fault is an episode, as on a live node: the lines a driver prints for one exception (an
Xid 13 is three lines and an Xid 43) and repeats on the same GPU within 10 s are one finding.
The episodes are judged in order by hale's policy, as the server judges a node's findings:
repeat rules count episodes, and an application error (Xid 13, 31, ...) asks for a node
action only when it recurs on the same GPU in 3 different jobs or processes within an hour
(a line that names no process, pid='<unknown>', proves no new one). Escalation after a repair
(a Reboot that did not cure) needs the node's history and is not applied here. --all prints
every line's finding with the catalog's action instead, before episodes and the policy.

It reads /dev/kmsg records, dmesg (plain, -T/--ctime, --time-format iso, --decode),
/var/log/messages and syslog lines (#012 for newlines included), journalctl output (short,
short-iso, -o json), messages the driver prints over several lines, NVSwitch SXid lines,
nvidia-smi -q, dcgmi diag, dcgmi health and dcgmi nvlink --link-status outputs, DCGM error
codes, NVSentinel health events, the EKS node monitoring agent's conditions, and the NCCL
and EFA messages in hale's fault catalog.

Exit status: 0 when nothing asks for a node action, 1 when something does (Reboot or
Replace), 2 on a usage or read error.`,
		Example: `  dmesg -T | hale diagnose -
  journalctl -k -o short-iso --since today | hale diagnose -
  dcgmi nvlink --link-status | hale diagnose - --instance-type ml.p5.48xlarge
  hale diagnose /var/log/messages --output json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return &exitError{Code: 2, Err: fmt.Errorf("%w: give a file, or - for standard input", err)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "help" { // as the API verbs take it (hale <verb> help)
				return cmd.Help()
			}
			if instanceType != "" {
				if _, ok := topology.Lookup(instanceType); !ok {
					return &exitError{Code: 2, Err: fmt.Errorf("--instance-type %s: not an instance type hale knows (ml.p5.48xlarge, p4d.24xlarge, ...)", instanceType)}
				}
			}
			var in io.Reader = cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return &exitError{Code: 2, Err: err}
				}
				defer f.Close()
				in = f
			}
			cat := health.Default()
			lines, err := cat.ClassifyLines(in, health.Options{InstanceType: instanceType})
			if err != nil {
				return &exitError{Code: 2, Err: err}
			}
			findings := health.Episodes(lines, cat.Policy.EpisodeWindow)
			decisions := cat.DecideEpisodes(findings)
			w := cmd.OutOrStdout()
			worst := -1
			for i, d := range decisions {
				if worst < 0 || d.Action.Severity() > decisions[worst].Action.Severity() {
					worst = i
				}
			}
			shown, judged := findings, decisions
			if all { // every line, with the catalog's action
				shown, judged = lines, make([]health.Decision, len(lines))
				for i, f := range lines {
					judged[i] = health.Decision{Action: f.Action.Effective()}
				}
			}
			switch output {
			case "json":
				enc := json.NewEncoder(w)
				for i, f := range shown {
					enc.Encode(findingJSON(f, judged[i]))
				}
			case "text", "":
				printFindings(w, shown, judged)
				if len(findings) > 0 {
					wf, wd := findings[worst], decisions[worst]
					fmt.Fprintf(w, "\nworst: %s: node action %s (%s). Source: %s\n", wf.Fault, wd.Action, wf.Meaning, wf.Source)
				}
			default:
				return &exitError{Code: 2, Err: fmt.Errorf("--output %s: use text or json", output)}
			}
			if worst >= 0 && decisions[worst].Action != health.Ignore {
				return &exitError{Code: 1, Err: fmt.Errorf("diagnose: %s asks for a %s", findings[worst].Fault, decisions[worst].Action)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&output, "output", "text", "text or json (one finding per line)")
	cmd.Flags().BoolVar(&all, "all", false, "print every line's finding with the catalog's action, not episodes judged by the policy")
	cmd.Flags().StringVar(&instanceType, "instance-type", "", "the machine's instance type (ml.p5.48xlarge): tool outputs are checked against it (NVLinks per GPU)")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{Code: 2, Err: err} })
	return cmd
}

func findingJSON(f health.Finding, d health.Decision) map[string]any {
	m := map[string]any{"fault": f.Fault, "action": f.Action, "nodeAction": d.Action, "meaning": f.Meaning,
		"source": f.Source, "evidence": f.Evidence, "lines": max(f.Lines, 1)}
	if f.Xid != 0 {
		m["xid"] = f.Xid
	}
	if f.PCI != "" {
		m["pci"] = f.PCI
	}
	if f.Cause != 0 {
		m["causedByXid"] = f.Cause
	}
	if k := f.ProcessKey(); k != "" {
		m["process"] = k
		if f.Process != "" {
			m["processName"] = f.Process
		}
	}
	if !f.Time.IsZero() {
		m["time"] = f.Time
	}
	if d.Escalated != "" {
		m["escalated"] = d.Escalated
	}
	if d.Note != "" {
		m["note"] = d.Note
	}
	return m
}

func printFindings(w io.Writer, fs []health.Finding, ds []health.Decision) {
	if len(fs) == 0 {
		fmt.Fprintln(w, "no faults found")
		return
	}
	for i, f := range fs {
		d := ds[i]
		head := fmt.Sprintf("%-8s %s", d.Action, f.Fault)
		if f.Xid != 0 {
			head += fmt.Sprintf("  Xid %d", f.Xid)
		}
		if f.PCI != "" {
			head += "  " + health.Device(f.Fault) + " " + f.PCI
		}
		if f.Cause != 0 {
			head += fmt.Sprintf("  (caused by Xid %d)", f.Cause)
		}
		if f.Lines > 1 {
			head += fmt.Sprintf("  (%d lines)", f.Lines)
		}
		if k := f.ProcessKey(); k != "" {
			head += "  " + k
			if f.Process != "" {
				head += " " + f.Process
			}
		}
		if d.Action == health.ResetGPU {
			head += "  (NVIDIA: reset the GPU; a reboot where it cannot be reset in place, e.g. on a VM)"
		}
		fmt.Fprintf(w, "%s\n  %s\n", head, f.Meaning)
		switch {
		case d.Escalated != "":
			fmt.Fprintf(w, "  escalated from %s: %s\n", f.Action.Effective(), d.Escalated)
		case d.Note != "":
			fmt.Fprintf(w, "  no node action: %s\n", d.Note)
		}
		ev := strings.Split(strings.TrimSpace(health.EvidenceLines(f.Evidence, 6)), "\n")
		fmt.Fprintf(w, "  evidence: %s\n", strings.TrimSpace(ev[0]))
		for _, l := range ev[1:] {
			fmt.Fprintf(w, "            %s\n", strings.TrimSpace(l))
		}
	}
}
