package ledger

// Step records: the result of each step that is not paid (local, go, exec,
// activity, approval), with its outputs, and the revision a rework or
// reassembly moved it to. Paid and effect steps keep theirs in paid_tasks.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"allot"
)

// StepRecord is one step's result for one episode.
type StepRecord struct {
	Pipeline  string           `json:"pipeline"`
	EpisodeID string           `json:"episode_id"`
	Step      string           `json:"step"`
	Status    allot.StepStatus `json:"status"` // e.g. "completed"; "reset" after a rework or reassembly
	// Revision counts how often the step was reset; its idempotency key
	// is derived from it.
	Revision int    `json:"revision"`
	Artifact string `json:"artifact"` // the first output file, may be ""
	SHA256   string `json:"sha256"`   // its hex sha256, may be ""
	// Outputs are every file the step wrote, with their sha256.
	Outputs []StepOutput `json:"outputs,omitempty"`
	// Result is the step's small JSON result, if it gave one.
	Result      json.RawMessage `json:"result,omitempty"`
	CompletedAt time.Time       `json:"completed_at,omitzero"`
}

// StepOutput is one output file of a step.
type StepOutput struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

const stepCols = `pipeline, episode_id, step, status, revision, artifact, sha256, outputs, result, completed_at`

// RecordStep stores a step's result, replacing an earlier record of the same
// (pipeline, episode, step): re-running a step rewrites, never adds. The
// revision never goes down (a record of an older revision keeps the newer
// one). A zero CompletedAt means now. ErrEpisodeNotFound if the episode
// does not exist.
func (l *Ledger) RecordStep(ctx context.Context, r StepRecord) error {
	if err := episodeRef(r.Pipeline, r.EpisodeID); err != nil {
		return err
	}
	if r.Step == "" || r.Status == "" {
		return invalid("step record for episode %s of %s needs a step name and a status, got step %q and status %q", r.EpisodeID, r.Pipeline, r.Step, r.Status)
	}
	if r.Revision < 0 {
		return invalid("step record %s of episode %s of %s has a negative revision %d", r.Step, r.EpisodeID, r.Pipeline, r.Revision)
	}
	if len(r.Result) > 0 && !json.Valid(r.Result) {
		return invalid("step record %s of episode %s of %s: the result is not JSON", r.Step, r.EpisodeID, r.Pipeline)
	}
	if r.CompletedAt.IsZero() {
		r.CompletedAt = now()
	}
	return l.writeTx(ctx, func(tx *sql.Tx) error {
		// Checked rather than left to the foreign key so that the caller gets
		// ErrEpisodeNotFound, not a driver-specific constraint error.
		if err := l.episodeExists(ctx, tx, r.Pipeline, r.EpisodeID); err != nil {
			return err
		}
		return l.recordStepTx(ctx, tx, r)
	})
}

func (l *Ledger) recordStepTx(ctx context.Context, tx *sql.Tx, r StepRecord) error {
	outputs := ""
	if len(r.Outputs) > 0 {
		data, err := json.Marshal(r.Outputs)
		if err != nil {
			return fmt.Errorf("ledger %s: encode the outputs of step %s: %w", l.where, r.Step, err)
		}
		outputs = string(data)
	}
	if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO step_records (`+stepCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (pipeline, episode_id, step) DO UPDATE SET
			status = excluded.status, artifact = excluded.artifact,
			revision = CASE WHEN excluded.revision > step_records.revision THEN excluded.revision ELSE step_records.revision END,
			sha256 = excluded.sha256, outputs = excluded.outputs, result = excluded.result,
			completed_at = excluded.completed_at`),
		r.Pipeline, r.EpisodeID, r.Step, string(r.Status), r.Revision, r.Artifact, r.SHA256, outputs, string(r.Result),
		l.d.timeArg(r.CompletedAt)); err != nil {
		return fmt.Errorf("ledger %s: record step %s of episode %s of %s: %w", l.where, r.Step, r.EpisodeID, r.Pipeline, err)
	}
	return nil
}

// Steps returns an episode's step records ordered by completion time, then
// step name. ErrEpisodeNotFound if the episode does not exist, so that no
// caller mistakes a missing episode for one with no steps done.
func (l *Ledger) Steps(ctx context.Context, pipeline, episodeID string) ([]StepRecord, error) {
	if err := episodeRef(pipeline, episodeID); err != nil {
		return nil, err
	}
	if err := l.episodeExists(ctx, l.r, pipeline, episodeID); err != nil {
		return nil, err
	}
	rows, err := l.r.QueryContext(ctx, l.d.q(`SELECT `+stepCols+`
		FROM step_records WHERE pipeline = ? AND episode_id = ? ORDER BY completed_at, step`), pipeline, episodeID)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: query steps of episode %s of %s: %w", l.where, episodeID, pipeline, err)
	}
	defer rows.Close()
	var out []StepRecord
	for rows.Next() {
		var (
			s               StepRecord
			status, outputs string
			result          string
		)
		if err := rows.Scan(&s.Pipeline, &s.EpisodeID, &s.Step, &status, &s.Revision, &s.Artifact, &s.SHA256,
			&outputs, &result, dbTime{&s.CompletedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: read step record: %w", l.where, err)
		}
		s.Status = allot.StepStatus(status)
		if outputs != "" {
			if err := json.Unmarshal([]byte(outputs), &s.Outputs); err != nil {
				return nil, fmt.Errorf("ledger %s: step %s of episode %s of %s has outputs that are not JSON: %w", l.where, s.Step, episodeID, pipeline, err)
			}
		}
		if result != "" {
			s.Result = json.RawMessage(result)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read step records: %w", l.where, err)
	}
	return out, nil
}

// resetStepsTx reopens the named steps of an episode: each record moves to
// status reset with the next revision (a step never run gets revision 1),
// its outputs forgotten, so that the step runs again under a new
// idempotency key.
func (l *Ledger) resetStepsTx(ctx context.Context, tx *sql.Tx, pipeline, episodeID string, steps []string) error {
	at := l.d.timeArg(now())
	for _, step := range steps {
		if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO step_records (`+stepCols+`)
			VALUES (?, ?, ?, ?, 1, '', '', '', '', ?)
			ON CONFLICT (pipeline, episode_id, step) DO UPDATE SET
				status = excluded.status, revision = step_records.revision + 1, artifact = '', sha256 = '',
				outputs = '', result = '', completed_at = excluded.completed_at`),
			pipeline, episodeID, step, string(allot.StepReset), at); err != nil {
			return fmt.Errorf("ledger %s: reset step %s of episode %s of %s: %w", l.where, step, episodeID, pipeline, err)
		}
	}
	return nil
}
