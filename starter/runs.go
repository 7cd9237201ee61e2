package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"allot/internal/ledger"
	"allot/internal/report"
)

// errTypeUsage is the "type" of the JSON error object of a command line
// mistake (exit 2).
const errTypeUsage = "usage"

// printJSONError writes the JSON error object every failing command prints
// on stdout under --json.
func printJSONError(w io.Writer, msg, errType string) {
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg, "type": errType})
}

// wantsJSON reports whether the command line asks for JSON, also when the
// flags did not parse (the JSON error object must still be printed).
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "json" {
			continue
		}
		if !hasValue {
			return true
		}
		b, err := strconv.ParseBool(value)
		return err == nil && b
	}
	return false
}

// knownPipeline refuses, naming the known pipelines, a --pipeline that
// neither the pipeline file nor the ledger knows; "" (all pipelines) passes.
func (c *cli) knownPipeline(ctx context.Context, led *ledger.Ledger, name string) error {
	if name == "" {
		return nil
	}
	pipelines, err := c.pipelines()
	if err != nil {
		return err
	}
	return report.KnownPipeline(ctx, led, pipelines, name)
}

// runsCommand lists a pipeline's ScheduledRun and Episode executions through
// a visibility query, following the page tokens to the end.
func runsCommand(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("runs", true)
	var (
		in    report.RunsInput
		since string
	)
	fs.StringVar(&in.Pipeline, "pipeline", "", "pipeline (required)")
	fs.StringVar(&since, "since", "", "only executions started at or after this time, RFC3339")
	fs.StringVar(&in.Status, "status", "", "only executions in this status: "+strings.Join(report.ExecutionStatusNames, ", "))
	fs.IntVar(&in.PageSize, "page-size", report.DefaultRunsPageSize, "executions per visibility request")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if in.Pipeline == "" {
		return usageError{errors.New("--pipeline is required")}
	}
	if since != "" {
		t, err := time.Parse(time.RFC3339, since)
		if err != nil {
			return usageError{fmt.Errorf("--since %q is not RFC3339: write it like 2026-08-03T00:00:00Z", since)}
		}
		in.Since = t
	}
	if in.PageSize <= 0 || in.PageSize > 1000 {
		return usageError{fmt.Errorf("--page-size %d: give 1 to 1000", in.PageSize)}
	}
	// Bad --pipeline or --status are usage errors, found before dialing.
	if _, err := report.RunsQuery(in); err != nil {
		return usageError{err}
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := report.ListRuns(ctx, cl, in)
	return emit(c, res, err, printRuns)
}

func printRuns(w io.Writer, res report.RunsResult) {
	fmt.Fprintln(w, "TYPE\tWORKFLOW ID\tSTATUS\tOUTCOME\tEPISODE\tSTARTED\tCLOSED")
	for _, e := range res.Executions {
		closed := "-"
		if !e.CloseTime.IsZero() {
			closed = e.CloseTime.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Type, e.WorkflowID, e.Status, dash(e.Outcome), dash(e.Episode), e.StartTime.Format(time.RFC3339), closed)
	}
	fmt.Fprintf(w, "%d execution(s)\n", len(res.Executions))
}
