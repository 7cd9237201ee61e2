package deadline

import (
	"context"
	"log/slog"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// Declarer is a worker's start of the deadlines (docs/design.md, "Period
// deadlines"): it declares in the ledger the deadline each pipeline of the
// file has (the ledger keeps when it was first read and when it changed:
// periods due before are never judged) and has the pipeline's
// DeadlineWatch plan again from the declaration. A failure is logged with
// what to do and does not stop the worker: its runs do not need the
// watch, and the next worker start tries again.
type Declarer struct {
	Ledger    *ledger.Ledger
	Pipelines *pipeline.Set
	// TaskQueue is the worker's, named in the restart command a failure
	// prints.
	TaskQueue string
	Logger    *slog.Logger // nil: slog.Default()
	// Watch starts the pipeline's DeadlineWatch, or tells the one running
	// to plan again (one watch however many workers start). Unwatch tells
	// the watch of a pipeline that declares no deadline any more to plan
	// again, and so end; a watch that does not run is no error. Both are
	// the worker's Temporal calls: the workflow's package imports this one.
	Watch   func(ctx context.Context, pipelineName string) error
	Unwatch func(ctx context.Context, pipelineName string) error
}

// Run declares every pipeline's deadline, or withdraws it, once.
func (d *Declarer) Run(ctx context.Context) {
	logger := d.Logger
	if logger == nil {
		logger = slog.Default()
	}
	for _, name := range d.Pipelines.Names() {
		p, err := d.Pipelines.Get(name)
		if err != nil {
			continue
		}
		if !p.HasDeadline() {
			// A deadline the file no longer has is withdrawn, so that one
			// declared again later judges no period due meanwhile.
			if withdrawn, err := d.Ledger.WithdrawDeadline(ctx, name, time.Now()); err != nil && ctx.Err() == nil {
				logger.Warn("could not record that a pipeline declares no deadline any more", "pipeline", name, "error", err,
					"fix", "the next worker start records it; until then a deadline declared again would judge the periods due meanwhile")
			} else if withdrawn {
				logger.Info("deadline withdrawn: no period is judged until one is declared again", "pipeline", name)
			}
			// A watch of a deadline the file no longer has plans again
			// and ends now, rather than at its next deadline.
			if err := d.Unwatch(ctx, name); err != nil && ctx.Err() == nil {
				logger.Warn("could not tell the deadline watch of a pipeline without a deadline to end", "pipeline", name, "workflow_id", allot.DeadlineWatchID(name), "error", err,
					"fix", "it ends by itself at its next deadline, recording nothing")
			}
			continue
		}
		if err := d.declare(ctx, p, logger); err != nil && ctx.Err() == nil {
			logger.Error("the pipeline's deadlines are not watched", "pipeline", name, "error", err,
				"fix", "check that the ledger and Temporal are reachable and restart this worker (`"+allot.StartWorkerCommand(d.TaskQueue)+"`); until then no period of "+name+" is recorded late")
		}
	}
}

func (d *Declarer) declare(ctx context.Context, p *pipeline.Pipeline, logger *slog.Logger) error {
	before, found, err := d.Ledger.DeadlineDeclaration(ctx, p.Name)
	if err != nil {
		return err
	}
	decl, err := d.Ledger.DeclareDeadline(ctx, p.Name, p.DeadlineSpec(), time.Now())
	if err != nil {
		return err
	}
	switch {
	case !found:
		logger.Info("deadline declared: periods due from now on are judged", "pipeline", p.Name, "deadline", decl.Spec, "runs", allot.RunsCommand(p.Name))
	case before.Spec != decl.Spec:
		logger.Info("deadline changed: it applies from the next deadline on", "pipeline", p.Name, "deadline", decl.Spec, "was", before.Spec, "runs", allot.RunsCommand(p.Name))
	}
	return d.Watch(ctx, p.Name)
}
