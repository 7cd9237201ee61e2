package reconcile

import (
	"context"
	"log/slog"
	"time"

	"allot"
)

// Loop reconciles the vendors' bills while a worker serves (docs/design.md,
// "Reconciling the vendor's bill"): a sweep of the worker, not a Schedule,
// because it needs the worker's vendor keys, which never enter a
// workflow's history.
type Loop struct {
	Reconciler *Reconciler
	// Vendors are read again at every pass, as the paid activities read
	// their keys at every call: a rotated key is used without a restart.
	Vendors VendorsInput
	Every   time.Duration // between passes; 0: Every
	Logger  *slog.Logger  // nil: slog.Default()
	// Results, when set, is given each pass's results (the worker's bill
	// gauges).
	Results func([]Result)
}

// Run reconciles now and then every l.Every until ctx ends, logging a bill
// it could not read and new drift.
func (l *Loop) Run(ctx context.Context) {
	every, logger := l.Every, l.Logger
	if every <= 0 {
		every = Every
	}
	if logger == nil {
		logger = slog.Default()
	}
	for {
		l.Reconciler.Vendors = Vendors(ctx, l.Vendors)
		res := l.Reconciler.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		if l.Results != nil {
			l.Results(res)
		}
		for _, r := range res {
			switch {
			case !r.Reconciled:
				logger.Warn("vendor bill not reconciled", "vendor", r.Vendor, "reason", r.Reason)
			case len(r.Drift) > 0:
				logger.Warn("vendor bill drift", "vendor", r.Vendor, "new_items", len(r.Drift), "list", allot.DriftListCommand())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}
