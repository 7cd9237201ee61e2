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

	"allot"
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
// a visibility query, following the page tokens to the end, then, for a
// pipeline that declares a deadline or has records of one, its periods'
// deadline records from the ledger (docs/design.md, "Period deadlines").
func runsCommand(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("runs", true)
	var (
		in    report.RunsInput
		since string
	)
	fs.StringVar(&in.Pipeline, "pipeline", "", "pipeline (required)")
	fs.StringVar(&since, "since", "", "only executions started, and deadline records due, at or after this time, RFC3339")
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
	if err != nil {
		return err
	}
	d, err := c.runsDeadlines(ctx, in)
	if err != nil {
		return err
	}
	if d.Shown() {
		res.Deadlines = &d
	}
	return emit(c, res, nil, printRuns)
}

// runsDeadlines reads the pipeline's deadline records for runs. Without a
// ledger there are none to read: a pipeline that declares a deadline says
// so instead of showing an empty list as if every period were on time.
func (c *cli) runsDeadlines(ctx context.Context, in report.RunsInput) (report.DeadlinesResult, error) {
	set, err := c.pipelines()
	if err != nil {
		return report.DeadlinesResult{}, err
	}
	d, err := readLedger(ctx, c, func(led *ledger.Ledger) (report.DeadlinesResult, error) {
		return report.Deadlines(ctx, led, report.DeadlinesInput{Pipeline: in.Pipeline, Since: in.Since, Pipelines: set})
	})
	if errors.Is(err, ledger.ErrNotCreated) {
		d = report.DeadlinesResult{Records: []ledger.DeadlineRecord{}}
		if p, _ := set.Get(in.Pipeline); p != nil && p.HasDeadline() {
			d.Deadline, d.Unread = p.DeadlineSpec(), err.Error()
		}
		return d, nil
	}
	return d, err
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
	if d := res.Deadlines; d.Shown() {
		printDeadlines(w, *d)
	}
}

// printDeadlines writes a pipeline's deadline and its periods' records:
// for a short period its cause, episode and the command that moves it on;
// for one completed late, when and by how much.
func printDeadlines(w io.Writer, d report.DeadlinesResult) {
	fmt.Fprintf(w, "\ndeadline\t%s\n", dash(d.Deadline))
	if dec := d.Declaration; dec != nil {
		fmt.Fprintf(w, "judged\tperiods due after %s (%s)\n", dec.ChangedAt.Format(time.RFC3339), dec.Spec)
	}
	if d.Unread != "" {
		fmt.Fprintf(w, "records\tnot read: %s\n", d.Unread)
		return
	}
	fmt.Fprintln(w, "PERIOD\tDUE\tKIND\tCOMPLETED\tCAUSE\tEPISODE\tCOMMAND")
	for _, r := range d.Records {
		cause, command := string(r.Cause), r.Command
		if r.Detail != "" {
			cause += ": " + r.Detail
		}
		if r.Kind == allot.DeadlineCompletedLate {
			cause = fmt.Sprintf("completed %s, late by %s", r.CompletedAt.Format(time.RFC3339), r.LateBy)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", r.Period, r.DueAt.Format(time.RFC3339), r.Kind, r.Completed, r.Needed, dash(cause), dash(r.EpisodeID), dash(command))
	}
	fmt.Fprintf(w, "%d deadline record(s)\n", len(d.Records))
}
