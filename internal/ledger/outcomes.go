package ledger

// Outcomes (invariant 10: every run says why, counted per reason). A
// ScheduledRun's outcome is a row of run_outcomes (episodes.go); an
// episode's current outcome lives on its row in episodes, as the Episode
// workflow last reported it. The counting queries here feed the operator's
// views and the metrics, so each one is served by an index (0001, 0003,
// 0006).

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"allot"
)

// OutcomeCount is how many runs or episodes ended one way.
type OutcomeCount struct {
	Outcome allot.Outcome `json:"outcome"`
	Reason  string        `json:"reason"`
	Count   int           `json:"count"`
}

// RecordEpisodeOutcome sets the episode's current outcome and reason, as the
// Episode workflow reports them (e.g. "completed"/"", "needs_attention"/
// "OutcomeUnknown", "waiting_approval"/"", "rejected"/"", "failed"/"<error
// type>"), with the time it happened; a zero at means now.
//
// It is idempotent: reporting the outcome and reason the episode already has
// changes nothing, so the stored time only moves when the outcome or the
// reason changes. A report older than the stored one (at before its time,
// e.g. from an activity attempt that was given up on but ran late) changes
// nothing either, so a stale report never hides a newer outcome.
//
// ErrEpisodeNotFound if the episode does not exist; ErrInvalidInput if the
// outcome is empty.
func (l *Ledger) RecordEpisodeOutcome(ctx context.Context, pipeline, episodeID string, outcome allot.Outcome, reason string, at time.Time) error {
	if err := episodeRef(pipeline, episodeID); err != nil {
		return err
	}
	if outcome == "" {
		return invalid("outcome report for episode %s of %s has no outcome (reason %q): name how the episode stands, e.g. completed or needs_attention",
			episodeID, pipeline, reason)
	}
	if reason == "" {
		// Every outcome has a reason; workers from before reasons were
		// reported for every stage send none for these.
		reason = allot.Stage(outcome).Reason()
	}
	if reason == "" {
		return invalid("outcome %s of episode %s of %s has no reason: name why, e.g. the error type", outcome, episodeID, pipeline)
	}
	if at.IsZero() {
		at = now()
	}
	atArg := l.d.timeArg(at)
	return l.writeTx(ctx, func(tx *sql.Tx) error {
		// One conditional UPDATE: unchanged values and stale reports match no
		// row, so neither moves outcome_at.
		res, err := tx.ExecContext(ctx, l.d.q(`UPDATE episodes
			SET outcome = ?, outcome_reason = ?, outcome_at = ?
			WHERE pipeline = ? AND episode_id = ?
				AND (outcome <> ? OR outcome_reason <> ?)
				AND (outcome_at IS NULL OR outcome_at <= ?)`),
			outcome, reason, atArg, pipeline, episodeID, outcome, reason, atArg)
		if err != nil {
			return fmt.Errorf("ledger %s: record outcome %q (%q) of episode %s of %s: %w", l.where, outcome, reason, episodeID, pipeline, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("ledger %s: record outcome %q (%q) of episode %s of %s: %w", l.where, outcome, reason, episodeID, pipeline, err)
		}
		if n == 0 {
			// Nothing to change, or no such episode: tell them apart.
			return l.episodeExists(ctx, tx, pipeline, episodeID)
		}
		if outcome == allot.OutcomeRejected {
			// A rejected episode runs no later step: what it reserved for
			// them goes back to its budgets.
			return l.releaseUnsentOfEpisodeTx(ctx, tx, pipeline, episodeID)
		}
		return nil
	})
}

// RunOutcomeCounts counts the ScheduledRun outcomes of a pipeline ("" = all
// pipelines) recorded at or after since (zero = ever), grouped by (outcome,
// reason) and ordered by outcome, then reason. Each (allocation key, run ID)
// has one row, so a retried run counts once.
func (l *Ledger) RunOutcomeCounts(ctx context.Context, pipeline string, since time.Time) ([]OutcomeCount, error) {
	query, args := l.runOutcomeCountsQuery(pipeline, since)
	rows, err := l.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: count run outcomes: %w", l.where, err)
	}
	defer rows.Close()
	var out []OutcomeCount
	for rows.Next() {
		var c OutcomeCount
		if err := rows.Scan(&c.Outcome, &c.Reason, &c.Count); err != nil {
			return nil, fmt.Errorf("ledger %s: read run outcome count: %w", l.where, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read run outcome counts: %w", l.where, err)
	}
	sortOutcomeCounts(out)
	return out, nil
}

// runOutcomeCountsQuery: with a pipeline, a range of
// run_outcomes_pipeline_recorded; across pipelines, a range of
// run_outcomes_recorded (or every row, when since is zero).
func (l *Ledger) runOutcomeCountsQuery(pipeline string, since time.Time) (string, []any) {
	where, args := outcomeFilter(l.d, "recorded_at", pipeline, since)
	return l.d.q(`SELECT outcome, reason, COUNT(*) FROM run_outcomes` + where + ` GROUP BY outcome, reason`), args
}

// EpisodeOutcomeCounts counts the episodes of a pipeline ("" = all
// pipelines) created at or after since (zero = ever) by their current
// outcome and reason, ordered by outcome, then reason. An episode without a
// reported outcome counts as "allocated", or as "completed" if its status is
// completed (reason steps_completed), with reason "".
func (l *Ledger) EpisodeOutcomeCounts(ctx context.Context, pipeline string, since time.Time) ([]OutcomeCount, error) {
	query, args := l.episodeOutcomeCountsQuery(pipeline, since)
	rows, err := l.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: count episode outcomes: %w", l.where, err)
	}
	defer rows.Close()
	// Grouped by status as well, and folded here: an unreported completed
	// episode and one reported "completed" are one line.
	type group struct{ outcome, reason string }
	counts := map[group]int{}
	for rows.Next() {
		var (
			g      group
			status string
			n      int
		)
		if err := rows.Scan(&g.outcome, &g.reason, &status, &n); err != nil {
			return nil, fmt.Errorf("ledger %s: read episode outcome count: %w", l.where, err)
		}
		if g.outcome == "" {
			g.outcome, g.reason = string(EpisodeAllocated), ""
			if EpisodeStatus(status) == EpisodeCompleted {
				g.outcome, g.reason = string(EpisodeCompleted), allot.ReasonStepsCompleted
			}
		}
		counts[g] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read episode outcome counts: %w", l.where, err)
	}
	var out []OutcomeCount
	for g, n := range counts {
		out = append(out, OutcomeCount{Outcome: allot.Outcome(g.outcome), Reason: g.reason, Count: n})
	}
	sortOutcomeCounts(out)
	return out, nil
}

// episodeOutcomeCountsQuery: with a pipeline, a range of
// episodes_pipeline_created (or of the pipeline's primary key range, when
// since is zero).
func (l *Ledger) episodeOutcomeCountsQuery(pipeline string, since time.Time) (string, []any) {
	where, args := outcomeFilter(l.d, "created_at", pipeline, since)
	return l.d.q(`SELECT outcome, outcome_reason, status, COUNT(*) FROM episodes` + where +
		` GROUP BY outcome, outcome_reason, status`), args
}

// EpisodesNeedingAttention counts, per pipeline, the episodes whose current
// outcome is "needs_attention"; pipelines with none are absent. It is read
// on every metrics scrape, so it only reads one range of the
// episodes_outcome_pipeline index, however long the history. That index
// holds only the episodes with a reported outcome (0006), so that
// allocating an episode writes no entry to it.
func (l *Ledger) EpisodesNeedingAttention(ctx context.Context) (map[string]int, error) {
	query, args := l.needingAttentionQuery()
	rows, err := l.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: count episodes needing attention: %w", l.where, err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			pipeline string
			n        int
		)
		if err := rows.Scan(&pipeline, &n); err != nil {
			return nil, fmt.Errorf("ledger %s: read episodes needing attention: %w", l.where, err)
		}
		out[pipeline] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read episodes needing attention: %w", l.where, err)
	}
	return out, nil
}

// EpisodesWaitingOnPausedVendor counts, per pipeline, the episodes whose
// step waits because an operator paused its vendor (outcome
// waiting_vendor, reason vendor_paused): work a pause holds back.
func (l *Ledger) EpisodesWaitingOnPausedVendor(ctx context.Context) (map[string]int, error) {
	rows, err := l.r.QueryContext(ctx, l.d.q(`SELECT pipeline, COUNT(*) FROM episodes WHERE outcome = ? AND outcome_reason = ? AND outcome <> '' GROUP BY pipeline`),
		allot.OutcomeWaitingVendor, allot.ReasonVendorPaused)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: count episodes waiting on a paused vendor: %w", l.where, err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			pipeline string
			n        int
		)
		if err := rows.Scan(&pipeline, &n); err != nil {
			return nil, fmt.Errorf("ledger %s: read episodes waiting on a paused vendor: %w", l.where, err)
		}
		out[pipeline] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read episodes waiting on a paused vendor: %w", l.where, err)
	}
	return out, nil
}

func (l *Ledger) needingAttentionQuery() (string, []any) {
	// "outcome <> ''" is the condition of the partial index (0006): the
	// planner uses it only when the query implies the condition, which it
	// cannot see in a parameter.
	return l.d.q(`SELECT pipeline, COUNT(*) FROM episodes WHERE outcome = ? AND outcome <> '' GROUP BY pipeline`), []any{allot.OutcomeNeedsAttention}
}

// outcomeFilter builds the WHERE clause of the counting queries: an optional
// pipeline and an optional lower bound on timeCol.
func outcomeFilter(d *dialect, timeCol, pipeline string, since time.Time) (string, []any) {
	var (
		conds []string
		args  []any
	)
	if pipeline != "" {
		conds = append(conds, `pipeline = ?`)
		args = append(args, pipeline)
	}
	if !since.IsZero() {
		conds = append(conds, timeCol+` >= ?`)
		args = append(args, d.timeArg(since))
	}
	if len(conds) == 0 {
		return "", nil
	}
	return ` WHERE ` + strings.Join(conds, ` AND `), args
}

// sortOutcomeCounts orders by outcome, then reason, in byte order: the same
// on both drivers whatever the database's collation.
func sortOutcomeCounts(cs []OutcomeCount) {
	slices.SortFunc(cs, func(a, b OutcomeCount) int {
		if c := strings.Compare(string(a.Outcome), string(b.Outcome)); c != 0 {
			return c
		}
		return strings.Compare(a.Reason, b.Reason)
	})
}
