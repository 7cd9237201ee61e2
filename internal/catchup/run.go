package catchup

import (
	"context"
	"log/slog"
	"time"

	"allot"
)

// Run settles the times Temporal will not start any more while a worker
// serves: a sweep of every scheduled pipeline now and then every
// SweepEvery, until ctx ends (docs/design.md, "Catch-up"). What it did is
// logged; a failure is logged with the command that settles it, and the
// next sweep tries again.
func (s *Sweeper) Run(ctx context.Context) {
	for {
		s.log(ctx, s.SweepAll(ctx, time.Now()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(SweepEvery):
		}
	}
}

func (s *Sweeper) log(ctx context.Context, res []SweepResult) {
	logger := s.Logger
	if logger == nil {
		logger = slog.Default()
	}
	for _, r := range res {
		switch {
		case r.Error != "" && ctx.Err() == nil:
			logger.Error("catch-up of missed times failed", "pipeline", r.Pipeline, "error", r.Error, "retry", allot.CatchUpCommand(r.Pipeline, r.Until))
		case len(r.Missed) > 0:
			logger.Info("caught up missed times", "pipeline", r.Pipeline, "policy", r.Policy, "missed", len(r.Missed), "started", len(r.Started), "skipped", len(r.Skipped))
		}
	}
}
