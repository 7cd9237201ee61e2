package ledger

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"allot"
)

// InputState is where an input is in its life: ready to claim, claimed by
// one episode, or withdrawn before any claimed it.
type InputState string

// Input states.
const (
	InputReady     InputState = "ready"
	InputClaimed   InputState = "claimed"
	InputWithdrawn InputState = "withdrawn"
)

// MaxInputPayload bounds an input's payload: it reaches every step in its
// input, and so the workflow's history through activity steps; larger data
// belongs in a file the payload names.
const MaxInputPayload = 64 << 10

// Errors of inputs.
var (
	// ErrInputConflict: the reference is taken by an input with another
	// payload or ready time. Nothing was written.
	ErrInputConflict = &allot.Error{Type: allot.InputConflict, Message: "input reference already added with other data"}
	// ErrInputNotFound: the pipeline has no input of that reference.
	ErrInputNotFound = &allot.Error{Type: allot.InputNotFound, Message: "input not found"}
	// ErrInputClaimed: the input was claimed by an episode; it can no
	// longer be withdrawn.
	ErrInputClaimed = &allot.Error{Type: allot.InputClaimed, Message: "input already claimed"}
)

// Input is one input a pipeline consumes.
type Input struct {
	Pipeline    string          `json:"pipeline"`
	Ref         string          `json:"ref"`
	ReadyAt     time.Time       `json:"ready_at"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	State       InputState      `json:"state"`
	EpisodeID   string          `json:"episode_id,omitempty"`
	AddedAt     time.Time       `json:"added_at"`
	ClaimedAt   time.Time       `json:"claimed_at,omitzero"`
	WithdrawnAt time.Time       `json:"withdrawn_at,omitzero"`
}

// AddInputResult says whether AddInput added the input or found it there.
type AddInputResult struct {
	Input Input `json:"input"`
	Added bool  `json:"added"`
}

const inputCols = `pipeline, ref, ready_at, payload, state, episode_id, added_at, claimed_at, withdrawn_at`

// AddInput adds an input ready from in.ReadyAt (zero: now). It is
// idempotent on the reference: the same reference with the same payload and
// ready time (or none) is the input already there (whatever its state); with
// other data it is ErrInputConflict and nothing is written. A payload must be
// JSON (it is stored compacted).
func (l *Ledger) AddInput(ctx context.Context, in Input) (AddInputResult, error) {
	if in.Pipeline == "" || strings.TrimSpace(in.Ref) == "" {
		return AddInputResult{}, invalid("an input needs a pipeline and a reference, got pipeline %q and reference %q", in.Pipeline, in.Ref)
	}
	if len(in.Ref) > 200 {
		return AddInputResult{}, invalid("input reference %.40q... is %d bytes: keep it under 200 and put the rest in the payload", in.Ref, len(in.Ref))
	}
	payload, err := compactPayload(in.Payload)
	if err != nil {
		return AddInputResult{}, err
	}
	// No ready time: now for a new input; an existing one keeps its own,
	// so adding it again with the same payload is the no-op it promises.
	readyGiven := !in.ReadyAt.IsZero()
	if !readyGiven {
		in.ReadyAt = now()
	}
	in.ReadyAt = normTime(in.ReadyAt)
	var out AddInputResult
	err = l.writeTx(ctx, func(tx *sql.Tx) error {
		if err := l.lockPipelineTx(ctx, tx, in.Pipeline); err != nil {
			return err
		}
		had, err := l.inputTx(ctx, tx, in.Pipeline, in.Ref)
		switch {
		case err == nil:
			if readyGiven && !had.ReadyAt.Equal(in.ReadyAt) || !bytes.Equal(had.Payload, payload) {
				return fmt.Errorf("%w: pipeline %s already has input %q, ready at %s with payload %s; this one is ready at %s with payload %s: add it under a new reference",
					ErrInputConflict, in.Pipeline, in.Ref, had.ReadyAt.Format(time.RFC3339Nano), payloadText(had.Payload), in.ReadyAt.Format(time.RFC3339Nano), payloadText(payload))
			}
			out = AddInputResult{Input: had}
			return nil
		case !errors.Is(err, ErrInputNotFound):
			return err
		}
		added := Input{Pipeline: in.Pipeline, Ref: in.Ref, ReadyAt: in.ReadyAt, Payload: payload, State: InputReady, AddedAt: now()}
		if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO inputs (pipeline, ref, ready_at, payload, state, added_at) VALUES (?, ?, ?, ?, ?, ?)`),
			added.Pipeline, added.Ref, l.d.timeArg(added.ReadyAt), string(payload), string(InputReady), l.d.timeArg(added.AddedAt)); err != nil {
			return fmt.Errorf("ledger %s: add input %q of %s: %w", l.where, in.Ref, in.Pipeline, err)
		}
		out = AddInputResult{Input: added, Added: true}
		return nil
	})
	return out, err
}

// WithdrawInput withdraws an input no episode has claimed; withdrawing a
// withdrawn input changes nothing. A claimed input is ErrInputClaimed.
func (l *Ledger) WithdrawInput(ctx context.Context, pipeline, ref string) (Input, error) {
	var out Input
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		// Under the pipeline's lock, as the claim is: a withdrawal and a
		// claim of one input are one after the other.
		if err := l.lockPipelineTx(ctx, tx, pipeline); err != nil {
			return err
		}
		in, err := l.inputTx(ctx, tx, pipeline, ref)
		if err != nil {
			return err
		}
		switch in.State {
		case InputWithdrawn:
			out = in
			return nil
		case InputClaimed:
			return fmt.Errorf("%w: input %q of %s was claimed by episode %s at %s: it is that episode's now",
				ErrInputClaimed, ref, pipeline, in.EpisodeID, in.ClaimedAt.Format(time.RFC3339))
		}
		at := now()
		if _, err := tx.ExecContext(ctx, l.d.q(`UPDATE inputs SET state = ?, withdrawn_at = ? WHERE pipeline = ? AND ref = ? AND state = ?`),
			string(InputWithdrawn), l.d.timeArg(at), pipeline, ref, string(InputReady)); err != nil {
			return fmt.Errorf("ledger %s: withdraw input %q of %s: %w", l.where, ref, pipeline, err)
		}
		in.State, in.WithdrawnAt = InputWithdrawn, at
		out = in
		return nil
	})
	return out, err
}

// Inputs lists a pipeline's inputs in the order they are claimed (ready
// time, then reference); state "" lists every state.
func (l *Ledger) Inputs(ctx context.Context, pipeline string, state InputState) ([]Input, error) {
	if pipeline == "" {
		return nil, invalid("listing inputs needs a pipeline")
	}
	q, args := `SELECT `+inputCols+` FROM inputs WHERE pipeline = ?`, []any{pipeline}
	if state != "" {
		q, args = q+` AND state = ?`, append(args, string(state))
	}
	rows, err := l.r.QueryContext(ctx, l.d.q(q+` ORDER BY ready_at, ref`), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: list inputs of %s: %w", l.where, pipeline, err)
	}
	return l.scanInputs(rows)
}

// EpisodeInput is the input an episode claimed, or nil.
func (l *Ledger) EpisodeInput(ctx context.Context, pipeline, episodeID string) (*Input, error) {
	return l.episodeInput(ctx, l.r, pipeline, episodeID)
}

func (l *Ledger) episodeInput(ctx context.Context, db querier, pipeline, episodeID string) (*Input, error) {
	rows, err := db.QueryContext(ctx, l.d.q(`SELECT `+inputCols+` FROM inputs WHERE pipeline = ? AND episode_id = ?`), pipeline, episodeID)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read the input of episode %s of %s: %w", l.where, episodeID, pipeline, err)
	}
	ins, err := l.scanInputs(rows)
	if err != nil || len(ins) == 0 {
		return nil, err
	}
	return &ins[0], nil
}

func (l *Ledger) inputTx(ctx context.Context, tx *sql.Tx, pipeline, ref string) (Input, error) {
	rows, err := tx.QueryContext(ctx, l.d.q(`SELECT `+inputCols+` FROM inputs WHERE pipeline = ? AND ref = ?`), pipeline, ref)
	if err != nil {
		return Input{}, fmt.Errorf("ledger %s: read input %q of %s: %w", l.where, ref, pipeline, err)
	}
	ins, err := l.scanInputs(rows)
	if err != nil {
		return Input{}, err
	}
	if len(ins) == 0 {
		return Input{}, fmt.Errorf("%w: pipeline %s has no input %q: list them with `%s`", ErrInputNotFound, pipeline, ref, allot.InputListCommand(pipeline))
	}
	return ins[0], nil
}

// oldestReady finds, inside the allocation's transaction (under the
// pipeline's lock), the pipeline's oldest input ready by asOf; nil if none
// is. Ready by the run's nominal time, not the wall clock: a retried or
// backfilled run sees the inputs its slot saw.
func (l *Ledger) oldestReady(ctx context.Context, tx *sql.Tx, pipeline string, asOf time.Time) (*Input, error) {
	rows, err := tx.QueryContext(ctx, l.d.q(`SELECT `+inputCols+` FROM inputs
		WHERE pipeline = ? AND state = 'ready' AND ready_at <= ? ORDER BY ready_at, ref LIMIT 1`), pipeline, l.d.timeArg(asOf))
	if err != nil {
		return nil, fmt.Errorf("ledger %s: find the oldest ready input of %s: %w", l.where, pipeline, err)
	}
	ins, err := l.scanInputs(rows)
	if err != nil || len(ins) == 0 {
		return nil, err
	}
	return &ins[0], nil
}

// claimInput gives in to the episode just inserted, in the same
// transaction.
func (l *Ledger) claimInput(ctx context.Context, tx *sql.Tx, in *Input, episodeID string) error {
	at := now()
	res, err := tx.ExecContext(ctx, l.d.q(`UPDATE inputs SET state = ?, episode_id = ?, claimed_at = ? WHERE pipeline = ? AND ref = ? AND state = ?`),
		string(InputClaimed), episodeID, l.d.timeArg(at), in.Pipeline, in.Ref, string(InputReady))
	if err != nil {
		return fmt.Errorf("ledger %s: claim input %q of %s for episode %s: %w", l.where, in.Ref, in.Pipeline, episodeID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		// Under the pipeline's lock nothing else claims: a writer that
		// bypassed the lock did. The retry sees its row.
		return fmt.Errorf("ledger %s: input %q of %s changed under the allocation's lock (%d rows, %v): retry", l.where, in.Ref, in.Pipeline, n, err)
	}
	in.State, in.EpisodeID, in.ClaimedAt = InputClaimed, episodeID, at
	return nil
}

// lockPipelineTx takes the pipeline's allocation lock in tx (PostgreSQL;
// SQLite has one writer).
func (l *Ledger) lockPipelineTx(ctx context.Context, tx *sql.Tx, pipeline string) error {
	if l.d.lockPipeline == "" {
		return nil
	}
	if _, err := tx.ExecContext(ctx, l.d.q(l.d.lockPipeline), lockKey(pipeline)); err != nil {
		return fmt.Errorf("ledger %s: lock pipeline %q: %w", l.where, pipeline, err)
	}
	return nil
}

func (l *Ledger) scanInputs(rows *sql.Rows) ([]Input, error) {
	defer rows.Close()
	var out []Input
	for rows.Next() {
		var (
			in             Input
			payload, state string
			episode        sql.NullString
		)
		if err := rows.Scan(&in.Pipeline, &in.Ref, dbTime{&in.ReadyAt}, &payload, &state, &episode,
			dbTime{&in.AddedAt}, dbTime{&in.ClaimedAt}, dbTime{&in.WithdrawnAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: read input: %w", l.where, err)
		}
		if payload != "" {
			in.Payload = json.RawMessage(payload)
		}
		in.State, in.EpisodeID = InputState(state), episode.String
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read inputs: %w", l.where, err)
	}
	return out, nil
}

func compactPayload(p json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(p)) == 0 {
		return nil, nil
	}
	if len(p) > MaxInputPayload {
		return nil, invalid("the input's payload is %d bytes, more than %d: put large data in a file and name it in the payload", len(p), MaxInputPayload)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, p); err != nil {
		return nil, invalid("the input's payload is not JSON (%v): give a JSON value, e.g. {\"title\": \"...\"}", err)
	}
	return b.Bytes(), nil
}

func payloadText(p json.RawMessage) string {
	if len(p) == 0 {
		return "(none)"
	}
	if len(p) > 80 {
		return string(p[:80]) + "..."
	}
	return string(p)
}
