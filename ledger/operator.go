package ledger

import (
	"allot"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// OperatorDecision is one operator command on an episode, with its reason.
type OperatorDecision struct {
	RequestID string       `json:"request_id"` // idempotency key of the decision (the Temporal update ID); required
	Pipeline  string       `json:"pipeline"`
	EpisodeID string       `json:"episode_id"`
	Step      string       `json:"step"` // "" for episode-wide decisions (approve, reject, reassemble)
	Revision  int          `json:"revision"`
	Action    allot.Action `json:"action"` // approve | reject | rework | reassemble | adopt | resubmit | abandon
	RemoteRef string       `json:"remote_ref"`
	Reason    string       `json:"reason"`
	At        time.Time    `json:"at"` // zero = now
}

const decisionCols = `request_id, pipeline, episode_id, step, revision, action, remote_ref, reason, decided_at`

// RecordDecision stores an operator's decision, keyed by its RequestID
// within the episode: the first call inserts it and returns (d, true) with
// At filled in; a later call with the same RequestID returns the stored
// decision and false, writing nothing. The episode must exist
// (ErrEpisodeNotFound). An unknown action, or a step action (rework, adopt,
// resubmit, abandon) without a step, or adopt without a remote reference, is
// ErrInvalidInput.
//
// Temporal deduplicates an update ID within one workflow, and an Episode
// workflow is one episode, so the request ID is unique per episode rather
// than across the ledger.
func (l *Ledger) RecordDecision(ctx context.Context, d OperatorDecision) (OperatorDecision, bool, error) {
	if err := episodeRef(d.Pipeline, d.EpisodeID); err != nil {
		return OperatorDecision{}, false, err
	}
	switch {
	case d.RequestID == "":
		return OperatorDecision{}, false, invalid("decision %q on episode %s of %s has no request ID: pass the Temporal update ID", d.Action, d.EpisodeID, d.Pipeline)
	case !slices.Contains(allot.Actions, d.Action):
		return OperatorDecision{}, false, invalid("decision %s on episode %s of %s has unknown action %q: use one of %s",
			d.RequestID, d.EpisodeID, d.Pipeline, d.Action, allot.Actions)
	case d.Step == "" && d.Action.StepAction():
		return OperatorDecision{}, false, invalid("decision %s (%s) on episode %s of %s names no step", d.RequestID, d.Action, d.EpisodeID, d.Pipeline)
	case d.Action == allot.ActionAdopt && d.RemoteRef == "":
		return OperatorDecision{}, false, invalid("decision %s adopts no remote reference for step %q of episode %s of %s", d.RequestID, d.Step, d.EpisodeID, d.Pipeline)
	case d.Revision < 0:
		return OperatorDecision{}, false, invalid("decision %s on episode %s of %s has a negative revision %d", d.RequestID, d.EpisodeID, d.Pipeline, d.Revision)
	}
	if d.At.IsZero() {
		d.At = now()
	}
	d.At = normTime(d.At)
	var (
		out      OperatorDecision
		inserted bool
	)
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		if err := l.lockEpisodeTx(ctx, tx, d.Pipeline, d.EpisodeID); err != nil {
			return err
		}
		if err := l.episodeExists(ctx, tx, d.Pipeline, d.EpisodeID); err != nil {
			return err
		}
		stored, err := l.queryDecisions(ctx, tx, `SELECT `+decisionCols+` FROM operator_decisions
			WHERE pipeline = ? AND episode_id = ? AND request_id = ?`, d.Pipeline, d.EpisodeID, d.RequestID)
		if err != nil {
			return err
		}
		if len(stored) > 0 {
			out = stored[0]
			return nil
		}
		if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO operator_decisions (`+decisionCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			d.RequestID, d.Pipeline, d.EpisodeID, d.Step, d.Revision, d.Action, d.RemoteRef, d.Reason, l.d.timeArg(d.At)); err != nil {
			return fmt.Errorf("ledger %s: record decision %s (%s) on episode %s of %s: %w", l.where, d.RequestID, d.Action, d.EpisodeID, d.Pipeline, err)
		}
		out, inserted = d, true
		return nil
	})
	if err != nil {
		return OperatorDecision{}, false, err
	}
	return out, inserted, nil
}

// Decisions returns an episode's operator decisions in time order (then in
// recording order); ErrEpisodeNotFound if the episode does not exist.
func (l *Ledger) Decisions(ctx context.Context, pipeline, episodeID string) ([]OperatorDecision, error) {
	if err := episodeRef(pipeline, episodeID); err != nil {
		return nil, err
	}
	if err := l.episodeExists(ctx, l.r, pipeline, episodeID); err != nil {
		return nil, err
	}
	return l.queryDecisions(ctx, l.r, `SELECT `+decisionCols+` FROM operator_decisions
		WHERE pipeline = ? AND episode_id = ? ORDER BY decided_at, id`, pipeline, episodeID)
}

func (l *Ledger) queryDecisions(ctx context.Context, db querier, query string, args ...any) ([]OperatorDecision, error) {
	rows, err := db.QueryContext(ctx, l.d.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: query decisions: %w", l.where, err)
	}
	defer rows.Close()
	var out []OperatorDecision
	for rows.Next() {
		var d OperatorDecision
		if err := rows.Scan(&d.RequestID, &d.Pipeline, &d.EpisodeID, &d.Step, &d.Revision, &d.Action,
			&d.RemoteRef, &d.Reason, dbTime{&d.At}); err != nil {
			return nil, fmt.Errorf("ledger %s: read decision: %w", l.where, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read decisions: %w", l.where, err)
	}
	return out, nil
}

// ResetSteps deletes the named local step records of an episode (e.g.
// assemble, approval and publish after a rework) in one transaction, so
// that they run again; steps without a record are fine. ErrEpisodeNotFound
// if the episode does not exist.
func (l *Ledger) ResetSteps(ctx context.Context, pipeline, episodeID string, steps []string) error {
	if err := episodeRef(pipeline, episodeID); err != nil {
		return err
	}
	if slices.Contains(steps, "") {
		return invalid("resetting steps of episode %s of %s: a step name is empty in %q", episodeID, pipeline, steps)
	}
	return l.writeTx(ctx, func(tx *sql.Tx) error {
		if err := l.episodeExists(ctx, tx, pipeline, episodeID); err != nil {
			return err
		}
		for _, step := range steps {
			if _, err := tx.ExecContext(ctx, l.d.q(`DELETE FROM step_records WHERE pipeline = ? AND episode_id = ? AND step = ?`),
				pipeline, episodeID, step); err != nil {
				return fmt.Errorf("ledger %s: reset step %s of episode %s of %s: %w", l.where, step, episodeID, pipeline, err)
			}
		}
		return nil
	})
}
