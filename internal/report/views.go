// Package report is what the starter CLI reads and never changes: the views
// of episodes, costs, stats, budgets, vendors and runs, and check, the audit
// of the ledger against its files, the vendors' bills and Temporal. Each
// returns one result struct that the CLI prints as text or JSON.
package report

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// EpisodeView is an episode as the operator's views show it. Status is its
// current outcome (running, retrying, waiting_approval, needs_attention,
// rejected, completed, failed) once the Episode workflow has reported one,
// else the ledger's status (allocated, completed): the one status column
// always matches the outcome, so an episode waiting for approval or
// rejected never shows "allocated".
type EpisodeView struct {
	ledger.Episode
	Status string `json:"status"`
}

// ViewEpisode is the operator's view of e.
func ViewEpisode(e ledger.Episode) EpisodeView {
	status := e.Outcome
	if status == "" {
		status = string(e.Status)
	}
	return EpisodeView{Episode: e, Status: status}
}

func episodeViews(eps []ledger.Episode) []EpisodeView {
	out := make([]EpisodeView, len(eps))
	for i, e := range eps {
		out[i] = ViewEpisode(e)
	}
	return out
}

// KnownPipeline refuses a pipeline that neither the pipeline file (set) nor
// the ledger knows, with PipelineNotFound naming the pipelines both know: a
// misspelt --pipeline must not answer with an empty list. A pipeline that
// exists only in the ledger (removed from the file) is known. A nil set
// checks nothing.
func KnownPipeline(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, name string) error {
	if set == nil {
		return nil
	}
	_, err := set.Get(name)
	var unknown *pipeline.UnknownError
	if err == nil || !errors.As(err, &unknown) {
		return err
	}
	held, err := led.HasPipeline(ctx, name)
	if err != nil || held {
		return err
	}
	known := set.Names()
	inLedger, err := led.PipelineNames(ctx)
	if err != nil {
		return err
	}
	for _, p := range inLedger {
		if !slices.Contains(known, p) {
			known = append(known, p)
		}
	}
	slices.Sort(known)
	return allot.Errorf(allot.PipelineNotFound, "pipeline %q is not defined and the ledger holds none of its episodes or runs: known pipelines are %s", name, strings.Join(known, ", "))
}

// NormalRun reports whether a run's outcome is the normal course of a
// schedule: a new episode, the key's episode again, or a skip at the cap or
// for want of ready input. Everything else (failures, a key refused for
// another period, other skips) is worth a look.
func NormalRun(outcome allot.Outcome, reason string) bool {
	switch outcome {
	case allot.OutcomeAllocated, allot.OutcomeReused:
		return true
	case allot.OutcomeSkipped:
		return reason == allot.ReasonCapReached || reason == allot.ReasonNoReadyInput
	}
	return false
}

// addHealth adds to stats what is worth a look: the run outcomes that are
// not normal, and the episodes stalled past the pipeline's stall_after
// (counted as "stalled" instead of "retrying").
func addHealth(ctx context.Context, led *ledger.Ledger, in StatsInput, out StatsResult) (StatsResult, error) {
	out.WorthALook = []ledger.OutcomeCount{}
	for _, c := range out.Runs {
		if !NormalRun(c.Outcome, c.Reason) {
			out.WorthALook = append(out.WorthALook, c)
		}
	}
	stallAfter := pipeline.DefaultStallAfter
	if in.Pipelines != nil {
		stallAfter = in.Pipelines.StallAfter(in.Pipeline)
	}
	out.StallAfter = stallAfter.String()
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	retrying, err := led.RetryingEpisodes(ctx, in.Pipeline)
	if err != nil {
		return StatsResult{}, err
	}
	out.Stalled = []ledger.RetryingEpisode{}
	stalled := map[string]int{} // by reason, among the episodes counted
	for _, e := range retrying {
		if !e.Stalled(stallAfter, now) {
			continue
		}
		out.Stalled = append(out.Stalled, e)
		if in.Since.IsZero() || !e.CreatedAt.Before(in.Since) {
			stalled[e.Reason]++
		}
	}
	if len(stalled) == 0 {
		return out, nil
	}
	var eps []ledger.OutcomeCount
	moved := map[string]int{}
	for _, c := range out.Episodes {
		if c.Outcome == allot.OutcomeRetrying {
			n := min(stalled[c.Reason], c.Count)
			moved[c.Reason] = n
			if c.Count -= n; c.Count == 0 {
				continue
			}
		}
		eps = append(eps, c)
	}
	for reason, n := range moved {
		if n > 0 {
			eps = append(eps, ledger.OutcomeCount{Outcome: allot.OutcomeStalled, Reason: reason, Count: n})
		}
	}
	slices.SortFunc(eps, func(a, b ledger.OutcomeCount) int {
		if c := strings.Compare(string(a.Outcome), string(b.Outcome)); c != 0 {
			return c
		}
		return strings.Compare(a.Reason, b.Reason)
	})
	out.Episodes = eps
	return out, nil
}
