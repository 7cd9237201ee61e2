package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"allot"
	"allot/internal/forecast"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/pipeline"
)

// scheduleCommand dispatches `starter schedule <subcommand>`.
func scheduleCommand(ctx context.Context, c *cli, args []string) error {
	return dispatch(ctx, c, "schedule", scheduleSubcommands, args)
}

// scheduleSubcommands are `starter schedule`'s subcommands.
var scheduleSubcommands = map[string]subcommand{
	"create":   scheduleChange("create"),
	"update":   scheduleChange("update"),
	"describe": scheduleSimple("describe"),
	"list":     scheduleList,
	"pause":    scheduleSimple("pause"),
	"unpause":  scheduleSimple("unpause"),
	"trigger":  scheduleSimple("trigger"),
	"backfill": scheduleBackfill,
	"catch-up": scheduleCatchUp,
	"delete":   scheduleSimple("delete"),
}

// schedules connects and returns the schedule operations.
func (c *cli) schedules(ctx context.Context) (*operator.Schedules, func(), error) {
	pipelines, err := c.pipelines()
	if err != nil {
		return nil, nil, err
	}
	// The ledger, read-only, names the ledger the runs are allocated in
	// (a worker of another ledger refuses them), and answers a backfill's
	// look-ups, forecast and progress. None yet leaves the runs to the
	// first worker's (c.noLedger says why); any other failure to read it
	// is an error, since runs without its identity would be taken by a
	// worker of any ledger.
	led, err := c.openLedgerReadOnly(ctx)
	switch {
	case errors.Is(err, ledger.ErrNotCreated):
		c.noLedger, led = err, nil
	case err != nil:
		return nil, nil, err
	}
	cl, err := c.dial(ctx)
	if err != nil {
		if led != nil {
			led.Close()
		}
		return nil, nil, err
	}
	s := &operator.Schedules{Client: cl, Pipelines: pipelines, TaskQueue: c.cfg.TaskQueue, Namespace: c.resolvedNamespace}
	if led != nil {
		s.Ledger, s.LedgerID = led, led.ID()
	}
	return s, func() {
		cl.Close()
		if led != nil {
			led.Close()
		}
	}, nil
}

// holdAfterChange gives s the ledger, opened to write, that a change of
// schedule writes the budgets' holds in at once, when a budget holds for
// its scheduled runs and the ledger exists; otherwise the worker's next
// pass writes them. The returned func closes it.
func (c *cli) holdAfterChange(ctx context.Context, s *operator.Schedules) (func(), error) {
	holds := slices.ContainsFunc(s.Pipelines.Budgets(), func(b pipeline.Budget) bool { return b.HoldScheduled })
	if !holds || s.Ledger == nil {
		return func() {}, nil
	}
	led, err := c.openLedgerToWrite(ctx)
	if err != nil {
		return nil, err
	}
	s.HoldLedger = led
	return func() { led.Close() }, nil
}

func bindScheduleFlags(c *cli, name string, in *operator.ScheduleInput) *flag.FlagSet {
	fs := c.flags("schedule "+name, true)
	fs.StringVar(&in.Pipeline, "pipeline", "", "pipeline (required)")
	fs.StringVar(&in.Override.Cron, "cron", "", "cron expression, e.g. \"0 2 * * MON\" (in the pipeline's time zone)")
	fs.StringVar(&in.Override.Interval, "interval", "", "interval, e.g. 168h")
	fs.StringVar(&in.Override.Jitter, "jitter", "", "random delay up to this, e.g. 30s")
	fs.StringVar(&in.Override.Overlap, "overlap", "", "overlap policy: "+fmt.Sprint(pipeline.OverlapPolicies)+" (default "+pipeline.DefaultOverlap+")")
	fs.StringVar(&in.Override.CatchupWindow, "catchup-window", "", "how late a missed time may still run, e.g. 24h (minimum 10s)")
	fs.StringVar(&in.Note, "note", "", "note shown with the schedule")
	fs.StringVar(&in.By, "by", "", "who acts, shown in the note as \"by NAME: NOTE\" (default $USER, else the operating system's user name)")
	return fs
}

func scheduleChange(name string) func(context.Context, *cli, []string) error {
	return func(ctx context.Context, c *cli, args []string) error {
		var in operator.ScheduleInput
		fs := bindScheduleFlags(c, name, &in)
		if name == "create" {
			fs.BoolVar(&in.Paused, "paused", false, "create it paused")
		}
		if err := c.parse(fs, args); err != nil {
			return err
		}
		if in.Pipeline == "" {
			return usageError{errors.New("--pipeline is required")}
		}
		if in.Override.Cron != "" && in.Override.Interval != "" {
			return usageError{fmt.Errorf("--cron %q and --interval %q conflict: a schedule has one timing, give one of them", in.Override.Cron, in.Override.Interval)}
		}
		s, done, err := c.schedules(ctx)
		if err != nil {
			return err
		}
		defer done()
		closeHold, err := c.holdAfterChange(ctx, s)
		if err != nil {
			return err
		}
		defer closeHold()
		var res operator.ScheduleResult
		if name == "create" {
			res, err = s.Create(ctx, in)
		} else {
			res, err = s.Update(ctx, in)
		}
		if err != nil {
			return err
		}
		c.printSchedule(res)
		return nil
	}
}

func scheduleSimple(name string) func(context.Context, *cli, []string) error {
	return func(ctx context.Context, c *cli, args []string) error {
		fs := c.flags("schedule "+name, true)
		var (
			pipelineName string
			note         operator.ScheduleNote
		)
		fs.StringVar(&pipelineName, "pipeline", "", "pipeline (required)")
		if name == "pause" || name == "unpause" {
			fs.StringVar(&note.Text, "note", "", "why")
			fs.StringVar(&note.By, "by", "", "who acts, shown in the note as \"by NAME: NOTE\" (default $USER, else the operating system's user name)")
		}
		if err := c.parse(fs, args); err != nil {
			return err
		}
		if pipelineName == "" {
			return usageError{errors.New("--pipeline is required")}
		}
		s, done, err := c.schedules(ctx)
		if err != nil {
			return err
		}
		defer done()
		if name == "pause" || name == "unpause" || name == "delete" {
			closeHold, err := c.holdAfterChange(ctx, s)
			if err != nil {
				return err
			}
			defer closeHold()
		}
		var res operator.ScheduleResult
		switch name {
		case "describe":
			res, err = s.Describe(ctx, pipelineName)
		case "pause":
			res, err = s.Pause(ctx, pipelineName, note)
		case "unpause":
			res, err = s.Unpause(ctx, pipelineName, note)
		case "trigger":
			res, err = s.Trigger(ctx, pipelineName)
		case "delete":
			if err = s.Delete(ctx, pipelineName); err == nil {
				c.print(map[string]string{"deleted": pipelineName}, func(w io.Writer) { fmt.Fprintf(w, "deleted the schedule of %s\n", pipelineName) })
			}
			return err
		}
		if err != nil {
			return err
		}
		c.printSchedule(res)
		if name == "trigger" {
			c.printTriggered(res)
		}
		if name == "unpause" {
			return c.catchUpAfterUnpause(ctx, s, pipelineName)
		}
		return nil
	}
}

func scheduleList(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("schedule list", true)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	s, done, err := c.schedules(ctx)
	if err != nil {
		return err
	}
	defer done()
	list, err := s.List(ctx)
	return emit(c, list, err, printSchedules)
}

func printSchedules(w io.Writer, list []operator.ScheduleSummary) {
	fmt.Fprintln(w, "SCHEDULE\tPIPELINE\tPAUSED\tNEXT\tNOTE")
	for _, e := range list {
		next := "-"
		if len(e.NextActionTimes) > 0 {
			next = e.NextActionTimes[0].Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%s\n", e.ScheduleID, e.Pipeline, e.Paused, next, dash(e.Note))
	}
}

func scheduleBackfill(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("schedule backfill", true)
	var (
		in            operator.BackfillInput
		from, to      string
		noWait        bool
		progressEvery time.Duration
	)
	fs.StringVar(&in.Pipeline, "pipeline", "", "pipeline (required)")
	fs.StringVar(&from, "from", "", "first nominal time, RFC3339, inclusive (required)")
	fs.StringVar(&to, "to", "", "end of the range, RFC3339, exclusive: a time on --to does not run (required)")
	fs.BoolVar(&in.Yes, "yes", false, "consent to more runs than the pipeline's max_backfill_runs")
	fs.BoolVar(&in.DryRun, "dry-run", false, "count the runs (first, last, how many already have episodes) and send nothing")
	fs.BoolVar(&noWait, "no-wait", false, "return once the backfill is sent, without following its runs")
	fs.DurationVar(&progressEvery, "progress-interval", time.Second, "how often to print the runs' progress (read from the ledger with --via-schedule)")
	viaSchedule := fs.Bool("via-schedule", false, "let the pipeline's Temporal Schedule start the runs (its own backfill: about 10 runs a second, listed in the Schedule's history); default: starter starts them itself")
	fs.Float64Var(&in.Rate, "rate", operator.DefaultBackfillRate, "fast backfill: most runs started per second")
	fs.IntVar(&in.MaxInFlight, "max-in-flight", operator.DefaultBackfillMaxInFlight, "fast backfill: most runs started and not yet ended")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if in.Pipeline == "" || from == "" || to == "" {
		return usageError{errors.New("--pipeline, --from and --to are required")}
	}
	if progressEvery <= 0 {
		return usageError{fmt.Errorf("--progress-interval %s: give a positive duration", progressEvery)}
	}
	var err error
	if in.From, err = time.Parse(time.RFC3339, from); err != nil {
		return usageError{fmt.Errorf("--from %q is not RFC3339: write it like 2026-08-03T00:00:00Z", from)}
	}
	if in.To, err = time.Parse(time.RFC3339, to); err != nil {
		return usageError{fmt.Errorf("--to %q is not RFC3339: write it like 2026-08-10T00:00:00Z", to)}
	}
	if !*viaSchedule {
		return backfillDirect(ctx, c, in, noWait, progressEvery)
	}
	if c.given["rate"] != "" || c.given["max-in-flight"] != "" {
		return usageError{errors.New("--rate and --max-in-flight throttle the fast backfill, which starts the runs itself; the Schedule (--via-schedule) paces its own: drop them, or drop --via-schedule")}
	}
	// The commands the refusals print run this backfill again.
	in.Flags = append(in.Flags, "--via-schedule")
	if f := c.givenFlags("ledger", "pipelines", "task-queue", "address", "namespace"); len(f) > 0 {
		in.Flags = append(in.Flags, shellJoin(f))
	}
	if err := operator.CheckBackfillRange(in.Pipeline, in.From, in.To, time.Now(), backfillFlags(in, in.Flags...)...); err != nil {
		return usageError{err}
	}
	s, done, err := c.schedules(ctx)
	if err != nil {
		return err
	}
	defer done()
	in.NoWait, in.ReportEvery = noWait, progressEvery
	in.Report = func(p operator.BackfillProgress) {
		if !c.json {
			fmt.Fprintf(c.stdout, "%d/%d done: %d allocated, %d reused, %d skipped, %d failed\n", p.Done, p.Total, p.Allocated, p.Reused, p.Skipped, p.Failed)
		}
	}
	in.Sent = func(res operator.BackfillResult) {
		if !c.json && !noWait && !res.NominalUnknown {
			fmt.Fprintf(c.stdout, "backfilling %s: %d runs from %s to %s (Ctrl-C stops watching; the backfill goes on)\n",
				res.ScheduleID, res.Runs, res.First.Format(time.RFC3339), res.Last.Format(time.RFC3339))
		}
	}
	res, err := s.Backfill(ctx, in)
	if err != nil {
		return err
	}
	ledgerErr := c.noLedger
	c.print(res, func(w io.Writer) {
		switch {
		case res.DryRun:
			fmt.Fprintf(w, "dry run\tnothing sent\n")
		case res.Runs == 0:
			fmt.Fprintf(w, "nothing to backfill\tthe schedule has no time in [%s, %s)\n", res.From.Format(time.RFC3339), res.To.Format(time.RFC3339))
			return
		default:
			fmt.Fprintf(w, "sent\tbackfill of %s\n", res.ScheduleID)
		}
		fmt.Fprintf(w, "range\t[%s, %s)\n", res.From.Format(time.RFC3339), res.To.Format(time.RFC3339))
		fmt.Fprintf(w, "runs\t%d (max_backfill_runs %d)\n", res.Runs, res.MaxRuns)
		if res.Runs > 0 {
			fmt.Fprintf(w, "first\t%s\nlast\t%s\n", res.First.Format(time.RFC3339), res.Last.Format(time.RFC3339))
			if res.DryRun {
				// Temporal's scheduler starts at most 10 backfilled
				// runs per second (BackfillsPerIteration in v1.32).
				fmt.Fprintf(w, "duration\tat least %s: Temporal's scheduler starts about 10 backfilled runs a second\n", (time.Duration(res.Runs) * time.Second / 10).Round(time.Second))
			}
		}
		switch {
		case res.Existing != nil:
			fmt.Fprintf(w, "already have episodes\t%d (they get them back; the other %d allocate)\n", *res.Existing, res.Runs-*res.Existing)
		case res.NominalUnknown:
			fmt.Fprintf(w, "nominal times\tunknown: the schedule's jitter hides them for this spec (first and last are jittered action times); the runs' keys cannot be looked up or followed\n")
		case res.DryRun:
			fmt.Fprintf(w, "already have episodes\tunknown: %v\n", ledgerErr)
		}
		printForecasts(w, res.Budgets)
		if res.DryRun && res.Runs > res.MaxRuns {
			fmt.Fprintf(w, "consent\tmore than max_backfill_runs: send it with %s\n", allot.BackfillCommand(in.Pipeline, in.From, in.To, append(slices.Clone(in.Flags), "--yes")...))
		}
		if res.DryRun && len(operator.OverBudget(res.Budgets)) > 0 {
			fmt.Fprintf(w, "consent\tmore than a budget has free, or an unknown amount (a step priced only by a quote): send it with %s\n", allot.BackfillCommand(in.Pipeline, in.From, in.To, append(slices.Clone(in.Flags), "--yes")...))
		}
		if p := res.Progress; p != nil {
			state := "processed"
			if !p.Complete() {
				state = "still running (stopped watching)"
			}
			fmt.Fprintf(w, "progress\t%d/%d done, %s: %d allocated, %d reused, %d skipped, %d failed\n", p.Done, p.Total, state, p.Allocated, p.Reused, p.Skipped, p.Failed)
		} else if res.Sent {
			why := "--no-wait"
			if res.NominalUnknown {
				why = "the nominal times are unknown"
			}
			fmt.Fprintf(w, "progress\tnot followed (%s): see `%s`\n", why, allot.StatsCommand(in.Pipeline))
		}
	})
	return nil
}

func (c *cli) printSchedule(res operator.ScheduleResult) {
	c.print(res, func(w io.Writer) {
		fmt.Fprintf(w, "schedule\t%s (pipeline %s)\n", res.ScheduleID, res.Pipeline)
		if res.Spec.Cron != "" {
			fmt.Fprintf(w, "cron\t%s\n", res.Spec.Cron)
		} else {
			fmt.Fprintf(w, "interval\t%s\n", res.Spec.Interval)
		}
		fmt.Fprintf(w, "jitter\t%s\noverlap\t%s\ncatch-up window\t%s\npaused\t%v\n", res.Spec.Jitter, res.Spec.Overlap, res.Spec.CatchupWindow, res.Paused)
		if res.Note != "" {
			fmt.Fprintf(w, "note\t%s\n", res.Note)
		}
		fmt.Fprintf(w, "actions\t%d (skipped for overlap %d, missed catch-up %d)\n", res.Actions, res.SkippedOverlap, res.MissedCatchup)
		for _, t := range res.NextActionTimes {
			fmt.Fprintf(w, "next\t%s\n", t.Format(time.RFC3339))
		}
		for _, a := range res.RecentActions {
			fmt.Fprintf(w, "ran\t%s\t%s\n", a.NominalTime.Format(time.RFC3339), a.WorkflowID)
		}
		for _, h := range res.Holds {
			fmt.Fprintf(w, "budget %s\t%s\n", h.Budget, holdLine(h))
		}
		if res.HoldError != "" {
			fmt.Fprintf(w, "holds\tnot written again (%s): the worker writes them within %s\n", res.HoldError, forecast.HoldEvery)
		}
	})
}

// holdLine says what a budget period holds for its scheduled runs and
// what it leaves free.
func holdLine(h ledger.BudgetPeriod) string {
	m := func(a int64) string { return allot.Money{Amount: a, Currency: h.Currency}.String() }
	return fmt.Sprintf("period %s holds %s for %d scheduled runs; %s free for manual runs, backfills and retries",
		h.Period, m(h.HeldForSchedule), h.HeldRuns, m(max(h.Free, 0)))
}

// backfillFlags are the flags of a backfill command line beside extra.
func backfillFlags(in operator.BackfillInput, extra ...string) []string {
	if in.Yes {
		extra = append([]string{"--yes"}, extra...)
	}
	return extra
}

// printTriggered says which run a trigger started, and that a paused
// schedule stays paused: a trigger runs once, the schedule's own times wait.
func (c *cli) printTriggered(res operator.ScheduleResult) {
	if c.json {
		return
	}
	fmt.Fprintf(c.stdout, "triggered: run %s started\n", res.Triggered)
	if res.Paused {
		fmt.Fprintf(c.stdout, "the schedule stays paused: this run only; its own times run again after `%s`\n", allot.ScheduleUnpauseCommand(res.Pipeline))
	}
}
