package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/haleproject/hale/internal/controller"
	"github.com/haleproject/hale/internal/server"
)

// hale repairs: the state of a cluster's automatic repairs (the cap, a pause), and resuming
// them after a burst of the same fault paused them (docs/health.md, "Repair on a real fleet").
func newRepairsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "repairs",
		Short: "List a cluster's repairs and their timelines; show or resume its automatic repairs",
		Long: `hale repairs at most a share of a cluster's nodes at once (hale server --repair-max-share,
25 % by default); the nodes beyond it are drained and wait their turn. The same fault on several
nodes at once (3 nodes and 2 % of the cluster within 10 minutes) pauses every automatic repair
of the cluster, with an Error event: a driver or firmware change, not broken hardware, is the
likely cause. 'hale repairs resume' lifts the pause once the cause is known; the waiting repairs
then start, within the cap. Repairs an operator asks for (BatchRebootClusterNodes,
BatchReplaceClusterNodes, an Action: reason in Slurm) are neither capped nor paused.
'hale repairs list' shows the cluster's repairs (30 days by default), 'hale repairs describe'
one repair's timeline: fault detected, drained, rebooted or replaced, back in service, job
resumed.`,
	}
	cmd.AddCommand(newRepairsSubcommand("status", "Show the cap, the repairs under way and waiting, and a pause"),
		newRepairsSubcommand("resume", "Lift the cluster's repair pause: the waiting repairs start, within the cap"),
		newRepairsHistoryCommand("list"), newRepairsHistoryCommand("describe"))
	return cmd
}

func newRepairsSubcommand(verb, short string) *cobra.Command {
	var cf clientFlags
	var name, output string
	cmd := &cobra.Command{
		Use:     verb + " --cluster-name NAME",
		Short:   short,
		Example: "  hale repairs " + verb + " --cluster-name ml-cluster",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return &exitError{Code: 2, Err: fmt.Errorf("--cluster-name is required")}
			}
			c, err := cf.client(cmd.Context())
			if err != nil {
				return &exitError{Code: 255, Err: err}
			}
			var body []byte
			if verb == "resume" {
				req, _ := json.Marshal(server.RepairsRequest{ClusterName: name, Action: "resume"})
				body, err = c.Post(cmd.Context(), server.RepairsPath, req)
			} else {
				body, err = c.Get(cmd.Context(), server.RepairsPath, url.Values{"cluster-name": {name}})
			}
			if err != nil {
				return &exitError{Code: 254, Err: err}
			}
			if output == "json" {
				_, err := cmd.OutOrStdout().Write(append(body, '\n'))
				return err
			}
			var st controller.RepairsStatus
			if err := json.Unmarshal(body, &st); err != nil {
				return err
			}
			printRepairs(cmd.OutOrStdout(), &st)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "cluster-name", "", "the cluster")
	cmd.Flags().StringVar(&output, "output", "text", "text or json")
	cf.add(cmd)
	return cmd
}

// printRepairs writes the status in a few lines.
func printRepairs(w io.Writer, st *controller.RepairsStatus) {
	switch p := st.Paused; {
	case st.Resumed:
		fmt.Fprintf(w, "Resumed the automatic repairs of %s (paused since %s: %s on %d nodes: %s).\n",
			st.ClusterName, p.Since.Format(time.RFC3339), p.Fault, len(p.Nodes), strings.Join(p.Nodes, ", "))
	case p != nil:
		fmt.Fprintf(w, "Automatic repairs of %s are PAUSED since %s: %s on %d nodes: %s.\nResume them with: hale repairs resume --cluster-name %s\n",
			st.ClusterName, p.Since.Format(time.RFC3339), p.Fault, len(p.Nodes), strings.Join(p.Nodes, ", "), st.ClusterName)
	default:
		fmt.Fprintf(w, "Automatic repairs of %s run.\n", st.ClusterName)
	}
	fmt.Fprintf(w, "In repair: %d (at most %d at once). Waiting: %d", st.InRepair, st.MaxInRepair, len(st.Waiting))
	if len(st.Waiting) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(st.Waiting, ", "))
	}
	fmt.Fprintln(w, ".")
}
