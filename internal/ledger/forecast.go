package ledger

// What a budget period's forecast reads (internal/forecast): how many
// episodes a pipeline's period holds (its cap applies to the rest), and
// how many episodes of a budget period will reserve but have not yet.

import (
	"context"
	"fmt"
	"time"

	"allot"
)

// EpisodeCount counts a pipeline's episodes in one of its periods.
func (l *Ledger) EpisodeCount(ctx context.Context, pipeline, period string) (int, error) {
	var n int
	if err := l.r.QueryRowContext(ctx, l.d.q(`SELECT COUNT(*) FROM episodes WHERE pipeline = ? AND period = ?`), pipeline, period).Scan(&n); err != nil {
		return 0, fmt.Errorf("ledger %s: count the episodes of %s period %s: %w", l.where, pipeline, period, err)
	}
	return n, nil
}

// unreservedQuery counts a pipeline's episodes with nominal times in
// [from, to) that have not settled and hold no paid task. It seeks
// episodes_by_nominal by the time range: "pipeline || ”" keeps both
// planners from the primary key's pipeline prefix, which would read every
// episode of the pipeline.
const unreservedQuery = `SELECT COUNT(*) FROM episodes e
	WHERE e.nominal_time >= ? AND e.nominal_time < ? AND e.pipeline || '' = ?
	AND e.status <> ? AND e.outcome NOT IN (?, ?)
	AND NOT EXISTS (SELECT 1 FROM paid_tasks pt WHERE pt.pipeline = e.pipeline AND pt.episode_id = e.episode_id)`

// UnreservedEpisodes counts the episodes of a pipeline with nominal times
// in [from, to) that have not settled and hold no paid task yet: each
// reserves its covered steps together when it reaches the first.
func (l *Ledger) UnreservedEpisodes(ctx context.Context, pipeline string, from, to time.Time) (int, error) {
	var n int
	if err := l.r.QueryRowContext(ctx, l.d.q(unreservedQuery), l.unreservedArgs(pipeline, from, to)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("ledger %s: count the unreserved episodes of %s: %w", l.where, pipeline, err)
	}
	return n, nil
}

func (l *Ledger) unreservedArgs(pipeline string, from, to time.Time) []any {
	return []any{l.d.timeArg(from), l.d.timeArg(to), pipeline, string(EpisodeCompleted), string(allot.OutcomeCompleted), string(allot.OutcomeRejected)}
}
