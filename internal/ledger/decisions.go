package ledger

// Operator decisions: invariant 13 of docs/design.md (every parked state has
// an exit; a command applied twice has its effect once). Decide applies a
// decision's effect and records the decision in one transaction, keyed by
// the request that made it, so a retried request returns its first result
// instead of failing on the state its first attempt left.

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"allot"
)

// OperatorDecision is one operator command on an episode, with its reason.
type OperatorDecision struct {
	RequestID string       `json:"request_id"` // idempotency key of the decision (the Temporal update ID); required
	Pipeline  string       `json:"pipeline"`
	EpisodeID string       `json:"episode_id"`
	Step      string       `json:"step"` // the paid step; the approval step for approve and reject; "" for reassemble
	Revision  int          `json:"revision"`
	Action    allot.Action `json:"action"`
	RemoteRef string       `json:"remote_ref"`
	Reason    string       `json:"reason"`
	By        string       `json:"by"` // who sent the command (allot.Actor); "" before ledger v16 and for automatic approvals
	At        time.Time    `json:"at"` // zero = now
}

const decisionCols = `request_id, pipeline, episode_id, step, revision, action, remote_ref, reason, decided_by, decided_at`

// DecisionRequest is an operator decision to apply.
type DecisionRequest struct {
	OperatorDecision
	// Adopted is the vendor task an adopt takes, as the caller verified
	// it with the vendor (its reference and cost).
	Adopted Submission
	// Reset names the local and approval steps whose records the decision
	// makes stale, so they run again: for a rework the steps after the
	// reworked one, for a reassembly the assembly and what follows it.
	Reset []string
	// Unpaid says that Step is not a paid or effect step: its step record,
	// not a paid task, carries a retry or an abandon.
	Unpaid bool
}

// Decide applies an operator's decision and records it, in one transaction
// under the episode's lock. Keyed by RequestID within the episode: a request
// already recorded returns the stored decision and false, writing nothing,
// whatever state the ledger is in now (an activity retried after its first
// attempt committed gets that attempt's answer). Otherwise the effect is
// checked against the ledger's state and applied:
//
//   - approve, reject: the approval step (Step) is recorded approved or rejected;
//   - reassemble: the Reset steps' records are deleted;
//   - rework: a new revision of Step is planned (the latest must be
//     succeeded, failed or abandoned) and the Reset steps' records deleted;
//   - adopt: the latest revision, an intent, takes Adopted as its submission
//     (reference and cost);
//   - resubmit: the latest revision, an intent, is allowed one send without
//     asking the vendor;
//   - retry: nothing changes; the step runs again under the protocol;
//   - abandon: the latest revision (planned, intent, submitted or failed)
//     is abandoned with the reason.
//
// A state that does not allow the effect is ErrPaidTaskState (or
// ErrPaidTaskNotFound, ErrRemoteRefConflict) and nothing is written. The
// episode must exist (ErrEpisodeNotFound). Malformed requests are
// ErrInvalidInput.
//
// Temporal deduplicates an update ID within one workflow, and an Episode
// workflow is one episode, so the request ID is unique per episode rather
// than across the ledger.
func (l *Ledger) Decide(ctx context.Context, r DecisionRequest) (OperatorDecision, bool, error) {
	d := r.OperatorDecision
	if err := episodeRef(d.Pipeline, d.EpisodeID); err != nil {
		return OperatorDecision{}, false, err
	}
	switch {
	case d.RequestID == "":
		return OperatorDecision{}, false, invalid("decision %q on episode %s of %s has no request ID: pass the Temporal update ID", d.Action, d.EpisodeID, d.Pipeline)
	case !slices.Contains(allot.Actions, d.Action):
		return OperatorDecision{}, false, invalid("decision %s on episode %s of %s has unknown action %q: use one of %v",
			d.RequestID, d.EpisodeID, d.Pipeline, d.Action, allot.Actions)
	case d.Step == "" && (d.Action.StepAction() || d.Action == allot.ActionApprove || d.Action == allot.ActionReject):
		return OperatorDecision{}, false, invalid("decision %s (%s) on episode %s of %s names no step", d.RequestID, d.Action, d.EpisodeID, d.Pipeline)
	case d.Action == allot.ActionAdopt && (d.RemoteRef == "" || r.Adopted.RemoteRef != d.RemoteRef):
		return OperatorDecision{}, false, invalid("decision %s adopts remote reference %q for step %q of episode %s of %s but carries the vendor's task %q: adopt needs the reference and the verified task",
			d.RequestID, d.RemoteRef, d.Step, d.EpisodeID, d.Pipeline, r.Adopted.RemoteRef)
	case d.Action == allot.ActionAbandon && d.Reason == "":
		return OperatorDecision{}, false, invalid("decision %s abandons step %q of episode %s of %s without a reason: pass --reason TEXT", d.RequestID, d.Step, d.EpisodeID, d.Pipeline)
	case d.Action == allot.ActionAdopt && (r.Adopted.Amount < 0 || r.Adopted.Currency == "" && r.Adopted.Amount != 0):
		return OperatorDecision{}, false, invalid("decision %s adopts %q with a cost of %d %q: a cost is an absolute amount with its currency", d.RequestID, d.RemoteRef, r.Adopted.Amount, r.Adopted.Currency)
	case d.Action == allot.ActionAdopt && r.Adopted.Amount > allot.MaxAmount:
		return OperatorDecision{}, false, invalid("decision %s adopts %q with a cost of %s, above the bound of %s per entry: ask the vendor what it charged; nothing was written",
			d.RequestID, d.RemoteRef, allot.Money{Amount: r.Adopted.Amount, Currency: r.Adopted.Currency}, allot.Money{Amount: allot.MaxAmount, Currency: r.Adopted.Currency})
	case slices.Contains(r.Reset, ""):
		return OperatorDecision{}, false, invalid("decision %s on episode %s of %s resets a step with an empty name in %q", d.RequestID, d.EpisodeID, d.Pipeline, r.Reset)
	}
	if d.At.IsZero() {
		d.At = now()
	}
	d.At = normTime(d.At)
	var (
		out     OperatorDecision
		applied bool
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
		if d.Revision, err = l.applyDecisionTx(ctx, tx, r, d); err != nil {
			return err
		}
		if err := l.resetStepsTx(ctx, tx, d.Pipeline, d.EpisodeID, r.Reset); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO operator_decisions (`+decisionCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			d.RequestID, d.Pipeline, d.EpisodeID, d.Step, d.Revision, string(d.Action), d.RemoteRef, d.Reason, d.By, l.d.timeArg(d.At)); err != nil {
			return fmt.Errorf("ledger %s: record decision %s (%s) on episode %s of %s: %w", l.where, d.RequestID, d.Action, d.EpisodeID, d.Pipeline, err)
		}
		out, applied = d, true
		return nil
	})
	if err != nil {
		return OperatorDecision{}, false, err
	}
	return out, applied, nil
}

// applyDecisionTx applies a decision's effect on the paid task or the
// approval step; it returns the revision the decision acted on.
func (l *Ledger) applyDecisionTx(ctx context.Context, tx *sql.Tx, r DecisionRequest, d OperatorDecision) (int, error) {
	switch d.Action {
	case allot.ActionApprove, allot.ActionReject:
		status := allot.StepApproved
		if d.Action == allot.ActionReject {
			status = allot.StepRejected
		}
		return 0, l.recordStepTx(ctx, tx, StepRecord{Pipeline: d.Pipeline, EpisodeID: d.EpisodeID, Step: d.Step, Status: status, CompletedAt: d.At})
	case allot.ActionReassemble:
		return 0, nil
	case allot.ActionRework:
		if r.Unpaid {
			return 0, invalid("decision %s reworks step %q of episode %s of %s, which is not paid: retry or abandon it", d.RequestID, d.Step, d.EpisodeID, d.Pipeline)
		}
		t, err := l.planRevisionTx(ctx, tx, d.Pipeline, d.EpisodeID, d.Step, d.RequestID)
		return t.Revision, err
	}
	if r.Unpaid {
		return l.applyUnpaidTx(ctx, tx, d)
	}
	latest, ok, err := l.latestPaidTask(ctx, tx, d.Pipeline, d.EpisodeID, d.Step)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%w: episode %s of %s has no paid task for step %q: nothing to %s", ErrPaidTaskNotFound, d.EpisodeID, d.Pipeline, d.Step, d.Action)
	}
	ref := latest.PaidTaskRef
	switch d.Action {
	case allot.ActionRetry:
		return ref.Revision, nil
	case allot.ActionAdopt:
		if latest.State != allot.PaidIntent {
			return 0, stateErr(latest, "adopting a vendor task", states(allot.PaidIntent), "only a task whose submission's outcome is unknown takes a found reference")
		}
		s := r.Adopted
		s.PaidTaskRef = ref
		_, err := l.recordSubmissionTx(ctx, tx, s)
		return ref.Revision, err
	case allot.ActionResubmit:
		_, err := l.changePaidTaskTx(ctx, tx, ref, func(_ *sql.Tx, t *PaidTask) error {
			if t.State != allot.PaidIntent {
				return stateErr(*t, "a resubmit", states(allot.PaidIntent), "only an unsettled submission is sent again; use rework for a new revision")
			}
			t.ResubmitRequest = d.RequestID
			return nil
		})
		return ref.Revision, err
	case allot.ActionAbandon:
		_, err := l.changePaidTaskTx(ctx, tx, ref, func(tx *sql.Tx, t *PaidTask) error {
			switch t.State {
			case allot.PaidPlanned, allot.PaidIntent, allot.PaidSubmitted, allot.PaidFailed:
			default:
				return stateErr(*t, "abandoning", states(allot.PaidPlanned, allot.PaidIntent, allot.PaidSubmitted, allot.PaidFailed), "a succeeded or abandoned task is settled already")
			}
			t.State, t.Error, t.Owner, t.ResubmitRequest = allot.PaidAbandoned, d.Reason, "", ""
			if t.RemoteRef == "" {
				// Given up without a reference: the operator decides the
				// vendor did not charge, so its budgets get the reservation
				// back. A task with a reference keeps its settled cost.
				return l.releaseEntriesTx(ctx, tx, ref)
			}
			return nil
		})
		return ref.Revision, err
	}
	return 0, invalid("decision %s has unknown action %q", d.RequestID, d.Action)
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
			&d.RemoteRef, &d.Reason, &d.By, dbTime{&d.At}); err != nil {
			return nil, fmt.Errorf("ledger %s: read decision: %w", l.where, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read decisions: %w", l.where, err)
	}
	return out, nil
}

// applyUnpaidTx applies a retry (nothing to change: the step runs again) or
// an abandon (the step is recorded abandoned with the reason, at its
// revision, and the episode goes on without it) to a step that is not paid.
func (l *Ledger) applyUnpaidTx(ctx context.Context, tx *sql.Tx, d OperatorDecision) (int, error) {
	revision := 0
	err := tx.QueryRowContext(ctx, l.d.q(`SELECT revision FROM step_records WHERE pipeline = ? AND episode_id = ? AND step = ?`),
		d.Pipeline, d.EpisodeID, d.Step).Scan(&revision)
	if err != nil && err != sql.ErrNoRows {
		return 0, fmt.Errorf("ledger %s: read step %s of episode %s of %s: %w", l.where, d.Step, d.EpisodeID, d.Pipeline, err)
	}
	switch d.Action {
	case allot.ActionRetry:
		return revision, nil
	case allot.ActionAbandon:
		return revision, l.recordStepTx(ctx, tx, StepRecord{Pipeline: d.Pipeline, EpisodeID: d.EpisodeID, Step: d.Step,
			Status: allot.StepAbandoned, Revision: revision, CompletedAt: d.At})
	}
	return 0, invalid("decision %s: %s does not apply to step %q of episode %s of %s, which is not paid: retry or abandon it", d.RequestID, d.Action, d.Step, d.EpisodeID, d.Pipeline)
}

// Decision returns the decision recorded for a request, and whether there
// is one.
func (l *Ledger) Decision(ctx context.Context, pipeline, episodeID, requestID string) (OperatorDecision, bool, error) {
	if err := episodeRef(pipeline, episodeID); err != nil {
		return OperatorDecision{}, false, err
	}
	ds, err := l.queryDecisions(ctx, l.r, `SELECT `+decisionCols+` FROM operator_decisions
		WHERE pipeline = ? AND episode_id = ? AND request_id = ?`, pipeline, episodeID, requestID)
	if err != nil || len(ds) == 0 {
		return OperatorDecision{}, false, err
	}
	return ds[0], true, nil
}
