package deadline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// Sources are what the Watcher asks Temporal. The worker wires them to
// its client (app); tests give fakes. A nil source knows nothing.
type Sources struct {
	// Schedule describes the pipeline's Schedule.
	Schedule func(ctx context.Context, pipeline string) (Schedule, error)
	// Unpicked lists the runs Temporal started for the period that wait
	// for a worker.
	Unpicked func(ctx context.Context, pipeline, period string) ([]UnpickedRun, error)
	// Episode fills in what an episode's workflow says now (Remedies,
	// Vendor, NoWorker) over what the ledger holds of it (ID, Outcome,
	// Reason).
	Episode func(ctx context.Context, pipeline string, ep Episode) (Episode, error)
}

// Watcher plans and judges the deadlines of the pipelines of one file,
// writing its records in the ledger. It keeps no state: any number of
// watchers may judge the same period, which is recorded once.
type Watcher struct {
	Ledger    *ledger.Ledger
	Pipelines *pipeline.Set
	Sources   Sources
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

func (w *Watcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// PlanInput asks for a pipeline's next deadline after After.
type PlanInput struct {
	Pipeline string    `json:"pipeline"`
	After    time.Time `json:"after,omitzero"`
	// LedgerID is the ledger the watch belongs to ("" for a watch started
	// before it was carried): a worker of another ledger refuses it.
	LedgerID string `json:"ledger_id,omitempty"`
}

// PlanResult is the next period to judge: its warning time (zero: no
// warning to give) and its deadline. Declared false: the pipeline
// declares no deadline now, and there is nothing to watch.
type PlanResult struct {
	Declared bool      `json:"declared"`
	Period   string    `json:"period,omitempty"`
	WarnAt   time.Time `json:"warn_at,omitzero"`
	DueAt    time.Time `json:"due_at,omitzero"`
}

// Plan is the first period due after the latest of in.After, the
// deadline's declaration (or last change) and the last deadline judged:
// a period due before the deadline was declared is never judged, and a
// period judged is not judged again. A pipeline whose deadline no worker
// has declared yet is declared now.
func (w *Watcher) Plan(ctx context.Context, in PlanInput) (PlanResult, error) {
	p, ok, err := w.pipeline(in.Pipeline)
	if err != nil || !ok {
		return PlanResult{}, err
	}
	decl, found, err := w.Ledger.DeadlineDeclaration(ctx, p.Name)
	if err != nil {
		return PlanResult{}, err
	}
	if !found || decl.Spec == ledger.WithdrawnDeadline {
		if decl, err = w.Ledger.DeclareDeadline(ctx, p.Name, p.DeadlineSpec(), w.now()); err != nil {
			return PlanResult{}, err
		}
	}
	judged, err := w.Ledger.LastJudgedDue(ctx, p.Name)
	if err != nil {
		return PlanResult{}, err
	}
	after := in.After
	for _, t := range []time.Time{decl.ChangedAt, judged} {
		if t.After(after) {
			after = t
		}
	}
	period, due, warn, err := p.NextDue(after)
	if err != nil {
		return PlanResult{}, err
	}
	// A warning time before the declaration, or already judged, is not
	// given: only the deadline is.
	if !warn.After(after) {
		warn = time.Time{}
	}
	return PlanResult{Declared: true, Period: period, WarnAt: warn, DueAt: due}, nil
}

// pipeline is the named pipeline when it declares a deadline; ok false
// when it is gone from the file or declares none (the watch ends).
func (w *Watcher) pipeline(name string) (*pipeline.Pipeline, bool, error) {
	p, err := w.Pipelines.Get(name)
	var unknown *pipeline.UnknownError
	if errors.As(err, &unknown) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return p, p.HasDeadline(), nil
}

// JudgeInput asks to judge one period at its warning time (Kind
// allot.DeadlineWarning) or its deadline (allot.DeadlineLate).
type JudgeInput struct {
	Pipeline string             `json:"pipeline"`
	Period   string             `json:"period"`
	Kind     allot.DeadlineKind `json:"kind"`
	DueAt    time.Time          `json:"due_at"`
	LedgerID string             `json:"ledger_id,omitempty"` // as PlanInput's
}

// JudgeResult is the period's record (Found false: none, a warning for a
// period that is not short, or a pipeline that declares no deadline any
// more); Recorded says whether this judgement wrote it.
type JudgeResult struct {
	Found    bool                  `json:"found"`
	Recorded bool                  `json:"recorded"`
	Record   ledger.DeadlineRecord `json:"record,omitzero"`
}

// Judge judges one period: when it is short of its completed episodes,
// it gathers the facts and names the cause; the ledger counts again and
// writes the record in one transaction (ledger.JudgePeriod), once.
func (w *Watcher) Judge(ctx context.Context, in JudgeInput) (JudgeResult, error) {
	p, ok, err := w.pipeline(in.Pipeline)
	if err != nil || !ok {
		return JudgeResult{}, err
	}
	j := ledger.PeriodJudgement{Pipeline: p.Name, Period: in.Period, Kind: in.Kind, DueAt: in.DueAt, Needed: p.DeadlineEpisodesNeeded(), At: w.now()}
	completed, err := w.Ledger.CompletedInPeriod(ctx, p.Name, in.Period)
	if err != nil {
		return JudgeResult{}, err
	}
	if completed < j.Needed {
		facts, err := w.Facts(ctx, p.Name, in.Period)
		if err != nil {
			return JudgeResult{}, err
		}
		v := Judge(facts)
		j.Cause, j.Detail, j.EpisodeID, j.Command = v.Cause, v.Detail, v.EpisodeID, v.Command
	}
	rec, recorded, found, err := w.Ledger.JudgePeriod(ctx, j)
	if err != nil {
		return JudgeResult{}, err
	}
	return JudgeResult{Found: found, Recorded: recorded, Record: rec}, nil
}

// Facts gathers what allot knows of one period now.
func (w *Watcher) Facts(ctx context.Context, pipelineName, period string) (Facts, error) {
	p, err := w.Pipelines.Get(pipelineName)
	if err != nil {
		return Facts{}, err
	}
	f := Facts{Pipeline: pipelineName, Period: period}
	if f.Nominal, err = p.NominalIn(period); err != nil {
		return Facts{}, err
	}
	if w.Sources.Schedule != nil {
		if f.Schedule, err = w.Sources.Schedule(ctx, pipelineName); err != nil {
			return Facts{}, fmt.Errorf("describe the schedule of %s: %w", pipelineName, err)
		}
	}
	if f.Runs, err = w.Ledger.RunOutcomesOfPeriod(ctx, pipelineName, period); err != nil {
		return Facts{}, err
	}
	if w.Sources.Unpicked != nil {
		if f.Started, err = w.Sources.Unpicked(ctx, pipelineName, period); err != nil {
			return Facts{}, fmt.Errorf("list the runs of %s period %s: %w", pipelineName, period, err)
		}
	}
	eps, err := w.Ledger.ListEpisodes(ctx, pipelineName, period)
	if err != nil {
		return Facts{}, err
	}
	for _, e := range eps {
		if e.Status == ledger.EpisodeCompleted {
			continue
		}
		ep := Episode{ID: e.ID, Outcome: allot.Outcome(e.Outcome), Reason: e.OutcomeReason}
		if w.Sources.Episode != nil {
			if ep, err = w.Sources.Episode(ctx, pipelineName, ep); err != nil {
				return Facts{}, fmt.Errorf("describe episode %s of %s: %w", e.ID, pipelineName, err)
			}
		}
		f.Episodes = append(f.Episodes, ep)
	}
	return f, nil
}
