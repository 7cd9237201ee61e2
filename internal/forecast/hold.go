package forecast

// Scheduled work funded first (docs/design.md, "Scheduled work funded
// first"): what each budget with hold_scheduled holds for the scheduled
// runs still due in its current period, written at each period's start,
// every HoldEvery, and after a Schedule changes.

import (
	"context"
	"log/slog"
	"time"

	"allot/internal/ledger"
)

// HoldEvery is how often a worker writes the holds again: a Schedule
// changed from outside allot (the temporal CLI, the Web UI) is held for
// within it.
const HoldEvery = time.Minute

// Holds writes, for every budget, what its current period holds for its
// scheduled runs: the forecast's scheduled runs for a budget with
// hold_scheduled (none while its Schedules are paused), nothing for the
// others (a hold left from before is released). It returns the periods of
// the budgets that hold.
func Holds(ctx context.Context, in Input) ([]ledger.BudgetPeriod, error) {
	at := in.now()
	var out []ledger.BudgetPeriod
	for _, b := range in.Pipelines.Budgets() {
		period := b.PeriodOf(at)
		hold := ledger.HoldInput{Budget: ledger.LimitOf(b), Period: period, At: at}
		if b.HoldScheduled {
			p, err := Of(ctx, in, b, period)
			if err != nil {
				return nil, err
			}
			hold.Runs = p.Scheduled
		}
		bp, err := in.Ledger.HoldScheduled(ctx, hold)
		if err != nil {
			return nil, err
		}
		if b.HoldScheduled {
			out = append(out, bp)
		}
	}
	return out, nil
}

// HoldKeeper writes the holds while a worker serves.
type HoldKeeper struct {
	Input  Input
	Logger *slog.Logger
}

// Run writes the holds now, then every HoldEvery and at the start of
// every budget's next period, until ctx ends. A failure is logged and the
// next pass tries again; until then the holds written last stand.
func (k *HoldKeeper) Run(ctx context.Context) {
	logger := k.Logger
	if logger == nil {
		logger = slog.Default()
	}
	for {
		if _, err := Holds(ctx, k.Input); err != nil && ctx.Err() == nil {
			logger.Error("writing the budgets' holds for their scheduled runs failed; the holds written last stand until the next pass", "error", err, "next", HoldEvery)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(k.wait(time.Now())):
		}
	}
}

// wait is how long until the next pass: HoldEvery, or less when a
// budget's period ends sooner, so that a new period is held for from its
// start.
func (k *HoldKeeper) wait(now time.Time) time.Duration {
	wait := HoldEvery
	for _, b := range k.Input.Pipelines.Budgets() {
		if !b.HoldScheduled {
			continue
		}
		if _, end, err := b.PeriodBounds(b.PeriodOf(now)); err == nil && end.Sub(now) < wait {
			wait = max(end.Sub(now), time.Millisecond)
		}
	}
	return wait
}
