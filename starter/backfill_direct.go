package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/internal/operator"
)

// backfillDirect is `starter schedule backfill` without --via-schedule:
// starter starts the runs itself (operator.Schedules.BackfillDirect), shows
// their progress (a bar on a terminal, JSON lines with --json, plain lines
// otherwise) and, stopped by Ctrl-C, says how to resume and exits 130.
func backfillDirect(ctx context.Context, c *cli, in operator.BackfillInput, noWait bool, progressEvery time.Duration) error {
	if in.Rate <= 0 {
		return usageError{fmt.Errorf("--rate %v: give a positive number of starts per second, e.g. --rate %v", in.Rate, operator.DefaultBackfillRate)}
	}
	if in.MaxInFlight <= 0 {
		return usageError{fmt.Errorf("--max-in-flight %d: give a positive number of runs, e.g. --max-in-flight %d", in.MaxInFlight, operator.DefaultBackfillMaxInFlight)}
	}
	in.NoWait = noWait
	// The commands it prints (consent, resume) run the same backfill.
	if f := c.givenFlags("rate", "max-in-flight", "ledger", "pipelines", "task-queue", "address", "namespace"); len(f) > 0 {
		in.Flags = append(in.Flags, shellJoin(f))
	}
	// Times still to come are refused before anything is dialed.
	if err := operator.CheckBackfillRange(in.Pipeline, in.From, in.To, time.Now(), backfillFlags(in, in.Flags...)...); err != nil {
		return usageError{err}
	}
	s, done, err := c.schedules(ctx)
	if err != nil {
		return err
	}
	defer done()
	// The ledger, read-only, tells which times already ran (they are not
	// started again) and answers the dry run. Without it every time is
	// started: those that ran get their episodes back, at a run's cost.
	ledgerErr := c.noLedger
	if ledgerErr != nil && !in.DryRun {
		fmt.Fprintf(c.stderr, "starter schedule backfill: the ledger cannot be opened (%v): every time is started, and those that already ran get their episodes back\n", ledgerErr)
	}
	if !in.DryRun && !noWait {
		in.Report, in.ReportEvery = c.backfillReporter(progressEvery)
	}
	res, err := s.BackfillDirect(ctx, in)
	c.endProgressBar()
	if err != nil && res.Resume == "" {
		return err
	}
	c.print(res, func(w io.Writer) { printDirectBackfill(w, in, res, ledgerErr) })
	switch {
	case res.Interrupted:
		fmt.Fprintf(c.stderr, "starter schedule backfill: interrupted; the %d runs started go on. Resume with (the times already run count as done):\n  %s\n", startedOf(res), res.Resume)
		return errInterrupted
	case err != nil:
		return fmt.Errorf("%w; the %d runs started go on: resume with `%s`", err, startedOf(res), res.Resume)
	}
	return nil
}

func startedOf(res operator.BackfillResult) int {
	if res.Progress == nil {
		return 0
	}
	return res.Progress.Started
}

func printDirectBackfill(w io.Writer, in operator.BackfillInput, res operator.BackfillResult, ledgerErr error) {
	switch {
	case res.DryRun:
		fmt.Fprintf(w, "dry run\tnothing started\n")
	case res.Runs == 0:
		fmt.Fprintf(w, "nothing to backfill\tthe schedule has no time in [%s, %s)\n", res.From.Format(time.RFC3339), res.To.Format(time.RFC3339))
		return
	case res.Sent:
		fmt.Fprintf(w, "started\tthe runs of %s (fast backfill)\n", res.ScheduleID)
	default:
		fmt.Fprintf(w, "started\tnothing: every time already ran\n")
	}
	fmt.Fprintf(w, "range\t[%s, %s)\n", res.From.Format(time.RFC3339), res.To.Format(time.RFC3339))
	fmt.Fprintf(w, "runs\t%d (max_backfill_runs %d)\n", res.Runs, res.MaxRuns)
	if res.Runs > 0 {
		fmt.Fprintf(w, "first\t%s\nlast\t%s\n", res.First.Format(time.RFC3339), res.Last.Format(time.RFC3339))
	}
	switch {
	case res.Existing != nil:
		fmt.Fprintf(w, "already have episodes\t%d (they get them back; the other %d allocate)\n", *res.Existing, res.Runs-*res.Existing)
	case res.DryRun:
		fmt.Fprintf(w, "already have episodes\tunknown: %v\n", ledgerErr)
	}
	toStart := res.Runs
	if res.AlreadyDone != nil {
		toStart -= *res.AlreadyDone
		fmt.Fprintf(w, "already done\t%d (an episode or a recorded run: not started again)\n", *res.AlreadyDone)
	}
	if res.DryRun && toStart > 0 {
		rate := in.Rate
		if rate <= 0 {
			rate = operator.DefaultBackfillRate
		}
		fmt.Fprintf(w, "duration\tat least %s to start %d runs at --rate %v (the worker's pace may be slower)\n", (time.Duration(float64(toStart) / rate * float64(time.Second))).Round(time.Second), toStart, rate)
	}
	printForecasts(w, res.Budgets)
	yes := allot.BackfillCommand(in.Pipeline, in.From, in.To, append(slices.Clone(in.Flags), "--yes")...)
	if res.DryRun && res.Runs > res.MaxRuns {
		fmt.Fprintf(w, "consent\tmore than max_backfill_runs: send it with %s\n", yes)
	}
	if res.DryRun && len(operator.OverBudget(res.Budgets)) > 0 {
		fmt.Fprintf(w, "consent\tmore than a budget has free, or an unknown amount (a step priced only by a quote): send it with %s\n", yes)
	}
	p := res.Progress
	switch {
	case p == nil:
	case in.NoWait:
		fmt.Fprintf(w, "progress\tnot followed (--no-wait): %d runs started, %d already done; see `%s`\n", p.Started, p.AlreadyDone, allot.StatsCommand(in.Pipeline))
	default:
		state := "processed"
		if !p.Complete() {
			state = "stopped (the runs started go on)"
		}
		fmt.Fprintf(w, "progress\t%d/%d done, %s: %d allocated, %d reused, %d skipped, %d failed, %d already done\n", p.Done, p.Total, state, p.Allocated, p.Reused, p.Skipped, p.Failed, p.AlreadyDone)
	}
	if res.Resume != "" {
		fmt.Fprintf(w, "resume\t%s\n", res.Resume)
	}
}

// backfillReporter prints the fast backfill's progress: JSON lines under
// --json; a bar redrawn in place when stderr is a terminal; else a line
// per change, at most every progressEvery.
func (c *cli) backfillReporter(progressEvery time.Duration) (func(operator.BackfillProgress), time.Duration) {
	switch {
	case c.json:
		enc := json.NewEncoder(c.stdout)
		return func(p operator.BackfillProgress) {
			_ = enc.Encode(struct {
				Progress operator.BackfillProgress `json:"progress"`
			}{p})
		}, progressEvery
	case isTerminal(c.stderr):
		start := time.Now()
		c.barOpen = true
		return func(p operator.BackfillProgress) {
			fmt.Fprintf(c.stderr, "\r%s", progressBar(p, time.Since(start), 30))
		}, 200 * time.Millisecond
	}
	return func(p operator.BackfillProgress) {
		fmt.Fprintf(c.stdout, "%d/%d done: %d allocated, %d reused, %d skipped, %d failed, %d already done, %d in flight\n",
			p.Done, p.Total, p.Allocated, p.Reused, p.Skipped, p.Failed, p.AlreadyDone, p.InFlight)
	}, progressEvery
}

// endProgressBar ends the bar's line, if one was drawn.
func (c *cli) endProgressBar() {
	if c.barOpen {
		fmt.Fprintln(c.stderr)
		c.barOpen = false
	}
}

// progressBar draws p as a bar of width cells with counts and the rate of
// the runs ended in this invocation.
func progressBar(p operator.BackfillProgress, elapsed time.Duration, width int) string {
	frac := 1.0
	if p.Total > 0 {
		frac = float64(p.Done) / float64(p.Total)
	}
	full := int(frac * float64(width))
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(p.Done-p.AlreadyDone) / s
	}
	return fmt.Sprintf("[%s%s] %3.0f%% %d/%d done (%d already), %d in flight, %.1f runs/s ",
		strings.Repeat("#", full), strings.Repeat(".", width-full), 100*frac, p.Done, p.Total, p.AlreadyDone, p.InFlight, rate)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
