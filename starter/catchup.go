package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"allot"
	"allot/internal/catchup"
	"allot/internal/operator"
)

// scheduleCatchUp is `starter schedule catch-up`: settle the times the
// pipeline's schedule matched while nothing ran them (the worker does it
// when it starts, `schedule unpause` for the paused time).
func scheduleCatchUp(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("schedule catch-up", true)
	var pipelineName, until string
	var dryRun bool
	fs.StringVar(&pipelineName, "pipeline", "", "pipeline (required)")
	fs.StringVar(&until, "until", "", "settle the times up to this one (RFC3339); default: those older than the schedule's catchup_window, which Temporal will not start any more")
	fs.BoolVar(&dryRun, "dry-run", false, "say what the policy would run and skip; write and start nothing")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if pipelineName == "" {
		return usageError{errors.New("--pipeline is required")}
	}
	in := catchup.SweepInput{Pipeline: pipelineName, DryRun: dryRun}
	if until != "" {
		t, err := time.Parse(time.RFC3339, until)
		if err != nil {
			return usageError{fmt.Errorf("--until %q is not an RFC3339 time (e.g. 2026-12-01T09:00:00Z)", until)}
		}
		if now := time.Now(); t.After(now) {
			return usageError{fmt.Errorf("--until %s is after now (%s): a time that has not come yet is not missed (the Schedule starts it when it comes); nothing was settled. Settle up to now at the latest: `%s`",
				t.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), allot.CatchUpCommand(pipelineName, now.Truncate(time.Second)))}
		}
		in.Until = t
	} else {
		// Those the Schedule will not start any more, by its live spec.
		in.Settled = true
	}
	s, done, err := c.schedules(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := c.sweep(ctx, s, in)
	if err != nil {
		return err
	}
	c.printSweep(res)
	return nil
}

// sweep runs one catch-up sweep with the schedules' client, on the ledger
// opened to write (read-only for a dry run).
func (c *cli) sweep(ctx context.Context, s *operator.Schedules, in catchup.SweepInput) (catchup.SweepResult, error) {
	open := c.openLedgerToWrite
	if in.DryRun {
		open = c.openLedgerReadOnly
	}
	led, err := open(ctx)
	if err != nil {
		return catchup.SweepResult{}, err
	}
	defer led.Close()
	sw := &catchup.Sweeper{Client: s.Client, Pipelines: s.Pipelines, Ledger: led, TaskQueue: s.TaskQueue, LedgerID: s.LedgerID}
	return sw.Sweep(ctx, in)
}

// catchUpAfterUnpause settles the times a schedule skipped while paused,
// under its catch_up policy (operator.CatchUpAfterUnpause).
func (c *cli) catchUpAfterUnpause(ctx context.Context, s *operator.Schedules, pipelineName string) error {
	led, err := c.openLedgerToWrite(ctx)
	if err != nil {
		return err
	}
	defer led.Close()
	res, err := operator.CatchUpAfterUnpause(ctx, s, led, pipelineName)
	if err != nil {
		return err
	}
	c.printSweep(res)
	return nil
}

func (c *cli) printSweep(res catchup.SweepResult) {
	c.print(res, func(w io.Writer) {
		switch {
		case res.NoSchedule:
			fmt.Fprintf(w, "catch-up\t%s has no schedule: nothing to catch up\n", res.Pipeline)
			return
		case res.Paused:
			fmt.Fprintf(w, "catch-up\tthe schedule of %s is paused: its missed times are settled when it is unpaused (starter schedule unpause --pipeline %s)\n", res.Pipeline, res.Pipeline)
			return
		}
		verb := "started"
		if res.DryRun {
			verb = "would start"
		}
		fmt.Fprintf(w, "catch-up\t%s, policy %s: %d missed times up to %s, %s %d, skipped %d (missed_catch_up)\n",
			res.Pipeline, res.Policy, len(res.Missed), res.Until.Format(time.RFC3339), verb, len(res.Started), len(res.Skipped))
		if sp := res.Spec; sp != nil {
			timing := "every " + sp.Interval.String()
			if sp.Cron != "" {
				timing = fmt.Sprintf("cron %q in %s", sp.Cron, cmp.Or(res.Zone, "UTC"))
			}
			fmt.Fprintf(w, "times\tthe live Schedule's (%s, jitter %s, catchup_window %s), whatever the pipeline file says\n", timing, sp.Jitter, sp.CatchupWindow)
		}
		for _, t := range res.Started {
			fmt.Fprintf(w, "run\t%s\n", t.Format(time.RFC3339))
		}
		for _, t := range res.Skipped {
			fmt.Fprintf(w, "skipped\t%s\n", t.Format(time.RFC3339))
		}
	})
}
