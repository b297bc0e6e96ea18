package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/server"
)

// hale repairs list|describe: a cluster's repairs and each one's timeline (fault, detected,
// drained, replaced or rebooted, back in service, job resumed), as the console's Repairs tab.
func newRepairsHistoryCommand(verb string) *cobra.Command {
	var cf clientFlags
	var name, id, output string
	var days int
	cmd := &cobra.Command{
		Use:   verb + " --cluster-name NAME",
		Short: "List a cluster's repairs, newest first",
		Example: "  hale repairs list --cluster-name ml-cluster\n" +
			"  hale repairs describe --cluster-name ml-cluster --repair-id repair-060678555aa8",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return &exitError{Code: 2, Err: fmt.Errorf("--cluster-name is required")}
			}
			if verb == "describe" && id == "" {
				return &exitError{Code: 2, Err: fmt.Errorf("--repair-id is required (hale repairs list shows them)")}
			}
			c, err := cf.client(cmd.Context())
			if err != nil {
				return &exitError{Code: 255, Err: err}
			}
			q := url.Values{"cluster-name": {name}, "days": {strconv.Itoa(days)}}
			if id != "" {
				q.Set("repair-id", id)
			}
			body, err := c.Get(cmd.Context(), server.RepairHistoryPath, q)
			if err != nil {
				return &exitError{Code: 254, Err: err}
			}
			if output == "json" {
				_, err := cmd.OutOrStdout().Write(append(body, '\n'))
				return err
			}
			var recs []controller.RepairRecord
			if err := json.Unmarshal(body, &recs); err != nil {
				return err
			}
			if verb == "describe" {
				for _, r := range recs {
					printRepairTimeline(cmd.OutOrStdout(), r)
				}
				return nil
			}
			printRepairList(cmd.OutOrStdout(), name, recs)
			return nil
		},
	}
	if verb == "describe" {
		cmd.Short = "Show one repair and its timeline"
		cmd.Use = verb + " --cluster-name NAME --repair-id ID"
		cmd.Flags().StringVar(&id, "repair-id", "", "the repair (hale repairs list shows them)")
	}
	cmd.Flags().StringVar(&name, "cluster-name", "", "the cluster")
	cmd.Flags().IntVar(&days, "days", server.DefaultRepairHistoryDays, "how many days back to look")
	cmd.Flags().StringVar(&output, "output", "text", "text or json")
	cf.add(cmd)
	return cmd
}

// printRepairList writes one line per repair.
func printRepairList(w io.Writer, cluster string, recs []controller.RepairRecord) {
	if len(recs) == 0 {
		fmt.Fprintf(w, "No repairs of %s.\n", cluster)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPAIR\tNODE\tACTION\tFAULT\tSTATE\tSTARTED\tTOOK")
	for _, r := range recs {
		took := "-"
		if n := len(r.Timeline); n > 0 {
			took = r.Timeline[n-1].At.Sub(r.Timeline[0].At).Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Node, r.Action, r.Fault, r.State,
			r.CreatedAt.UTC().Format(time.RFC3339), took)
	}
	tw.Flush()
}

// printRepairTimeline writes a repair and its steps, each with its time since the first.
func printRepairTimeline(w io.Writer, r controller.RepairRecord) {
	fmt.Fprintf(w, "Repair %s of node %s (%s", r.ID, r.Node, r.InstanceID)
	if r.NewInstanceID != "" {
		fmt.Fprintf(w, " -> %s", r.NewInstanceID)
	}
	fmt.Fprintf(w, "): %s, %s (from %s)\n", r.Action, r.State, r.Source)
	fmt.Fprintf(w, "Reason: %s\n", r.Reason)
	if r.Message != "" {
		fmt.Fprintf(w, "Message: %s\n", r.Message)
	}
	for _, s := range r.Timeline {
		fmt.Fprintf(w, "  %s  +%6.2fs  %s\n", s.At.UTC().Format("15:04:05.000"), s.At.Sub(r.Timeline[0].At).Seconds(), s.What)
	}
}
