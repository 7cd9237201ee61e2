package ledger

// Paid tasks: invariant 7 (at most one submission per paid task) and
// invariant 13 (every parked state has an exit) of docs/design.md.
//
// A paid task is one vendor submission of (episode, step, revision). Its
// states and the only moves between them:
//
//	planned   -> intent     WriteIntent: written by its owner before the vendor is called
//	planned   -> abandoned  an operator gives it up (Decide)
//	intent    -> intent     TakeIntent: another attempt takes over after the vendor said it has nothing
//	intent    -> submitted  RecordSubmission: the vendor accepted, or its task was found or adopted
//	intent    -> planned    ReleaseIntent: the vendor definitely refused; nothing was accepted
//	intent    -> abandoned  an operator gives it up (Decide)
//	submitted -> succeeded  RecordPaidResult: the result is downloaded and verified
//	submitted -> failed     RecordPaidFailure: the vendor reports failure, or the result does not verify
//	submitted -> abandoned  an operator gives it up, e.g. the vendor lost the task (Decide)
//	failed    -> abandoned  an operator gives the step up (Decide)
//
// succeeded and abandoned are final; a rework plans a new revision instead.
// Every change goes through changePaidTask, which checks the move against
// paidMoves: there is no other path that writes a task's state.
//
// An intent carries its owner, the attempt that wrote it: only the owner
// marks it as being sent (MarkSending) and calls the vendor. Any other
// attempt finds the intent owned by someone else and asks the vendor by
// idempotency key first. maybe_sent says a send began whose answer never
// came: until the vendor is asked (or an operator decides), the outcome is
// unknown and nothing is sent again.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"allot"
)

// paidMoves lists, for each state, the states a task may move to.
var paidMoves = map[allot.PaidTaskState][]allot.PaidTaskState{
	allot.PaidPlanned:   {allot.PaidIntent, allot.PaidAbandoned},
	allot.PaidIntent:    {allot.PaidIntent, allot.PaidSubmitted, allot.PaidPlanned, allot.PaidAbandoned},
	allot.PaidSubmitted: {allot.PaidSucceeded, allot.PaidFailed, allot.PaidAbandoned},
	allot.PaidFailed:    {allot.PaidAbandoned},
	allot.PaidSucceeded: nil,
	allot.PaidAbandoned: nil,
}

// The paid task's nouns are the domain's (allot.PaidTaskRef,
// allot.PaidTask); the ledger stores them.
type (
	PaidTaskRef = allot.PaidTaskRef
	PaidTask    = allot.PaidTask
)

// Submission is what the vendor said when it accepted a paid task.
type Submission struct {
	PaidTaskRef
	RemoteRef string
	Amount    int64 // minor units
	Currency  string
}

const paidTaskCols = `pipeline, episode_id, step, revision, idempotency_key, state, remote_ref, artifact, sha256, error, request_id,
	owner, maybe_sent, sending_until, resubmit_request, created_at, updated_at, first_sent_at`

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
	return fmt.Errorf("%w: %s has not been written: its intent is written by the paid step before the vendor is called (WriteIntent), a rework plans it",
		ErrPaidTaskNotFound, describe(r))
}

// stateErr says that t's state does not allow op, which needs one of allowed.
func stateErr(t PaidTask, op string, allowed []string, hint string) error {
	cur := string(t.State)
	if t.OutcomeUnknown() {
		cur += " that may have reached the vendor (outcome unknown)"
	}
	msg := fmt.Sprintf("%s is %s; %s needs it to be %s", describe(t.PaidTaskRef), cur, op, orList(allowed))
	if hint != "" {
		msg += ": " + hint
	}
	return fmt.Errorf("%w: %s; nothing was written", ErrPaidTaskState, msg)
}

// states lists state names for stateErr.
func states(ss ...allot.PaidTaskState) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

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

func ownedErr(t PaidTask, owner string) error {
	return fmt.Errorf("%w: %s is owned by attempt %q, not %q: the owner sends it; others ask the vendor by idempotency key first",
		ErrIntentOwned, describe(t.PaidTaskRef), t.Owner, owner)
}

// lockEpisodeTx takes the episode's lock where BEGIN did not (PostgreSQL).
func (l *Ledger) lockEpisodeTx(ctx context.Context, tx *sql.Tx, pipeline, episodeID string) error {
	return l.lockTx(ctx, tx, episodeLockKey(pipeline, episodeID), "episode "+episodeID+" of "+pipeline)
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
			&t.Artifact, &t.SHA256, &t.Error, &t.RequestID, &t.Owner, &t.MaybeSent, dbTime{&t.SendingUntil}, &t.ResubmitRequest,
			dbTime{&t.CreatedAt}, dbTime{&t.UpdatedAt}, dbTime{&t.FirstSentAt}); err != nil {
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

func (l *Ledger) insertPaidTask(ctx context.Context, tx *sql.Tx, t PaidTask) error {
	if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO paid_tasks (`+paidTaskCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		t.Pipeline, t.EpisodeID, t.Step, t.Revision, t.IdempotencyKey, string(t.State), t.RemoteRef,
		t.Artifact, t.SHA256, t.Error, t.RequestID, t.Owner, t.MaybeSent, l.d.timeArg(t.SendingUntil), t.ResubmitRequest,
		l.d.timeArg(t.CreatedAt), l.d.timeArg(t.UpdatedAt), l.d.timeArg(t.FirstSentAt)); err != nil {
		return fmt.Errorf("ledger %s: insert %s: %w", l.where, describe(t.PaidTaskRef), err)
	}
	return nil
}

// changePaidTask is the one path that changes a stored paid task: in one
// write transaction under the episode's lock it reads the task
// (ErrPaidTaskNotFound if missing), lets change refuse it (nothing is
// written) or edit it, checks the state move against paidMoves, and saves
// it if anything changed. It returns the task as stored afterwards.
func (l *Ledger) changePaidTask(ctx context.Context, ref PaidTaskRef, change func(tx *sql.Tx, t *PaidTask) error) (PaidTask, error) {
	if err := checkPaidRef(ref); err != nil {
		return PaidTask{}, err
	}
	var out PaidTask
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = l.changePaidTaskTx(ctx, tx, ref, change)
		return err
	})
	if err != nil {
		return PaidTask{}, err
	}
	return out, nil
}

// changePaidTaskTx is changePaidTask inside a transaction the caller owns
// (a decision writes the task and the decision together).
func (l *Ledger) changePaidTaskTx(ctx context.Context, tx *sql.Tx, ref PaidTaskRef, change func(tx *sql.Tx, t *PaidTask) error) (PaidTask, error) {
	if err := l.lockEpisodeTx(ctx, tx, ref.Pipeline, ref.EpisodeID); err != nil {
		return PaidTask{}, err
	}
	before, ok, err := l.getPaidTask(ctx, tx, ref)
	if err != nil {
		return PaidTask{}, err
	}
	if !ok {
		return PaidTask{}, paidNotFound(ref)
	}
	t := before
	if err := change(tx, &t); err != nil {
		return PaidTask{}, err
	}
	if t == before {
		return t, nil
	}
	if t.State != before.State || t.State == allot.PaidIntent && t.Owner != before.Owner {
		if !slices.Contains(paidMoves[before.State], t.State) {
			// A programming error, not an operator's: the callers check
			// states first. Refuse rather than write a move the design
			// does not have.
			return PaidTask{}, fmt.Errorf("%w: %s cannot move from %s to %s", ErrPaidTaskState, describe(ref), before.State, t.State)
		}
	}
	t.UpdatedAt = now()
	if _, err := tx.ExecContext(ctx, l.d.q(`UPDATE paid_tasks SET
			idempotency_key = ?, state = ?, remote_ref = ?, artifact = ?, sha256 = ?, error = ?,
			owner = ?, maybe_sent = ?, sending_until = ?, resubmit_request = ?, updated_at = ?, first_sent_at = ?
		WHERE pipeline = ? AND episode_id = ? AND step = ? AND revision = ?`),
		t.IdempotencyKey, string(t.State), t.RemoteRef, t.Artifact, t.SHA256, t.Error,
		t.Owner, t.MaybeSent, l.d.timeArg(t.SendingUntil), t.ResubmitRequest, l.d.timeArg(t.UpdatedAt), l.d.timeArg(t.FirstSentAt),
		t.Pipeline, t.EpisodeID, t.Step, t.Revision); err != nil {
		return PaidTask{}, fmt.Errorf("ledger %s: update %s: %w", l.where, describe(ref), err)
	}
	return t, nil
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

// WriteIntent records, before the vendor is called, that owner (an activity
// attempt) is about to submit the task with idempotencyKey. In one
// transaction: the episode must exist (ErrEpisodeNotFound, nothing
// written); a new task is inserted as an intent owned by owner; a planned
// one becomes owner's intent (keeping MaybeSent); a task in any other state,
// including an intent of another owner, is returned unchanged, so that the
// caller sees who has it and resumes from there. A task whose stored key
// differs from idempotencyKey is refused with ErrInvalidInput: a key never
// changes.
func (l *Ledger) WriteIntent(ctx context.Context, ref PaidTaskRef, idempotencyKey, owner string) (PaidTask, error) {
	return l.WriteIntentReserving(ctx, ref, idempotencyKey, owner, nil)
}

// WriteIntentReserving is WriteIntentAdmitted for a caller that priced the
// task: covered when rs names any budget.
func (l *Ledger) WriteIntentReserving(ctx context.Context, ref PaidTaskRef, idempotencyKey, owner string, rs []Reservation) (PaidTask, error) {
	return l.WriteIntentAdmitted(ctx, ref, idempotencyKey, owner, Admission{Covered: len(rs) > 0, Reservations: rs})
}

// Admission is what a task's intent must hold when it is written: whether
// budgets cover the task, and the reservations that admit it, one per
// covering budget (docs/design.md, Budgets).
type Admission struct {
	// Covered: at least one budget covers the task, so it may become an
	// intent only with Reservations.
	Covered      bool
	Reservations []Reservation
	// Later are the episode's covered paid tasks after this one, reserved
	// with it so that a budget never pays for half an episode
	// (docs/design.md, "An episode is paid for whole"). Each one not yet
	// written is admitted together with this task and written planned,
	// holding its reservations until its own turn takes them over.
	Later []LaterTask
}

// LaterTask is a paid task of the episode that runs after the one being
// admitted, and what it reserves.
type LaterTask struct {
	Ref            PaidTaskRef
	IdempotencyKey string
	Reservations   []Reservation
}

// ErrReservationMissing means a task that budgets cover was about to become
// an intent with nothing reserved (the caller read the task in a later state
// and priced nothing, and it moved back to planned since). Nothing was
// written; price the task again and retry.
var ErrReservationMissing = errors.New("paid task would become an intent without a reservation")

// WriteIntentAdmitted is WriteIntent for a task that budgets may cover
// (invariant 20): the admission is decided in the transaction that writes
// the intent, never from an earlier read. When the task becomes an intent
// (inserted, or planned -> intent), each reservation is admitted in the
// same transaction, under its (budget, period)'s lock, only if every
// budget has room. If any refuses, nothing is reserved, the task is written
// (or stays) planned, and the error is a *BudgetExhaustedError
// (ErrBudgetExhausted) with the task as stored. A covered task with no
// reservations is refused with ErrReservationMissing and nothing written:
// no intent, so no send, without a reservation that covers it. A task that
// is already an intent or further on reserves nothing again.
func (l *Ledger) WriteIntentAdmitted(ctx context.Context, ref PaidTaskRef, idempotencyKey, owner string, adm Admission) (PaidTask, error) {
	rs := adm.Reservations
	if err := checkPaidRef(ref); err != nil {
		return PaidTask{}, err
	}
	if idempotencyKey == "" || owner == "" {
		return PaidTask{}, invalid("%s: the intent needs the vendor idempotency key and the writing attempt, got %q and %q", describe(ref), idempotencyKey, owner)
	}
	if err := checkReservations(describe(ref), rs); err != nil {
		return PaidTask{}, err
	}
	for _, lt := range adm.Later {
		if err := checkPaidRef(lt.Ref); err != nil {
			return PaidTask{}, err
		}
		if lt.Ref.Pipeline != ref.Pipeline || lt.Ref.EpisodeID != ref.EpisodeID || lt.Ref == ref || lt.IdempotencyKey == "" || len(lt.Reservations) == 0 {
			return PaidTask{}, invalid("%s: a later task reserved with it must be another task of the same episode, with its key and reservations, got %s", describe(ref), describe(lt.Ref))
		}
		if err := checkReservations(describe(lt.Ref), lt.Reservations); err != nil {
			return PaidTask{}, err
		}
	}
	var (
		out     PaidTask
		refused []BudgetShortfall
	)
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		refused = nil
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
		if adm.Covered && len(rs) == 0 {
			return fmt.Errorf("%w: %s is %s and budgets cover it, but the caller priced nothing (it read the task in a later state); nothing was written: price it again and retry",
				ErrReservationMissing, describe(ref), stateOrNew(t, ok))
		}
		// What the admission asks: this task's price beyond what it holds
		// already (the episode's first paid task reserved it), and the
		// price of every later task of the episode not written yet.
		var held []BudgetEntry
		if ok {
			if held, err = l.taskEntries(ctx, tx, ref); err != nil {
				return err
			}
		}
		asks := allot.AsksBeyondHeld(rs, heldReservations(held))
		var later []LaterTask
		for _, lt := range adm.Later {
			_, exists, err := l.getPaidTask(ctx, tx, lt.Ref)
			if err != nil {
				return err
			}
			if !exists {
				later = append(later, lt)
				asks = append(asks, lt.Reservations...)
			}
		}
		if asks, err = allot.SumAsks(asks); err != nil {
			return invalid("%v", err)
		}
		if refused, err = l.admitTx(ctx, tx, ref, asks); err != nil {
			return err
		}
		if len(refused) > 0 {
			// Nothing is reserved and nothing may be sent: the task is
			// planned, so that an operator can retry or abandon it.
			if ok {
				out = t
				return nil
			}
			at := now()
			out = PaidTask{PaidTaskRef: ref, IdempotencyKey: idempotencyKey, State: allot.PaidPlanned, CreatedAt: at, UpdatedAt: at}
			return l.insertPaidTask(ctx, tx, out)
		}
		if !ok {
			at := now()
			out = PaidTask{PaidTaskRef: ref, IdempotencyKey: idempotencyKey, State: allot.PaidIntent, Owner: owner, CreatedAt: at, UpdatedAt: at}
			if err := l.insertPaidTask(ctx, tx, out); err != nil {
				return err
			}
		} else {
			out, err = l.changePaidTaskTx(ctx, tx, ref, func(_ *sql.Tx, t *PaidTask) error {
				t.IdempotencyKey, t.State, t.Owner = idempotencyKey, allot.PaidIntent, owner
				return nil
			})
			if err != nil {
				return err
			}
		}
		if err := l.reserveTx(ctx, tx, ref, rs); err != nil {
			return err
		}
		for _, lt := range later {
			at := now()
			if err := l.insertPaidTask(ctx, tx, PaidTask{PaidTaskRef: lt.Ref, IdempotencyKey: lt.IdempotencyKey, State: allot.PaidPlanned, CreatedAt: at, UpdatedAt: at}); err != nil {
				return err
			}
			if err := l.reserveTx(ctx, tx, lt.Ref, lt.Reservations); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return PaidTask{}, err
	}
	if len(refused) > 0 {
		return out, &BudgetExhaustedError{Task: ref, Shortfalls: refused}
	}
	return out, nil
}

func stateOrNew(t PaidTask, ok bool) string {
	if !ok {
		return "new"
	}
	return string(t.State)
}

// WritePlanned writes a task that is not to be sent yet as planned (a task
// no budget could be asked for: it has no price), so that an operator can
// retry or abandon it; a task that exists is returned as it is.
func (l *Ledger) WritePlanned(ctx context.Context, ref PaidTaskRef, idempotencyKey string) (PaidTask, error) {
	if err := checkPaidRef(ref); err != nil {
		return PaidTask{}, err
	}
	if idempotencyKey == "" {
		return PaidTask{}, invalid("%s: a planned task needs its idempotency key", describe(ref))
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
		if err != nil || ok {
			out = t
			return err
		}
		at := now()
		out = PaidTask{PaidTaskRef: ref, IdempotencyKey: idempotencyKey, State: allot.PaidPlanned, CreatedAt: at, UpdatedAt: at}
		return l.insertPaidTask(ctx, tx, out)
	})
	if err != nil {
		return PaidTask{}, err
	}
	return out, nil
}

// TakeIntent hands an intent to another owner: an attempt that found
// another's intent, and learned from the vendor that it holds no task with
// the key, takes it over before sending. seen is the task as the attempt
// read it before asking the vendor: if the intent changed since (another
// attempt took it, or its owner began a send), it is ErrIntentOwned and
// nothing is written, so the vendor's "nothing" is never trusted about a
// send it did not cover. An intent whose latest send may still be under
// way (before SendingUntil at the time now) cannot be taken either. Any
// state but intent is ErrPaidTaskState.
func (l *Ledger) TakeIntent(ctx context.Context, seen PaidTask, to string, at time.Time) (PaidTask, error) {
	if to == "" {
		return PaidTask{}, invalid("%s: taking the intent over needs the new owner", describe(seen.PaidTaskRef))
	}
	return l.changePaidTask(ctx, seen.PaidTaskRef, func(_ *sql.Tx, t *PaidTask) error {
		switch {
		case t.State != allot.PaidIntent:
			return stateErr(*t, "taking the intent over", states(allot.PaidIntent), "")
		case t.Owner == to:
			return nil
		case t.Owner != seen.Owner || t.MaybeSent != seen.MaybeSent || !t.SendingUntil.Equal(seen.SendingUntil):
			return ownedErr(*t, to)
		case t.MaybeSent && at.Before(t.SendingUntil):
			return fmt.Errorf("%w: %s: the send of attempt %q may still reach the vendor until %s; nothing was written",
				ErrSendInFlight, describe(t.PaidTaskRef), t.Owner, t.SendingUntil.Format(time.RFC3339Nano))
		}
		t.Owner = to
		return nil
	})
}

// MarkSending records, right before the vendor is called, that owner sends
// the intent now and will give up on the send at until: from here until the
// vendor answers the outcome is unknown (MaybeSent). It consumes an
// operator's resubmit permission. Only the owner may send (ErrIntentOwned);
// any state but intent is ErrPaidTaskState.
func (l *Ledger) MarkSending(ctx context.Context, ref PaidTaskRef, owner string, until time.Time) (PaidTask, error) {
	if until.IsZero() || owner == "" {
		return PaidTask{}, invalid("%s: a send needs its owner and its deadline", describe(ref))
	}
	return l.changePaidTask(ctx, ref, func(_ *sql.Tx, t *PaidTask) error {
		switch {
		case t.State != allot.PaidIntent:
			return stateErr(*t, "sending", states(allot.PaidIntent), "")
		case t.Owner != owner:
			return ownedErr(*t, owner)
		}
		t.MaybeSent, t.SendingUntil, t.ResubmitRequest = true, normTime(until), ""
		if t.FirstSentAt.IsZero() {
			// The vendor may know the key from now on: its horizon
			// counts from the first send, whatever came later.
			t.FirstSentAt = now()
		}
		return nil
	})
}

// EndSend records that owner's send is over without an answer (the request
// failed or timed out on the sender's side): from at on, asking the vendor
// settles what it did. A later send, another owner, or a task that moved on
// is left as it is.
func (l *Ledger) EndSend(ctx context.Context, ref PaidTaskRef, owner string, at time.Time) (PaidTask, error) {
	if owner == "" {
		return PaidTask{}, invalid("%s: ending a send needs its owner", describe(ref))
	}
	return l.changePaidTask(ctx, ref, func(_ *sql.Tx, t *PaidTask) error {
		if t.State == allot.PaidIntent && t.Owner == owner && t.MaybeSent && at.Before(t.SendingUntil) {
			t.SendingUntil = normTime(at)
		}
		return nil
	})
}

// ReleaseIntent moves owner's intent back to planned after the vendor
// definitely refused it (nothing was accepted, so it may be sent again once
// the cause is fixed), and releases its budget reservations. maybeSent is what the task says afterwards: the
// caller clears it only when the vendor was asked by key in the same attempt
// and had nothing, or nothing had been sent before this attempt.
func (l *Ledger) ReleaseIntent(ctx context.Context, ref PaidTaskRef, owner string, maybeSent bool) (PaidTask, error) {
	if owner == "" {
		return PaidTask{}, invalid("%s: releasing the intent needs its owner", describe(ref))
	}
	return l.changePaidTask(ctx, ref, func(tx *sql.Tx, t *PaidTask) error {
		switch {
		case t.State != allot.PaidIntent:
			return stateErr(*t, "releasing the intent", states(allot.PaidIntent), "")
		case t.Owner != owner:
			return ownedErr(*t, owner)
		}
		t.State, t.Owner, t.MaybeSent = allot.PaidPlanned, "", maybeSent
		// The vendor answered this send: it is over, whatever its deadline.
		if at := now(); at.Before(t.SendingUntil) {
			t.SendingUntil = at
		}
		// It refused: nothing was charged, so the budgets get the
		// reservation back (the next attempt asks for it again).
		return l.releaseEntriesTx(ctx, tx, ref)
	})
}

// RecordSubmission writes the remote reference the vendor gave the task and,
// in the same transaction, its cost entry. The task must exist
// (ErrPaidTaskNotFound) as an intent, or be submitted, succeeded or failed
// (else ErrPaidTaskState); a task with another remote reference, or a
// reference that belongs to another task, is refused with
// ErrRemoteRefConflict and nothing is written. An intent becomes submitted,
// whoever owns it (a task found at the vendor by its key is this task's);
// later states stay. The cost entry is keyed by the remote reference and
// holds the absolute amount (upsert), so recording twice changes no total
// and a corrected amount replaces the old one (invariant 8).
func (l *Ledger) RecordSubmission(ctx context.Context, s Submission) (PaidTask, error) {
	out, _, err := l.RecordSubmissionAdded(ctx, s)
	return out, err
}

// RecordSubmissionAdded is RecordSubmission that also reports what the
// write added to the ledger's costs, in minor units of s.Currency: the
// amount when the cost entry is new (or changed currency), the rise when a
// corrected amount is higher, else 0. Counters add it, so a cost is counted
// once however often it is recorded.
func (l *Ledger) RecordSubmissionAdded(ctx context.Context, s Submission) (PaidTask, int64, error) {
	if err := checkSubmission(s); err != nil {
		return PaidTask{}, 0, err
	}
	var (
		out   PaidTask
		added int64
	)
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, added, err = l.recordSubmissionCostTx(ctx, tx, s)
		return err
	})
	if err != nil {
		return PaidTask{}, 0, err
	}
	return out, added, nil
}

func checkSubmission(s Submission) error {
	if err := checkPaidRef(s.PaidTaskRef); err != nil {
		return err
	}
	switch {
	case s.RemoteRef == "":
		return invalid("%s: a submission needs the vendor's remote reference", describe(s.PaidTaskRef))
	case s.Currency == "" && s.Amount != 0:
		return invalid("%s: the cost of submission %q needs a currency", describe(s.PaidTaskRef), s.RemoteRef)
	case s.Amount < 0:
		return invalid("%s: the cost of submission %q is negative (%d): amounts are absolute, in minor units", describe(s.PaidTaskRef), s.RemoteRef, s.Amount)
	case s.Amount > allot.MaxAmount:
		// A vendor reporting an absurd cost must not corrupt every total:
		// nothing is written, and the episode parks for a person.
		return invalid("%s: the vendor reports a cost of %s for submission %q, above the bound of %s per entry: ask the vendor what it charged; nothing was written",
			describe(s.PaidTaskRef), allot.Money{Amount: s.Amount, Currency: s.Currency}, s.RemoteRef, allot.Money{Amount: allot.MaxAmount, Currency: s.Currency})
	}
	return nil
}

func (l *Ledger) recordSubmissionTx(ctx context.Context, tx *sql.Tx, s Submission) (PaidTask, error) {
	t, _, err := l.recordSubmissionCostTx(ctx, tx, s)
	return t, err
}

// recordSubmissionCostTx is recordSubmissionTx that also reports what the
// cost entry added (see RecordSubmissionAdded).
func (l *Ledger) recordSubmissionCostTx(ctx context.Context, tx *sql.Tx, s Submission) (PaidTask, int64, error) {
	var added int64
	t, err := l.changePaidTaskTx(ctx, tx, s.PaidTaskRef, func(tx *sql.Tx, t *PaidTask) error {
		switch t.State {
		case allot.PaidIntent, allot.PaidSubmitted, allot.PaidSucceeded, allot.PaidFailed:
		default:
			return stateErr(*t, "recording a submission", states(allot.PaidIntent, allot.PaidSubmitted, allot.PaidSucceeded, allot.PaidFailed),
				"the intent must be written (WriteIntent) before the vendor is called")
		}
		if t.RemoteRef != "" && t.RemoteRef != s.RemoteRef {
			return refConflict(*t, s.RemoteRef)
		}
		if err := l.checkRefOwner(ctx, tx, s); err != nil {
			return err
		}
		t.RemoteRef = s.RemoteRef
		if t.State == allot.PaidIntent {
			t.State, t.Owner, t.MaybeSent, t.ResubmitRequest = allot.PaidSubmitted, "", false, ""
		}
		var err error
		if added, err = l.upsertCost(ctx, tx, s); err != nil {
			return err
		}
		// The reservation becomes the cost (invariant 20).
		return l.settleEntriesTx(ctx, tx, s)
	})
	if err != nil {
		return PaidTask{}, 0, err
	}
	return t, added, nil
}

// RecordPaidResult marks the task succeeded with its downloaded, verified
// artifact. The task must be submitted or succeeded (ErrPaidTaskState) with
// remoteRef (ErrRemoteRefConflict). Recording the same result again is a
// no-op; a succeeded task is never given another result (ErrPaidTaskState).
func (l *Ledger) RecordPaidResult(ctx context.Context, ref PaidTaskRef, remoteRef, artifact, sha256 string) (PaidTask, error) {
	if remoteRef == "" || artifact == "" || sha256 == "" {
		return PaidTask{}, invalid("%s: a result needs the remote reference, the artifact and its SHA-256, got %q, %q and %q",
			describe(ref), remoteRef, artifact, sha256)
	}
	return l.changePaidTask(ctx, ref, func(_ *sql.Tx, t *PaidTask) error {
		if t.State != allot.PaidSubmitted && t.State != allot.PaidSucceeded {
			return stateErr(*t, "recording a result", states(allot.PaidSubmitted, allot.PaidSucceeded),
				"the remote reference must be written (RecordSubmission) before the task completes")
		}
		if t.RemoteRef != remoteRef {
			return refConflict(*t, remoteRef)
		}
		if t.State == allot.PaidSucceeded {
			if t.SHA256 == sha256 && t.Artifact == artifact {
				return nil
			}
			return fmt.Errorf("%w: %s already succeeded with artifact %s (sha256 %s); refusing %s (sha256 %s): a verified result is never overwritten, rework the step for a new revision",
				ErrPaidTaskState, describe(ref), t.Artifact, t.SHA256, artifact, sha256)
		}
		t.State, t.Artifact, t.SHA256 = allot.PaidSucceeded, artifact, sha256
		return nil
	})
}

// RecordPaidFailure marks a submitted task failed with the vendor's reason.
// The task must be submitted (or already failed: then it is returned
// unchanged, keeping the first reason) with remoteRef.
func (l *Ledger) RecordPaidFailure(ctx context.Context, ref PaidTaskRef, remoteRef, reason string) (PaidTask, error) {
	if remoteRef == "" || reason == "" {
		return PaidTask{}, invalid("%s: a failure needs the remote reference and a reason, got %q and %q", describe(ref), remoteRef, reason)
	}
	return l.changePaidTask(ctx, ref, func(_ *sql.Tx, t *PaidTask) error {
		if t.State != allot.PaidSubmitted && t.State != allot.PaidFailed {
			return stateErr(*t, "recording a failure", states(allot.PaidSubmitted, allot.PaidFailed), "")
		}
		if t.RemoteRef != remoteRef {
			return refConflict(*t, remoteRef)
		}
		if t.State == allot.PaidSubmitted {
			t.State, t.Error = allot.PaidFailed, reason
		}
		return nil
	})
}

// planRevisionTx plans a new revision of a paid step for a rework (a new
// revision has a new idempotency key and will be charged once more). A
// revision already planned by requestID is returned (retries). The latest
// revision must be settled: succeeded, failed or abandoned; while one is
// planned, an intent or submitted, ErrPaidTaskState says how to settle it
// first.
func (l *Ledger) planRevisionTx(ctx context.Context, tx *sql.Tx, pipeline, episodeID, step, requestID string) (PaidTask, error) {
	done, err := l.queryPaidTasks(ctx, tx, `SELECT `+paidTaskCols+` FROM paid_tasks
		WHERE pipeline = ? AND episode_id = ? AND step = ? AND request_id = ? AND request_id <> ''`, pipeline, episodeID, step, requestID)
	if err != nil {
		return PaidTask{}, err
	}
	if len(done) > 0 {
		return done[0], nil
	}
	// Every revision is checked, not only the latest, so that an older one
	// left in flight (imported data, a caller bypassing the workflow) is not
	// silently superseded either.
	busy, err := l.queryPaidTasks(ctx, tx, `SELECT `+paidTaskCols+` FROM paid_tasks
		WHERE pipeline = ? AND episode_id = ? AND step = ? AND state IN ('planned', 'intent', 'submitted')
		ORDER BY revision DESC LIMIT 1`, pipeline, episodeID, step)
	if err != nil {
		return PaidTask{}, err
	}
	if len(busy) > 0 {
		settled := states(allot.PaidSucceeded, allot.PaidFailed, allot.PaidAbandoned)
		switch {
		case busy[0].State == allot.PaidPlanned:
			return PaidTask{}, stateErr(busy[0], "a rework", settled, "it has not been sent yet: retry it (resolve --retry) or abandon it")
		case busy[0].OutcomeUnknown():
			return PaidTask{}, stateErr(busy[0], "a rework", settled, "settle the unknown outcome first (resolve --adopt, --resubmit, --retry or --abandon)")
		default:
			return PaidTask{}, stateErr(busy[0], "a rework", settled, "wait until the vendor finishes it, or abandon it")
		}
	}
	latest, ok, err := l.latestPaidTask(ctx, tx, pipeline, episodeID, step)
	if err != nil {
		return PaidTask{}, err
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
		return PaidTask{}, err
	}
	return t, nil
}
