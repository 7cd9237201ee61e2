package ledger

// Paid tasks (invariant 7) and cost entries (invariant 8).
//
// A paid task is one vendor submission of (episode, step, revision). Its
// life:
//
//	planned -> intent -> submitted -> succeeded
//	                  \            \-> failed
//	                   \-> abandoned            (operator, outcome unknown)
//	           intent -> planned                (operator resubmits)
//
// The intent is written before the vendor is called and the remote reference
// before the task may be retried or completed, each in its own committed
// transaction. A retry calls WriteIntent again and gets back whatever was
// written, so it resumes from the reference instead of submitting twice. An
// intent without a reference means "outcome unknown": only an operator moves
// it on (ResetIntent or Abandon, or RecordSubmission with an adopted
// reference).

import (
	"allot"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// PaidTaskRef names one paid task.
type PaidTaskRef struct {
	Pipeline  string `json:"pipeline"`
	EpisodeID string `json:"episode_id"`
	Step      string `json:"step"`
	Revision  int    `json:"revision"` // 0 for the first submission of a step
}

// PaidTask is one paid task as stored.
type PaidTask struct {
	PaidTaskRef
	IdempotencyKey string              `json:"idempotency_key"`
	State          allot.PaidTaskState `json:"state"`
	RemoteRef      string              `json:"remote_ref"`
	Artifact       string              `json:"artifact"`
	SHA256         string              `json:"sha256"`
	Error          string              `json:"error"`
	RequestID      string              `json:"request_id"` // the operator request (Temporal update ID) that planned this revision, if any
	CreatedAt      time.Time           `json:"created_at"`
	UpdatedAt      time.Time           `json:"updated_at"`
}

// Submission is what the vendor said when it accepted a paid task.
type Submission struct {
	PaidTaskRef
	RemoteRef string
	Amount    int64 // minor units
	Currency  string
}

// CostEntry is the cost of one accepted paid task, keyed by its remote
// reference and holding an absolute amount.
type CostEntry struct {
	RemoteRef  string    `json:"remote_ref"`
	Pipeline   string    `json:"pipeline"`
	EpisodeID  string    `json:"episode_id"`
	Period     string    `json:"period"` // filled on read from the episode
	Step       string    `json:"step"`
	Revision   int       `json:"revision"`
	Amount     int64     `json:"amount"`
	Currency   string    `json:"currency"`
	RecordedAt time.Time `json:"recorded_at"`
}

const paidTaskCols = `pipeline, episode_id, step, revision, idempotency_key, state, remote_ref, artifact, sha256, error, request_id, created_at, updated_at`

// describe names a task in messages: "weekly/2026-W32-0 step render revision 0".
func describe(r PaidTaskRef) string {
	return fmt.Sprintf("paid task %s/%s step %q revision %d", r.Pipeline, r.EpisodeID, r.Step, r.Revision)
}

// checkPaidRef validates a task reference. As for episodes, an empty episode
// ID is "not found" (invariant 6), not merely invalid.
func checkPaidRef(r PaidTaskRef) error {
	if err := episodeRef(r.Pipeline, r.EpisodeID); err != nil {
		return err
	}
	switch {
	case r.Step == "":
		return invalid("paid task of episode %s of %s names no step", r.EpisodeID, r.Pipeline)
	case r.Revision < 0:
		return invalid("%s: the revision must be 0 or more", describe(r))
	}
	return nil
}

func paidNotFound(r PaidTaskRef) error {
	return fmt.Errorf("%w: %s has not been written: its intent is written by the paid step before the vendor is called (WriteIntent), a rework plans it (PlanRevision)",
		ErrPaidTaskNotFound, describe(r))
}

// stateErr says that t's state does not allow op, which needs one of allowed.
func stateErr(t PaidTask, op string, allowed []string, hint string) error {
	cur := string(t.State)
	if t.State == allot.PaidIntent && t.RemoteRef == "" {
		cur += " without a remote reference (outcome unknown)"
	}
	msg := fmt.Sprintf("%s is %s; %s needs it to be %s", describe(t.PaidTaskRef), cur, op, orList(allowed))
	if hint != "" {
		msg += ": " + hint
	}
	return fmt.Errorf("%w: %s", ErrPaidTaskState, msg)
}

// states lists state names for stateErr.
func states(ss ...allot.PaidTaskState) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// unknownOutcome is how stateErr names the state an operator settles.
const unknownOutcome = "intent without a remote reference"

func orList(xs []string) string {
	switch len(xs) {
	case 0:
		return "(none)"
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

func refConflict(t PaidTask, given string) error {
	return fmt.Errorf("%w: %s has remote reference %q, not %q: a paid task has exactly one submission; nothing was written",
		ErrRemoteRefConflict, describe(t.PaidTaskRef), t.RemoteRef, given)
}

// lockEpisodeTx takes the episode's lock where BEGIN did not (PostgreSQL).
func (l *Ledger) lockEpisodeTx(ctx context.Context, tx *sql.Tx, pipeline, episodeID string) error {
	if l.d.lockEpisode == "" {
		return nil
	}
	if _, err := tx.ExecContext(ctx, l.d.q(l.d.lockEpisode), episodeLockKey(pipeline, episodeID)); err != nil {
		return fmt.Errorf("ledger %s: lock episode %s of %s: %w", l.where, episodeID, pipeline, err)
	}
	return nil
}

// queryPaidTasks runs a shared query selecting paidTaskCols.
func (l *Ledger) queryPaidTasks(ctx context.Context, db querier, query string, args ...any) ([]PaidTask, error) {
	rows, err := db.QueryContext(ctx, l.d.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: query paid tasks: %w", l.where, err)
	}
	defer rows.Close()
	var out []PaidTask
	for rows.Next() {
		var (
			t     PaidTask
			state string
		)
		if err := rows.Scan(&t.Pipeline, &t.EpisodeID, &t.Step, &t.Revision, &t.IdempotencyKey, &state, &t.RemoteRef,
			&t.Artifact, &t.SHA256, &t.Error, &t.RequestID, dbTime{&t.CreatedAt}, dbTime{&t.UpdatedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: read paid task: %w", l.where, err)
		}
		t.State = allot.PaidTaskState(state)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read paid tasks: %w", l.where, err)
	}
	return out, nil
}

// getPaidTask reads one task; ok is false if it does not exist.
func (l *Ledger) getPaidTask(ctx context.Context, db querier, r PaidTaskRef) (t PaidTask, ok bool, err error) {
	ts, err := l.queryPaidTasks(ctx, db, `SELECT `+paidTaskCols+` FROM paid_tasks
		WHERE pipeline = ? AND episode_id = ? AND step = ? AND revision = ?`, r.Pipeline, r.EpisodeID, r.Step, r.Revision)
	if err != nil || len(ts) == 0 {
		return PaidTask{}, false, err
	}
	return ts[0], true, nil
}

// mustGetPaidTask reads one task in a write transaction, under the
// episode's lock; ErrPaidTaskNotFound if it does not exist.
func (l *Ledger) mustGetPaidTask(ctx context.Context, tx *sql.Tx, r PaidTaskRef) (PaidTask, error) {
	if err := l.lockEpisodeTx(ctx, tx, r.Pipeline, r.EpisodeID); err != nil {
		return PaidTask{}, err
	}
	t, ok, err := l.getPaidTask(ctx, tx, r)
	if err != nil {
		return PaidTask{}, err
	}
	if !ok {
		return PaidTask{}, paidNotFound(r)
	}
	return t, nil
}

func (l *Ledger) insertPaidTask(ctx context.Context, tx *sql.Tx, t PaidTask) error {
	if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO paid_tasks (`+paidTaskCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		t.Pipeline, t.EpisodeID, t.Step, t.Revision, t.IdempotencyKey, string(t.State), t.RemoteRef,
		t.Artifact, t.SHA256, t.Error, t.RequestID, l.d.timeArg(t.CreatedAt), l.d.timeArg(t.UpdatedAt)); err != nil {
		return fmt.Errorf("ledger %s: insert %s: %w", l.where, describe(t.PaidTaskRef), err)
	}
	return nil
}

// savePaidTask writes t's mutable columns back, stamping UpdatedAt.
func (l *Ledger) savePaidTask(ctx context.Context, tx *sql.Tx, t *PaidTask) error {
	t.UpdatedAt = now()
	if _, err := tx.ExecContext(ctx, l.d.q(`UPDATE paid_tasks SET
			idempotency_key = ?, state = ?, remote_ref = ?, artifact = ?, sha256 = ?, error = ?, updated_at = ?
		WHERE pipeline = ? AND episode_id = ? AND step = ? AND revision = ?`),
		t.IdempotencyKey, string(t.State), t.RemoteRef, t.Artifact, t.SHA256, t.Error, l.d.timeArg(t.UpdatedAt),
		t.Pipeline, t.EpisodeID, t.Step, t.Revision); err != nil {
		return fmt.Errorf("ledger %s: update %s: %w", l.where, describe(t.PaidTaskRef), err)
	}
	return nil
}

// PaidTask returns one paid task; ErrPaidTaskNotFound if it was never written.
func (l *Ledger) PaidTask(ctx context.Context, ref PaidTaskRef) (PaidTask, error) {
	if err := checkPaidRef(ref); err != nil {
		return PaidTask{}, err
	}
	t, ok, err := l.getPaidTask(ctx, l.r, ref)
	if err != nil {
		return PaidTask{}, err
	}
	if !ok {
		return PaidTask{}, paidNotFound(ref)
	}
	return t, nil
}

// LatestPaidTask returns the highest revision of a step's paid task;
// ErrPaidTaskNotFound if the step has none.
func (l *Ledger) LatestPaidTask(ctx context.Context, pipeline, episodeID, step string) (PaidTask, error) {
	ref := PaidTaskRef{Pipeline: pipeline, EpisodeID: episodeID, Step: step}
	if err := checkPaidRef(ref); err != nil {
		return PaidTask{}, err
	}
	t, ok, err := l.latestPaidTask(ctx, l.r, pipeline, episodeID, step)
	if err != nil {
		return PaidTask{}, err
	}
	if !ok {
		return PaidTask{}, fmt.Errorf("%w: episode %s of %s has no paid task for step %q yet", ErrPaidTaskNotFound, episodeID, pipeline, step)
	}
	return t, nil
}

func (l *Ledger) latestPaidTask(ctx context.Context, db querier, pipeline, episodeID, step string) (PaidTask, bool, error) {
	ts, err := l.queryPaidTasks(ctx, db, `SELECT `+paidTaskCols+` FROM paid_tasks
		WHERE pipeline = ? AND episode_id = ? AND step = ? ORDER BY revision DESC LIMIT 1`, pipeline, episodeID, step)
	if err != nil || len(ts) == 0 {
		return PaidTask{}, false, err
	}
	return ts[0], true, nil
}

// PaidTasks returns an episode's paid tasks ordered by step, then revision;
// ErrEpisodeNotFound if the episode does not exist.
func (l *Ledger) PaidTasks(ctx context.Context, pipeline, episodeID string) ([]PaidTask, error) {
	if err := episodeRef(pipeline, episodeID); err != nil {
		return nil, err
	}
	if err := l.episodeExists(ctx, l.r, pipeline, episodeID); err != nil {
		return nil, err
	}
	return l.queryPaidTasks(ctx, l.r, `SELECT `+paidTaskCols+` FROM paid_tasks
		WHERE pipeline = ? AND episode_id = ? ORDER BY step, revision`, pipeline, episodeID)
}

// WriteIntent records, before the vendor is called, that the task is about
// to be submitted with idempotencyKey. In one transaction: the episode must
// exist (ErrEpisodeNotFound, nothing written); a new task is inserted in
// state intent; a planned one moves to intent; a task in any other state is
// returned unchanged, so that a retry sees the intent, reference or result
// already written and resumes from it. A task whose stored key differs from
// idempotencyKey is refused with ErrInvalidInput: a key never changes. The
// task is returned as it is after the call.
func (l *Ledger) WriteIntent(ctx context.Context, ref PaidTaskRef, idempotencyKey string) (PaidTask, error) {
	if err := checkPaidRef(ref); err != nil {
		return PaidTask{}, err
	}
	if idempotencyKey == "" {
		return PaidTask{}, invalid("%s: the intent needs the vendor idempotency key", describe(ref))
	}
	var out PaidTask
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		if err := l.lockEpisodeTx(ctx, tx, ref.Pipeline, ref.EpisodeID); err != nil {
			return err
		}
		if err := l.episodeExists(ctx, tx, ref.Pipeline, ref.EpisodeID); err != nil {
			return err
		}
		t, ok, err := l.getPaidTask(ctx, tx, ref)
		if err != nil {
			return err
		}
		if ok && t.IdempotencyKey != "" && t.IdempotencyKey != idempotencyKey {
			return invalid("%s has idempotency key %q, not %q: a task's key never changes (it is derived from pipeline, episode, step and revision); check the caller's key derivation",
				describe(ref), t.IdempotencyKey, idempotencyKey)
		}
		if ok && t.State != allot.PaidPlanned {
			out = t
			return nil
		}
		// The unique index backs this; checked to say which task has it.
		others, err := l.queryPaidTasks(ctx, tx, `SELECT `+paidTaskCols+` FROM paid_tasks
			WHERE idempotency_key = ? AND idempotency_key <> ''`, idempotencyKey)
		if err != nil {
			return err
		}
		for _, o := range others {
			if o.PaidTaskRef != ref {
				return invalid("idempotency key %q is already used by %s, so it cannot be %s's: the vendor would take them for one task",
					idempotencyKey, describe(o.PaidTaskRef), describe(ref))
			}
		}
		if !ok {
			at := now()
			t = PaidTask{PaidTaskRef: ref, IdempotencyKey: idempotencyKey, State: allot.PaidIntent, CreatedAt: at, UpdatedAt: at}
			if err := l.insertPaidTask(ctx, tx, t); err != nil {
				return err
			}
			out = t
			return nil
		}
		t.IdempotencyKey, t.State = idempotencyKey, allot.PaidIntent
		if err := l.savePaidTask(ctx, tx, &t); err != nil {
			return err
		}
		out = t
		return nil
	})
	if err != nil {
		return PaidTask{}, err
	}
	return out, nil
}

// RecordSubmission writes the remote reference the vendor gave the task and,
// in the same transaction, its cost entry. The task must exist
// (ErrPaidTaskNotFound) in state intent, submitted, succeeded or failed
// (else ErrPaidTaskState); a task with another remote reference, or a
// reference that belongs to another task, is refused with
// ErrRemoteRefConflict and nothing is written. intent moves to submitted;
// later states stay. The cost entry is keyed by the remote reference and
// holds the absolute amount (upsert), so recording twice changes no total
// and a corrected amount replaces the old one.
func (l *Ledger) RecordSubmission(ctx context.Context, s Submission) (PaidTask, error) {
	if err := checkPaidRef(s.PaidTaskRef); err != nil {
		return PaidTask{}, err
	}
	switch {
	case s.RemoteRef == "":
		return PaidTask{}, invalid("%s: a submission needs the vendor's remote reference", describe(s.PaidTaskRef))
	case s.Currency == "":
		return PaidTask{}, invalid("%s: the cost of submission %q needs a currency", describe(s.PaidTaskRef), s.RemoteRef)
	case s.Amount < 0:
		return PaidTask{}, invalid("%s: the cost of submission %q is negative (%d): amounts are absolute, in minor units", describe(s.PaidTaskRef), s.RemoteRef, s.Amount)
	}
	var out PaidTask
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		t, err := l.mustGetPaidTask(ctx, tx, s.PaidTaskRef)
		if err != nil {
			return err
		}
		switch t.State {
		case allot.PaidIntent, allot.PaidSubmitted, allot.PaidSucceeded, allot.PaidFailed:
		default:
			return stateErr(t, "recording a submission", states(allot.PaidIntent, allot.PaidSubmitted, allot.PaidSucceeded, allot.PaidFailed),
				"the intent must be written (WriteIntent) before the vendor is called")
		}
		if t.RemoteRef != "" && t.RemoteRef != s.RemoteRef {
			return refConflict(t, s.RemoteRef)
		}
		others, err := l.queryPaidTasks(ctx, tx, `SELECT `+paidTaskCols+` FROM paid_tasks
			WHERE remote_ref = ? AND remote_ref <> ''`, s.RemoteRef)
		if err != nil {
			return err
		}
		for _, o := range others {
			if o.PaidTaskRef != s.PaidTaskRef {
				return fmt.Errorf("%w: remote reference %q already belongs to %s, so it cannot be %s's; nothing was written",
					ErrRemoteRefConflict, s.RemoteRef, describe(o.PaidTaskRef), describe(s.PaidTaskRef))
			}
		}
		var owner PaidTaskRef
		err = tx.QueryRowContext(ctx, l.d.q(`SELECT pipeline, episode_id, step, revision FROM cost_entries WHERE remote_ref = ?`), s.RemoteRef).
			Scan(&owner.Pipeline, &owner.EpisodeID, &owner.Step, &owner.Revision)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("ledger %s: read cost entry %q: %w", l.where, s.RemoteRef, err)
		case owner != s.PaidTaskRef:
			return fmt.Errorf("%w: the cost entry for remote reference %q is booked to %s, not %s; nothing was written (ledger Check reports it)",
				ErrRemoteRefConflict, s.RemoteRef, describe(owner), describe(s.PaidTaskRef))
		}

		if t.RemoteRef != s.RemoteRef || t.State == allot.PaidIntent {
			t.RemoteRef = s.RemoteRef
			if t.State == allot.PaidIntent {
				t.State = allot.PaidSubmitted
			}
			if err := l.savePaidTask(ctx, tx, &t); err != nil {
				return err
			}
		}
		// Absolute, never incremented: the same call twice leaves the same
		// row; the time moves only when the amount does.
		if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO cost_entries
			(remote_ref, pipeline, episode_id, step, revision, amount, currency, recorded_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (remote_ref) DO UPDATE SET
				amount = excluded.amount, currency = excluded.currency,
				recorded_at = CASE WHEN cost_entries.amount = excluded.amount AND cost_entries.currency = excluded.currency
					THEN cost_entries.recorded_at ELSE excluded.recorded_at END`),
			s.RemoteRef, s.Pipeline, s.EpisodeID, s.Step, s.Revision, s.Amount, s.Currency, l.d.timeArg(now())); err != nil {
			return fmt.Errorf("ledger %s: record cost of %s (remote reference %q): %w", l.where, describe(s.PaidTaskRef), s.RemoteRef, err)
		}
		out = t
		return nil
	})
	if err != nil {
		return PaidTask{}, err
	}
	return out, nil
}

// RecordPaidResult marks the task succeeded with its downloaded, verified
// artifact. The task must be submitted or succeeded (ErrPaidTaskState) with
// remoteRef (ErrRemoteRefConflict). Recording the same result again is a
// no-op; a succeeded task is never given another result (ErrPaidTaskState).
func (l *Ledger) RecordPaidResult(ctx context.Context, ref PaidTaskRef, remoteRef, artifact, sha256 string) (PaidTask, error) {
	if err := checkPaidRef(ref); err != nil {
		return PaidTask{}, err
	}
	if remoteRef == "" || artifact == "" || sha256 == "" {
		return PaidTask{}, invalid("%s: a result needs the remote reference, the artifact and its SHA-256, got %q, %q and %q",
			describe(ref), remoteRef, artifact, sha256)
	}
	var out PaidTask
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		t, err := l.mustGetPaidTask(ctx, tx, ref)
		if err != nil {
			return err
		}
		if t.State != allot.PaidSubmitted && t.State != allot.PaidSucceeded {
			return stateErr(t, "recording a result", states(allot.PaidSubmitted, allot.PaidSucceeded),
				"the remote reference must be written (RecordSubmission) before the task completes")
		}
		if t.RemoteRef != remoteRef {
			return refConflict(t, remoteRef)
		}
		if t.State == allot.PaidSucceeded {
			if t.SHA256 == sha256 && t.Artifact == artifact {
				out = t
				return nil
			}
			return fmt.Errorf("%w: %s already succeeded with artifact %s (sha256 %s); refusing %s (sha256 %s): a verified result is never overwritten, rework the step for a new revision",
				ErrPaidTaskState, describe(ref), t.Artifact, t.SHA256, artifact, sha256)
		}
		t.State, t.Artifact, t.SHA256 = allot.PaidSucceeded, artifact, sha256
		if err := l.savePaidTask(ctx, tx, &t); err != nil {
			return err
		}
		out = t
		return nil
	})
	if err != nil {
		return PaidTask{}, err
	}
	return out, nil
}

// RecordPaidFailure marks a submitted task failed with the vendor's reason.
// The task must be submitted (or already failed: then it is returned
// unchanged, keeping the first reason) with remoteRef.
func (l *Ledger) RecordPaidFailure(ctx context.Context, ref PaidTaskRef, remoteRef, reason string) (PaidTask, error) {
	if err := checkPaidRef(ref); err != nil {
		return PaidTask{}, err
	}
	if remoteRef == "" || reason == "" {
		return PaidTask{}, invalid("%s: a failure needs the remote reference and a reason, got %q and %q", describe(ref), remoteRef, reason)
	}
	var out PaidTask
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		t, err := l.mustGetPaidTask(ctx, tx, ref)
		if err != nil {
			return err
		}
		if t.State != allot.PaidSubmitted && t.State != allot.PaidFailed {
			return stateErr(t, "recording a failure", states(allot.PaidSubmitted, allot.PaidFailed), "")
		}
		if t.RemoteRef != remoteRef {
			return refConflict(t, remoteRef)
		}
		if t.State == allot.PaidFailed {
			out = t
			return nil
		}
		t.State, t.Error = allot.PaidFailed, reason
		if err := l.savePaidTask(ctx, tx, &t); err != nil {
			return err
		}
		out = t
		return nil
	})
	if err != nil {
		return PaidTask{}, err
	}
	return out, nil
}

// PlanRevision plans a new revision of a paid step for a rework: a new
// revision has a new idempotency key and will be charged once more. In one
// transaction, after checking the episode exists: a revision already planned
// by requestID is returned (activity retries); otherwise revision latest+1
// (0 if none) is inserted in state planned. While the latest revision's
// outcome is unknown (intent) or it is still running (submitted) nothing is
// written and ErrPaidTaskState is returned (the same holds for any older
// revision in either state).
func (l *Ledger) PlanRevision(ctx context.Context, pipeline, episodeID, step, requestID string) (PaidTask, error) {
	if err := checkPaidRef(PaidTaskRef{Pipeline: pipeline, EpisodeID: episodeID, Step: step}); err != nil {
		return PaidTask{}, err
	}
	if requestID == "" {
		return PaidTask{}, invalid("planning a revision of step %q of episode %s of %s needs the operator request ID", step, episodeID, pipeline)
	}
	var out PaidTask
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		if err := l.lockEpisodeTx(ctx, tx, pipeline, episodeID); err != nil {
			return err
		}
		if err := l.episodeExists(ctx, tx, pipeline, episodeID); err != nil {
			return err
		}
		done, err := l.queryPaidTasks(ctx, tx, `SELECT `+paidTaskCols+` FROM paid_tasks
			WHERE pipeline = ? AND episode_id = ? AND step = ? AND request_id = ? AND request_id <> ''`, pipeline, episodeID, step, requestID)
		if err != nil {
			return err
		}
		if len(done) > 0 {
			out = done[0]
			return nil
		}
		// The latest revision is the one a sound ledger could have in
		// flight; any revision is checked so that an older one left in
		// flight (imported data, a caller bypassing the workflow) is not
		// silently superseded either.
		busy, err := l.queryPaidTasks(ctx, tx, `SELECT `+paidTaskCols+` FROM paid_tasks
			WHERE pipeline = ? AND episode_id = ? AND step = ? AND state IN ('intent', 'submitted')
			ORDER BY revision DESC LIMIT 1`, pipeline, episodeID, step)
		if err != nil {
			return err
		}
		if len(busy) > 0 {
			allowed := states(allot.PaidPlanned, allot.PaidSucceeded, allot.PaidFailed, allot.PaidAbandoned)
			if busy[0].State == allot.PaidIntent {
				return stateErr(busy[0], "a rework", allowed, "settle the unknown outcome first (adopt a reference, resubmit or abandon)")
			}
			return stateErr(busy[0], "a rework", allowed, "wait until the vendor finishes it")
		}
		latest, ok, err := l.latestPaidTask(ctx, tx, pipeline, episodeID, step)
		if err != nil {
			return err
		}
		rev := 0
		if ok {
			rev = latest.Revision + 1
		}
		at := now()
		t := PaidTask{
			PaidTaskRef: PaidTaskRef{Pipeline: pipeline, EpisodeID: episodeID, Step: step, Revision: rev},
			State:       allot.PaidPlanned,
			RequestID:   requestID,
			CreatedAt:   at,
			UpdatedAt:   at,
		}
		if err := l.insertPaidTask(ctx, tx, t); err != nil {
			return err
		}
		out = t
		return nil
	})
	if err != nil {
		return PaidTask{}, err
	}
	return out, nil
}

// ResetIntent settles an unknown outcome by resubmitting: an intent without
// a remote reference goes back to planned, keeping its idempotency key (the
// vendor deduplicates by it if it did receive the first attempt). A planned
// task is returned unchanged; any other state is ErrPaidTaskState.
func (l *Ledger) ResetIntent(ctx context.Context, ref PaidTaskRef) (PaidTask, error) {
	if err := checkPaidRef(ref); err != nil {
		return PaidTask{}, err
	}
	var out PaidTask
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		t, err := l.mustGetPaidTask(ctx, tx, ref)
		if err != nil {
			return err
		}
		switch {
		case t.State == allot.PaidPlanned:
			out = t
			return nil
		case t.State != allot.PaidIntent || t.RemoteRef != "":
			return stateErr(t, "a resubmit", []string{unknownOutcome, string(allot.PaidPlanned)},
				"only an unknown outcome is resubmitted")
		}
		t.State = allot.PaidPlanned
		if err := l.savePaidTask(ctx, tx, &t); err != nil {
			return err
		}
		out = t
		return nil
	})
	if err != nil {
		return PaidTask{}, err
	}
	return out, nil
}

// Abandon settles an unknown outcome by giving the task up: an intent
// without a remote reference becomes abandoned with the operator's reason.
// An abandoned task is returned unchanged; any other state is
// ErrPaidTaskState.
func (l *Ledger) Abandon(ctx context.Context, ref PaidTaskRef, reason string) (PaidTask, error) {
	if err := checkPaidRef(ref); err != nil {
		return PaidTask{}, err
	}
	if reason == "" {
		return PaidTask{}, invalid("%s: abandoning needs the operator's reason", describe(ref))
	}
	var out PaidTask
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		t, err := l.mustGetPaidTask(ctx, tx, ref)
		if err != nil {
			return err
		}
		switch {
		case t.State == allot.PaidAbandoned:
			out = t
			return nil
		case t.State != allot.PaidIntent || t.RemoteRef != "":
			return stateErr(t, "abandoning", []string{unknownOutcome, string(allot.PaidAbandoned)},
				"only an unknown outcome is abandoned")
		}
		t.State, t.Error = allot.PaidAbandoned, reason
		if err := l.savePaidTask(ctx, tx, &t); err != nil {
			return err
		}
		out = t
		return nil
	})
	if err != nil {
		return PaidTask{}, err
	}
	return out, nil
}

// costSelect reads cost entries with the period of their episode.
const costSelect = `SELECT c.remote_ref, c.pipeline, c.episode_id, e.period, c.step, c.revision, c.amount, c.currency, c.recorded_at
	FROM cost_entries c JOIN episodes e ON e.pipeline = c.pipeline AND e.episode_id = c.episode_id`

// Costs returns the cost entries of a pipeline's episodes in one period, or
// in all periods when period is "", ordered by episode (period, sequence),
// step and revision. pipeline "" means every pipeline (ordered by pipeline
// first).
func (l *Ledger) Costs(ctx context.Context, pipeline, period string) ([]CostEntry, error) {
	query := costSelect + ` WHERE 1 = 1`
	var args []any
	if pipeline != "" {
		query += ` AND c.pipeline = ?`
		args = append(args, pipeline)
	}
	if period != "" {
		query += ` AND e.period = ?`
		args = append(args, period)
	}
	query += ` ORDER BY c.pipeline, e.period, e.sequence, c.episode_id, c.step, c.revision, c.remote_ref`
	return l.queryCosts(ctx, query, args...)
}

// Cost returns the cost entry of one remote reference; ErrCostNotFound if
// none was recorded.
func (l *Ledger) Cost(ctx context.Context, remoteRef string) (CostEntry, error) {
	if remoteRef == "" {
		return CostEntry{}, invalid("a cost look-up needs a remote reference")
	}
	cs, err := l.queryCosts(ctx, costSelect+` WHERE c.remote_ref = ?`, remoteRef)
	if err != nil {
		return CostEntry{}, err
	}
	if len(cs) == 0 {
		return CostEntry{}, fmt.Errorf("%w: no cost entry for remote reference %q: it is written with the submission (RecordSubmission)", ErrCostNotFound, remoteRef)
	}
	return cs[0], nil
}

func (l *Ledger) queryCosts(ctx context.Context, query string, args ...any) ([]CostEntry, error) {
	rows, err := l.r.QueryContext(ctx, l.d.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: query costs: %w", l.where, err)
	}
	defer rows.Close()
	var out []CostEntry
	for rows.Next() {
		var c CostEntry
		if err := rows.Scan(&c.RemoteRef, &c.Pipeline, &c.EpisodeID, &c.Period, &c.Step, &c.Revision,
			&c.Amount, &c.Currency, dbTime{&c.RecordedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: read cost entry: %w", l.where, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read cost entries: %w", l.where, err)
	}
	return out, nil
}
