package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
)

// The planted late period: chaos-deadline declares a deadline due
// DeadlineAfter after the run wrote its pipelines file, and nothing runs
// it. Its watchers run on workers the run kills and restarts, so the
// period must still be judged exactly once: one late record (and one
// warning, when the deadline was declared before its warning time), with
// the cause no_run and the command that starts a run, and no record of any
// other period (those were due before the declaration).

// expectedLate is what chaos-deadline's records must be: its period's
// kinds, in the order written, given when its deadline was declared.
func expectedLate(due, declared time.Time) []allot.DeadlineKind {
	if declared.Before(due.Add(-deadlineWarnBefore(due))) {
		return []allot.DeadlineKind{allot.DeadlineWarning, allot.DeadlineLate}
	}
	return []allot.DeadlineKind{allot.DeadlineLate}
}

// compareLate lists what is wrong with recs against the one planted
// period, due at due and declared at declared.
func compareLate(recs []ledger.DeadlineRecord, period string, nominal, due, declared time.Time) []string {
	var wrong []string
	var kinds []allot.DeadlineKind
	for _, rec := range recs {
		if rec.Period != period {
			wrong = append(wrong, fmt.Sprintf("period %s was judged (%s), but it was due before the deadline was declared", rec.Period, rec.Kind))
			continue
		}
		kinds = append(kinds, rec.Kind)
		if rec.Cause != allot.CauseNoRun || rec.Command != allot.RunCommand(PipelineDeadline, nominal) || !rec.DueAt.Equal(due) {
			wrong = append(wrong, fmt.Sprintf("%s %s: cause %q, command %q, due %s; want %s, %q, due %s",
				rec.Period, rec.Kind, rec.Cause, rec.Command, rec.DueAt.Format(time.RFC3339), allot.CauseNoRun, allot.RunCommand(PipelineDeadline, nominal), due.Format(time.RFC3339)))
		}
	}
	if want := expectedLate(due, declared); !slices.Equal(kinds, want) {
		wrong = append(wrong, fmt.Sprintf("period %s has records %v; want exactly %v (declared %s, due %s)", period, kinds, want,
			declared.Format(time.RFC3339), due.Format(time.RFC3339)))
	}
	return wrong
}

// checkDeadlines waits for the planted period's late record (the watchers
// write it at the deadline, or when a worker is back), then compares every
// record of the pipeline with what was planted.
func (r *run) checkDeadlines(ctx context.Context, sum *Summary, bad func(string, ...any)) error {
	p, err := r.pipelines.Get(PipelineDeadline)
	if err != nil {
		return err
	}
	period := p.PeriodOf(r.deadlineDue)
	nominal, err := p.NominalIn(period)
	if err != nil {
		return err
	}
	giveUp := time.Now().Add(time.Until(r.deadlineDue)).Add(3 * time.Minute)
	var recs []ledger.DeadlineRecord
	for {
		if recs, err = r.led.DeadlineRecords(ctx, ledger.DeadlineFilter{Pipeline: PipelineDeadline}); err != nil {
			return err
		}
		if slices.ContainsFunc(recs, func(rec ledger.DeadlineRecord) bool { return rec.Kind == allot.DeadlineLate }) || time.Now().After(giveUp) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	decl, found, err := r.led.DeadlineDeclaration(ctx, PipelineDeadline)
	if err != nil {
		return err
	}
	if !found {
		bad("%s: no worker declared its deadline", PipelineDeadline)
		return nil
	}
	sum.LateRecords = len(recs)
	wrong := compareLate(recs, period, nominal, r.deadlineDue, decl.DeclaredAt)
	for _, w := range wrong {
		bad("%s: %s", PipelineDeadline, w)
	}
	if len(wrong) == 0 {
		// The late record's command is the operator's exit: run it as
		// printed; the period completes late, and says by how much.
		if err := r.completeLatePeriod(ctx, recs, bad); err != nil {
			return err
		}
	}
	if len(recs) > 0 {
		var kinds []string
		for _, rec := range recs {
			kinds = append(kinds, string(rec.Kind))
		}
		r.logf("%s: %s judged: %s", PipelineDeadline, period, strings.Join(kinds, ", "))
	}
	return nil
}

// completeLatePeriod runs the late record's command and waits for the
// period's completed_late record.
func (r *run) completeLatePeriod(ctx context.Context, recs []ledger.DeadlineRecord, bad func(string, ...any)) error {
	i := slices.IndexFunc(recs, func(rec ledger.DeadlineRecord) bool { return rec.Kind == allot.DeadlineLate })
	late := recs[i]
	if _, err := r.runRemedy(ctx, late.Command, "--wait"); err != nil {
		bad("%s: the late record's command %q failed: %v", PipelineDeadline, late.Command, err)
		return nil
	}
	giveUp := time.Now().Add(2 * time.Minute)
	for {
		done, err := r.led.DeadlineRecords(ctx, ledger.DeadlineFilter{Pipeline: PipelineDeadline, Kind: allot.DeadlineCompletedLate})
		if err != nil {
			return err
		}
		if len(done) == 1 {
			if done[0].Period != late.Period || done[0].LateBy <= 0 {
				bad("%s: completed late %+v; want period %s, late by more than nothing", PipelineDeadline, done[0], late.Period)
			}
			return nil
		}
		if time.Now().After(giveUp) {
			bad("%s: `%s` ran, and period %s has no completed_late record", PipelineDeadline, late.Command, late.Period)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
