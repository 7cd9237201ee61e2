package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"allot"
)

// Episode returns one episode; ErrEpisodeNotFound if the pipeline has no
// episode with that ID.
func (l *Ledger) Episode(ctx context.Context, pipeline, episodeID string) (Episode, error) {
	if err := episodeRef(pipeline, episodeID); err != nil {
		return Episode{}, err
	}
	eps, err := l.queryEpisodes(ctx, l.r,
		`SELECT `+episodeCols+` FROM episodes WHERE pipeline = ? AND episode_id = ?`, pipeline, episodeID)
	if err != nil {
		return Episode{}, err
	}
	if len(eps) == 0 {
		return Episode{}, notFound(pipeline, episodeID)
	}
	return eps[0], nil
}

// EpisodeByKey returns the episode an allocation key is bound to;
// ErrEpisodeNotFound if none, ErrKeyAmbiguous if several.
func (l *Ledger) EpisodeByKey(ctx context.Context, pipeline, key string) (Episode, error) {
	if pipeline == "" || key == "" {
		return Episode{}, invalid("look-up by key needs a pipeline and a key, got pipeline %q and key %q", pipeline, key)
	}
	eps, err := l.queryEpisodes(ctx, l.r,
		`SELECT `+episodeCols+` FROM episodes WHERE pipeline = ? AND allocation_key = ? LIMIT 2`, pipeline, key)
	if err != nil {
		return Episode{}, err
	}
	switch len(eps) {
	case 0:
		return Episode{}, fmt.Errorf("%w: pipeline %q has no episode bound to key %q: the run has not allocated yet, or the key is misspelt",
			ErrEpisodeNotFound, pipeline, key)
	case 1:
		return eps[0], nil
	}
	return Episode{}, ambiguous(pipeline, key, eps)
}

// ListEpisodes returns a pipeline's episodes in one period, or in all
// periods when period is "", ordered by period then sequence.
func (l *Ledger) ListEpisodes(ctx context.Context, pipeline, period string) ([]Episode, error) {
	if pipeline == "" {
		return nil, invalid("listing episodes needs a pipeline")
	}
	if period == "" {
		return l.queryEpisodes(ctx, l.r,
			`SELECT `+episodeCols+` FROM episodes WHERE pipeline = ? ORDER BY period, sequence`, pipeline)
	}
	return l.queryEpisodes(ctx, l.r,
		`SELECT `+episodeCols+` FROM episodes WHERE pipeline = ? AND period = ? ORDER BY period, sequence`, pipeline, period)
}

// CompleteEpisode marks the episode completed. It is idempotent: the first
// completion time is kept, so a retried activity cannot move it. A zero at
// means now.
func (l *Ledger) CompleteEpisode(ctx context.Context, pipeline, episodeID string, at time.Time) (Episode, error) {
	if err := episodeRef(pipeline, episodeID); err != nil {
		return Episode{}, err
	}
	if at.IsZero() {
		at = now()
	}
	var ep Episode
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, l.d.q(`UPDATE episodes
			SET status = ?, completed_at = COALESCE(completed_at, ?)
			WHERE pipeline = ? AND episode_id = ?`),
			string(EpisodeCompleted), l.d.timeArg(at), pipeline, episodeID)
		if err != nil {
			return fmt.Errorf("ledger %s: complete episode %s of %s: %w", l.where, episodeID, pipeline, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("ledger %s: complete episode %s of %s: %w", l.where, episodeID, pipeline, err)
		} else if n == 0 {
			return notFound(pipeline, episodeID)
		}
		eps, err := l.queryEpisodes(ctx, tx,
			`SELECT `+episodeCols+` FROM episodes WHERE pipeline = ? AND episode_id = ?`, pipeline, episodeID)
		if err != nil {
			return err
		}
		if len(eps) == 0 {
			return notFound(pipeline, episodeID)
		}
		ep = eps[0]
		// A completed episode sends nothing more: a reservation a task of
		// it still holds without being sent goes back to its budgets.
		if err := l.releaseUnsentOfEpisodeTx(ctx, tx, pipeline, episodeID); err != nil {
			return err
		}
		// A period recorded late that now has its episodes records when
		// (docs/design.md, "Period deadlines").
		return l.recordCompletedLateTx(ctx, tx, pipeline, ep.Period, ep.CompletedAt)
	})
	return ep, err
}

// RunOutcome is how one ScheduledRun ended (invariant 10).
type RunOutcome struct {
	Pipeline          string                  `json:"pipeline"`
	AllocationKey     string                  `json:"allocation_key"`
	RunID             string                  `json:"run_id"`
	NominalTime       time.Time               `json:"nominal_time"`
	NominalTimeSource allot.NominalTimeSource `json:"nominal_time_source"`
	Outcome           allot.Outcome           `json:"outcome"` // allocated | reused | skipped | failed
	Reason            string                  `json:"reason"`
	EpisodeID         string                  `json:"episode_id"` // "" when none
	Period            string                  `json:"period"`
	Sequence          int                     `json:"sequence"` // -1 when none
	RecordedAt        time.Time               `json:"recorded_at"`
}

// RecordRunOutcome stores a run's outcome, replacing an earlier record for
// the same (pipeline, allocation key, run ID), so that a retried activity
// does not count a run twice. It reports whether the run is new to the
// ledger (true: this call inserted its record; false: it replaced an earlier
// attempt's), so that counters count each run once whatever the attempts.
// A zero RecordedAt means now.
func (l *Ledger) RecordRunOutcome(ctx context.Context, o RunOutcome) (bool, error) {
	if o.Pipeline == "" || o.AllocationKey == "" || o.RunID == "" || o.Outcome == "" {
		return false, invalid("run outcome needs a pipeline, an allocation key, a run ID and an outcome, got %q, %q, %q and %q",
			o.Pipeline, o.AllocationKey, o.RunID, o.Outcome)
	}
	if o.RecordedAt.IsZero() {
		o.RecordedAt = now()
	}
	inserted := false
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		// Insert, or else replace: one statement decides which, so of two
		// attempts racing on one run exactly one reports the insert.
		res, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO run_outcomes
			(pipeline, allocation_key, run_id, nominal_time, nominal_time_source, outcome, reason, episode_id, period, sequence, recorded_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (pipeline, allocation_key, run_id) DO NOTHING`),
			o.Pipeline, o.AllocationKey, o.RunID, l.d.timeArg(o.NominalTime), o.NominalTimeSource,
			o.Outcome, o.Reason, o.EpisodeID, o.Period, o.Sequence, l.d.timeArg(o.RecordedAt))
		if err != nil {
			return fmt.Errorf("ledger %s: record outcome of run %s (key %q) of %s: %w", l.where, o.RunID, o.AllocationKey, o.Pipeline, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("ledger %s: record outcome of run %s (key %q) of %s: %w", l.where, o.RunID, o.AllocationKey, o.Pipeline, err)
		}
		if n > 0 {
			inserted = true
			return nil
		}
		if _, err := tx.ExecContext(ctx, l.d.q(`UPDATE run_outcomes SET
				nominal_time = ?, nominal_time_source = ?, outcome = ?, reason = ?, episode_id = ?,
				period = ?, sequence = ?, recorded_at = ?
			WHERE pipeline = ? AND allocation_key = ? AND run_id = ?`),
			l.d.timeArg(o.NominalTime), o.NominalTimeSource, o.Outcome, o.Reason, o.EpisodeID,
			o.Period, o.Sequence, l.d.timeArg(o.RecordedAt), o.Pipeline, o.AllocationKey, o.RunID); err != nil {
			return fmt.Errorf("ledger %s: record outcome of run %s (key %q) of %s: %w", l.where, o.RunID, o.AllocationKey, o.Pipeline, err)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return inserted, nil
}

// RunOutcomes returns the outcomes recorded at or after since (zero: all),
// ordered by RecordedAt. pipeline "" means every pipeline.
func (l *Ledger) RunOutcomes(ctx context.Context, pipeline string, since time.Time) ([]RunOutcome, error) {
	query := `SELECT pipeline, allocation_key, run_id, nominal_time, nominal_time_source, outcome, reason,
		episode_id, period, sequence, recorded_at FROM run_outcomes WHERE 1 = 1`
	var args []any
	if pipeline != "" {
		query += ` AND pipeline = ?`
		args = append(args, pipeline)
	}
	if !since.IsZero() {
		query += ` AND recorded_at >= ?`
		args = append(args, l.d.timeArg(since))
	}
	query += ` ORDER BY recorded_at, pipeline, allocation_key, run_id`
	return l.queryRunOutcomes(ctx, query, args...)
}

// RunOutcomesOfPeriod returns the outcomes of the runs of one period of a
// pipeline, ordered by RecordedAt.
func (l *Ledger) RunOutcomesOfPeriod(ctx context.Context, pipeline, period string) ([]RunOutcome, error) {
	return l.queryRunOutcomes(ctx, `SELECT pipeline, allocation_key, run_id, nominal_time, nominal_time_source, outcome, reason,
		episode_id, period, sequence, recorded_at FROM run_outcomes WHERE pipeline = ? AND period = ?
		ORDER BY recorded_at, allocation_key, run_id`, pipeline, period)
}

func (l *Ledger) queryRunOutcomes(ctx context.Context, query string, args ...any) ([]RunOutcome, error) {
	rows, err := l.r.QueryContext(ctx, l.d.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: query run outcomes: %w", l.where, err)
	}
	defer rows.Close()
	var out []RunOutcome
	for rows.Next() {
		var o RunOutcome
		if err := rows.Scan(&o.Pipeline, &o.AllocationKey, &o.RunID, dbTime{&o.NominalTime}, &o.NominalTimeSource,
			&o.Outcome, &o.Reason, &o.EpisodeID, &o.Period, &o.Sequence, dbTime{&o.RecordedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: read run outcome: %w", l.where, err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read run outcomes: %w", l.where, err)
	}
	return out, nil
}

// episodeRef validates a (pipeline, episode ID) pair. An empty ID is "not
// found" rather than invalid: paid work without an explicit episode must
// fail as EpisodeNotFound (invariant 6).
func episodeRef(pipeline, episodeID string) error {
	if pipeline == "" {
		return invalid("episode %q names no pipeline", episodeID)
	}
	if episodeID == "" {
		return fmt.Errorf("%w: no episode ID given for pipeline %q: name an existing episode explicitly", ErrEpisodeNotFound, pipeline)
	}
	return nil
}

func (l *Ledger) episodeExists(ctx context.Context, db queryer, pipeline, episodeID string) error {
	var one int
	err := db.QueryRowContext(ctx, l.d.q(`SELECT 1 FROM episodes WHERE pipeline = ? AND episode_id = ?`), pipeline, episodeID).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return notFound(pipeline, episodeID)
	case err != nil:
		return fmt.Errorf("ledger %s: look up episode %s of %s: %w", l.where, episodeID, pipeline, err)
	}
	return nil
}

// EpisodePlan returns the step plan pinned for an episode (JSON, as the
// caller wrote it), or "" if none is pinned yet. ErrEpisodeNotFound if the
// episode does not exist.
func (l *Ledger) EpisodePlan(ctx context.Context, pipeline, episodeID string) (string, error) {
	if err := episodeRef(pipeline, episodeID); err != nil {
		return "", err
	}
	var plan string
	err := l.r.QueryRowContext(ctx, l.d.q(`SELECT plan FROM episodes WHERE pipeline = ? AND episode_id = ?`), pipeline, episodeID).Scan(&plan)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", notFound(pipeline, episodeID)
	case err != nil:
		return "", fmt.Errorf("ledger %s: read the plan of episode %s of %s: %w", l.where, episodeID, pipeline, err)
	}
	return plan, nil
}

// PinPlan pins plan as the episode's step plan unless one is pinned
// already, and returns the pinned plan (invariant 14: an episode runs the
// plan it was allocated with, whatever the pipeline says later). An empty
// plan is ErrInvalidInput.
func (l *Ledger) PinPlan(ctx context.Context, pipeline, episodeID, plan string) (string, error) {
	if err := episodeRef(pipeline, episodeID); err != nil {
		return "", err
	}
	if plan == "" {
		return "", invalid("pinning the plan of episode %s of %s: the plan is empty", episodeID, pipeline)
	}
	var pinned string
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, l.d.q(`UPDATE episodes SET plan = ? WHERE pipeline = ? AND episode_id = ? AND plan = ''`),
			plan, pipeline, episodeID); err != nil {
			return fmt.Errorf("ledger %s: pin the plan of episode %s of %s: %w", l.where, episodeID, pipeline, err)
		}
		err := tx.QueryRowContext(ctx, l.d.q(`SELECT plan FROM episodes WHERE pipeline = ? AND episode_id = ?`), pipeline, episodeID).Scan(&pinned)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return notFound(pipeline, episodeID)
		case err != nil:
			return fmt.Errorf("ledger %s: read the plan of episode %s of %s: %w", l.where, episodeID, pipeline, err)
		}
		return nil
	})
	return pinned, err
}
