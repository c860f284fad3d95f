package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/wire"
)

func init() { register(workersCmd) }

func workersCmd(e *env) *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "workers",
		Short: "The workers a server has seen and what each did: tasks, failures, leases lost, task time",
		Long: `List the worker processes (docs/workers.md) that the server at --server has
seen since it started, with what each did through it: the agents it
registered, polls held now, tasks it holds, tasks claimed, completed,
failed, parked with a human-input request, released, leases lost, and the
time from a task's hand-over to its finish (p50 and p95 over its last 512
tasks). Counters are the server process's: with several servers on one
database, ask each. The steps a worker served carry its id
(metadata.worker: "stepwise steps", "stepwise trace", the dashboard).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if e.server == "" {
				return usagef("workers are served by a running server: pass --server URL (or set STEPWISE_SERVER)")
			}
			cl, err := client.New(e.server, client.WithToken(e.token))
			if err != nil {
				return err
			}
			list, err := cl.Workers(cmd.Context())
			if err != nil {
				return err
			}
			if jsonOut {
				enc := json.NewEncoder(e.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			printWorkers(e.stdout, list, time.Now())
			return nil
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the JSON document of GET /v1/workers")
	return c
}

func printWorkers(w io.Writer, list *wire.WorkerList, now time.Time) {
	if len(list.Workers) == 0 {
		fmt.Fprintf(w, "no worker has called this server since it started (%s)\n", list.Since.Local().Format(time.DateTime))
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tAGENTS\tLAST SEEN\tPOLLING\tHOLDING\tCLAIMED\tCOMPLETED\tFAILED\tPARKED\tRELEASED\tLEASE LOST\tTASK P50\tTASK P95")
	for _, s := range list.Workers {
		fmt.Fprintf(tw, "%s\t%s\t%s ago\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", s.ID, strings.Join(s.Agents, ","),
			now.Sub(s.LastSeen).Round(time.Second), s.Polling, s.Holding, s.Claimed, s.Completed, s.Failed, s.Parked, s.Released, s.LeaseLost,
			taskMS(s.TaskP50MS, s.TaskSamples), taskMS(s.TaskP95MS, s.TaskSamples))
	}
	tw.Flush()
}

func taskMS(ms float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", ms)
}
