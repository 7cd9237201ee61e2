package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Violation kinds: short, stable words a script can match on. The first
// group is the allocation and paid-task invariants Check verifies (their
// invariant number of docs/design.md is set too); the rest are found by
// Audit.
const (
	KindKeyAmbiguous      = "key_ambiguous"       // invariant 1: a key bound to several episodes
	KindSequenceDuplicate = "sequence_duplicate"  // invariant 2
	KindSequenceGap       = "sequence_gap"        // invariant 2
	KindKeyCrossesPeriod  = "key_crosses_period"  // invariant 3
	KindNoReference       = "no_reference"        // invariant 7: submitted, succeeded or failed without a remote reference
	KindReferenceShared   = "reference_shared"    // invariant 7
	KindIdempotencyShared = "idempotency_shared"  // invariant 7
	KindCostOrphan        = "cost_orphan"         // invariant 8: a cost entry no paid task holds the reference of
	KindCostMisbooked     = "cost_misbooked"      // invariant 8: booked to another task than the reference's
	KindCostMissing       = "cost_missing"        // a paid step's reference without its cost entry
	KindCostOnEffect      = "cost_on_effect"      // an effect step's reference with a cost entry
	KindUnknownOutcome    = "unknown_outcome"     // an intent older than the threshold without a reference
	KindPastHorizon       = "intent_past_horizon" // an intent older than its vendor keeps idempotency keys
	KindNoOutcome         = "no_outcome"          // an episode without an outcome
	KindNoReason          = "no_reason"           // an episode outcome without its reason
	KindStepIncomplete    = "step_incomplete"     // a completed episode with a step of its plan not done
	KindPlanInvalid       = "plan_invalid"        // a pinned plan that is not a list of steps
	KindRunLost           = "run_lost"            // an episode whose key has no recorded run outcome
	KindRunNoReason       = "run_no_reason"       // a run outcome without its reason
	KindRunEpisodeMissing = "run_episode_missing" // a run outcome naming an episode the ledger does not have
	KindAllocatedRuns     = "allocated_runs"      // an episode not recorded as allocated by exactly one run
	KindImportEpisode     = "import_episode"      // import metadata whose episode is missing
	KindCostOutOfRange    = "cost_out_of_range"   // a cost entry above allot.MaxAmount, or totals that overflow
	KindImportKey         = "import_key"          // an imported episode whose key is not its time's scheduled key (or, not scheduled, <pipeline>/legacy/<old id>)
	KindImportMetadata    = "import_metadata"     // a legacy-keyed episode without import metadata or runs
	KindArtifactMissing   = "artifact_missing"    // a file the ledger names that cannot be read (report.Check)
	KindArtifactMismatch  = "artifact_mismatch"   // a file whose sha256 is not the ledger's (report.Check)
	KindChargeUnrecorded  = "charge_unrecorded"   // a vendor charge the ledger has no cost for (check --vendor)
	KindCostUncharged     = "cost_uncharged"      // a ledger cost the vendor did not charge (check --vendor)
	KindAmountDiffers     = "amount_differs"      // a cost whose amount or currency is not the vendor's (check --vendor)
)

// Violation is one problem found in stored data: what kind it is, where
// (pipeline, episode), what exactly, and the command that fixes it ("" when
// only a person can decide; the detail then says what to look at).
type Violation struct {
	Kind      string `json:"kind"`
	Invariant int    `json:"invariant,omitempty"` // 1, 2, 3, 7 or 8 as numbered in docs/design.md, for Check's kinds
	Pipeline  string `json:"pipeline"`
	Episode   string `json:"episode,omitempty"`
	Detail    string `json:"detail"` // human readable, names key/period/episodes
	Fix       string `json:"fix"`
}

func (v Violation) String() string {
	s := fmt.Sprintf("%s, pipeline %q", v.Kind, v.Pipeline)
	if v.Invariant != 0 {
		s = fmt.Sprintf("%s (invariant %d), pipeline %q", v.Kind, v.Invariant, v.Pipeline)
	}
	if v.Episode != "" {
		s += ", episode " + v.Episode
	}
	s += ": " + v.Detail
	if v.Fix != "" {
		s += "; fix: " + v.Fix
	}
	return s
}

// SortViolations orders violations by pipeline, kind, episode and detail.
func SortViolations(vs []Violation) {
	slices.SortStableFunc(vs, func(a, b Violation) int {
		return cmp.Or(strings.Compare(a.Pipeline, b.Pipeline), strings.Compare(a.Kind, b.Kind),
			strings.Compare(a.Episode, b.Episode), strings.Compare(a.Detail, b.Detail))
	})
}

// Check verifies invariants 1-4, 7 and 8 over the stored data of one
// pipeline, or of all pipelines when pipeline is "", in one read-only
// transaction. The unique indexes make violations impossible for data
// written by Allocate and the paid-task API; Check exists for imported or
// legacy data and for operators who want proof. Audit runs it with every
// other check.
//
// A key bound to several episodes breaks invariant 1 and is exactly the case
// invariant 4 (no guessing) guards: it is reported once, as invariant 1, and
// Allocate refuses the key with ErrKeyAmbiguous. If those episodes lie in
// different periods it is reported as invariant 3 as well. Gaps and
// duplicate sequences in a period are invariant 2.
//
// Invariant 7: a paid task that is submitted, succeeded or failed without a
// remote reference; a remote reference or an idempotency key shared by
// several paid tasks (reported for each pipeline involved). Invariant 8: a
// cost entry whose remote reference no paid task has, or that is booked to
// another task than the one holding the reference.
//
// Check reads the whole table (grouped in SQL); it is an audit, not part of
// the allocation path.
func (l *Ledger) Check(ctx context.Context, pipeline string) ([]Violation, error) {
	var out []Violation
	err := l.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = l.checkInvariants(ctx, tx, pipeline)
		return err
	})
	if err != nil {
		return nil, err
	}
	SortViolations(out)
	return out, nil
}

// readTx runs fn in one read-only transaction on the read pool: a
// consistent view of the ledger that cannot write (PostgreSQL: READ ONLY,
// REPEATABLE READ; SQLite: a read transaction on the query_only pool). It is
// always rolled back.
func (l *Ledger) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	opts := &sql.TxOptions{ReadOnly: true}
	if l.d.name == postgresDialect.name {
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := l.r.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("ledger %s: begin read-only transaction: %w", l.where, err)
	}
	defer func() { _ = tx.Rollback() }()
	return fn(tx)
}

func (l *Ledger) checkInvariants(ctx context.Context, tx *sql.Tx, pipeline string) ([]Violation, error) {
	filter, args := "", []any(nil)
	if pipeline != "" {
		filter, args = ` WHERE pipeline = ?`, []any{pipeline}
	}
	var out []Violation
	keys, err := l.checkKeys(ctx, tx, filter, args)
	if err != nil {
		return nil, err
	}
	out = append(out, keys...)
	seqs, err := l.checkSequences(ctx, tx, filter, args)
	if err != nil {
		return nil, err
	}
	out = append(out, seqs...)
	paid, err := l.checkPaid(ctx, tx, pipeline)
	if err != nil {
		return nil, err
	}
	return append(out, paid...), nil
}

// checkKeys finds keys bound to more than one episode (invariants 1 and 3).
func (l *Ledger) checkKeys(ctx context.Context, tx *sql.Tx, filter string, args []any) ([]Violation, error) {
	type group struct {
		pipeline, key string
		n, periods    int
	}
	var groups []group
	rows, err := tx.QueryContext(ctx, l.d.q(`SELECT pipeline, allocation_key, COUNT(*), COUNT(DISTINCT period)
		FROM episodes`+filter+` GROUP BY pipeline, allocation_key HAVING COUNT(*) > 1`), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: check keys: %w", l.where, err)
	}
	for rows.Next() {
		var g group
		if err := rows.Scan(&g.pipeline, &g.key, &g.n, &g.periods); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ledger %s: check keys: %w", l.where, err)
		}
		groups = append(groups, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: check keys: %w", l.where, err)
	}

	var out []Violation
	for _, g := range groups {
		eps, err := l.queryEpisodes(ctx, tx, `SELECT `+episodeCols+` FROM episodes
			WHERE pipeline = ? AND allocation_key = ? ORDER BY period, sequence, episode_id`, g.pipeline, g.key)
		if err != nil {
			return nil, err
		}
		ids := make([]string, len(eps))
		inPeriod := make([]string, len(eps))
		for i, e := range eps {
			ids[i] = e.ID
			inPeriod[i] = e.Period + " (" + e.ID + ")"
		}
		out = append(out, Violation{
			Kind:      KindKeyAmbiguous,
			Invariant: 1,
			Pipeline:  g.pipeline,
			Detail: fmt.Sprintf("key %q is bound to %d episodes: %s; Allocate refuses it as ambiguous until an operator keeps one and re-keys or removes the others",
				g.key, len(eps), strings.Join(ids, ", ")),
		})
		if g.periods > 1 {
			out = append(out, Violation{
				Kind:      KindKeyCrossesPeriod,
				Invariant: 3,
				Pipeline:  g.pipeline,
				Detail:    fmt.Sprintf("key %q is bound in %d periods: %s", g.key, g.periods, strings.Join(inPeriod, ", ")),
			})
		}
	}
	return out, nil
}

// checkSequences finds periods whose sequences are not exactly 0..n-1
// (invariant 2). A period is dense exactly when it has no duplicate, starts
// at 0 and ends at n-1, which SQL can test per group without listing rows.
func (l *Ledger) checkSequences(ctx context.Context, tx *sql.Tx, filter string, args []any) ([]Violation, error) {
	type group struct{ pipeline, period string }
	var groups []group
	rows, err := tx.QueryContext(ctx, l.d.q(`SELECT pipeline, period FROM episodes`+filter+`
		GROUP BY pipeline, period
		HAVING COUNT(*) <> COUNT(DISTINCT sequence) OR MIN(sequence) <> 0 OR MAX(sequence) <> COUNT(*) - 1`), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: check sequences: %w", l.where, err)
	}
	for rows.Next() {
		var g group
		if err := rows.Scan(&g.pipeline, &g.period); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ledger %s: check sequences: %w", l.where, err)
		}
		groups = append(groups, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: check sequences: %w", l.where, err)
	}

	var out []Violation
	for _, g := range groups {
		eps, err := l.queryEpisodes(ctx, tx, `SELECT `+episodeCols+` FROM episodes
			WHERE pipeline = ? AND period = ? ORDER BY sequence, episode_id`, g.pipeline, g.period)
		if err != nil {
			return nil, err
		}
		bySeq := map[int][]string{}
		maxSeq := -1
		for _, e := range eps {
			bySeq[e.Sequence] = append(bySeq[e.Sequence], e.ID)
			maxSeq = max(maxSeq, e.Sequence)
		}
		var dups []string
		for _, e := range eps {
			if ids := bySeq[e.Sequence]; len(ids) > 1 && ids[0] == e.ID {
				dups = append(dups, fmt.Sprintf("sequence %d is used by %s", e.Sequence, strings.Join(ids, ", ")))
			}
		}
		if len(dups) > 0 {
			out = append(out, Violation{
				Kind:      KindSequenceDuplicate,
				Invariant: 2,
				Pipeline:  g.pipeline,
				Detail:    fmt.Sprintf("period %s has duplicate sequences: %s", g.period, strings.Join(dups, "; ")),
			})
		}
		// Missing numbers are listed as ranges and the list is capped: one
		// stray sequence of 10^9 must cost neither a billion-step loop nor
		// a billion-entry message.
		const listed = 20
		var missing []string
		nMissing, ranges, prev := 0, 0, -1
		for _, e := range eps { // ordered by sequence
			if from, to := prev+1, e.Sequence-1; from <= to {
				nMissing += to - from + 1
				ranges++
				if ranges <= listed {
					if from == to {
						missing = append(missing, strconv.Itoa(from))
					} else {
						missing = append(missing, fmt.Sprintf("%d..%d", from, to))
					}
				}
			}
			prev = max(prev, e.Sequence)
		}
		if nMissing > 0 {
			list := strings.Join(missing, ", ")
			if ranges > listed {
				list += ", ..."
			}
			out = append(out, Violation{
				Kind:      KindSequenceGap,
				Invariant: 2,
				Pipeline:  g.pipeline,
				Detail:    fmt.Sprintf("period %s has gaps in its sequences 0..%d: %d missing: %s", g.period, maxSeq, nMissing, list),
			})
		}
	}
	return out, nil
}

// checkPaid finds broken paid tasks and cost entries (invariants 7 and 8).
func (l *Ledger) checkPaid(ctx context.Context, tx *sql.Tx, pipeline string) ([]Violation, error) {
	var out []Violation

	// Past intent without a remote reference: a retry cannot resume it.
	q, args := `SELECT `+paidTaskCols+` FROM paid_tasks
		WHERE state IN ('submitted', 'succeeded', 'failed') AND remote_ref = ''`, []any(nil)
	if pipeline != "" {
		q, args = q+` AND pipeline = ?`, append(args, pipeline)
	}
	noRef, err := l.queryPaidTasks(ctx, tx, q+` ORDER BY pipeline, episode_id, step, revision`, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: check paid tasks: %w", l.where, err)
	}
	for _, t := range noRef {
		out = append(out, Violation{
			Kind:      KindNoReference,
			Invariant: 7,
			Pipeline:  t.Pipeline,
			Episode:   t.EpisodeID,
			Detail: fmt.Sprintf("%s is %s without a remote reference: a retry cannot resume it; find the vendor's reference by idempotency key %q and record it",
				describe(t.PaidTaskRef), t.State, t.IdempotencyKey),
		})
	}

	// One reference or key on several tasks. Grouped over all pipelines,
	// so that a clash across pipelines is found by either pipeline's audit.
	for _, col := range []struct{ name, kind, what, why string }{
		{"remote_ref", KindReferenceShared, "remote reference", "one vendor submission is booked to several paid tasks"},
		{"idempotency_key", KindIdempotencyShared, "idempotency key", "the vendor takes these paid tasks for one and submits only one of them"},
	} {
		values, err := l.sharedValues(ctx, tx, col.name)
		if err != nil {
			return nil, err
		}
		for _, v := range values {
			ts, err := l.queryPaidTasks(ctx, tx, `SELECT `+paidTaskCols+` FROM paid_tasks
				WHERE `+col.name+` = ? AND `+col.name+` <> '' ORDER BY pipeline, episode_id, step, revision`, v)
			if err != nil {
				return nil, fmt.Errorf("ledger %s: check paid tasks: %w", l.where, err)
			}
			names := make([]string, len(ts))
			var pipelines []string
			for i, t := range ts {
				names[i] = describe(t.PaidTaskRef)
				if (pipeline == "" || t.Pipeline == pipeline) && !slices.Contains(pipelines, t.Pipeline) {
					pipelines = append(pipelines, t.Pipeline)
				}
			}
			for _, p := range pipelines {
				out = append(out, Violation{
					Kind:      col.kind,
					Invariant: 7,
					Pipeline:  p,
					Detail: fmt.Sprintf("%s %q is shared by %d paid tasks: %s; %s",
						col.what, v, len(ts), strings.Join(names, ", "), col.why),
				})
			}
		}
	}

	// Cost entries without their paid task, or booked to another one.
	q, args = `SELECT c.remote_ref, c.pipeline, c.episode_id, c.step, c.revision,
			COALESCE(p.pipeline, ''), COALESCE(p.episode_id, ''), COALESCE(p.step, ''), COALESCE(p.revision, -1)
		FROM cost_entries c LEFT JOIN paid_tasks p ON p.remote_ref = c.remote_ref AND p.remote_ref <> ''
		WHERE (p.pipeline IS NULL OR p.pipeline <> c.pipeline OR p.episode_id <> c.episode_id OR p.step <> c.step OR p.revision <> c.revision)`, nil
	if pipeline != "" {
		q, args = q+` AND c.pipeline = ?`, append(args, pipeline)
	}
	rows, err := tx.QueryContext(ctx, l.d.q(q+` ORDER BY c.pipeline, c.remote_ref`), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: check cost entries: %w", l.where, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			ref         string
			booked, got PaidTaskRef
		)
		if err := rows.Scan(&ref, &booked.Pipeline, &booked.EpisodeID, &booked.Step, &booked.Revision,
			&got.Pipeline, &got.EpisodeID, &got.Step, &got.Revision); err != nil {
			return nil, fmt.Errorf("ledger %s: check cost entries: %w", l.where, err)
		}
		kind := KindCostOrphan
		detail := fmt.Sprintf("cost entry for remote reference %q (booked to %s) has no paid task with that reference: a cost must belong to a recorded submission",
			ref, describe(booked))
		if got.Revision >= 0 {
			kind = KindCostMisbooked
			detail = fmt.Sprintf("cost entry for remote reference %q is booked to %s but the reference belongs to %s",
				ref, describe(booked), describe(got))
		}
		out = append(out, Violation{Kind: kind, Invariant: 8, Pipeline: booked.Pipeline, Episode: booked.EpisodeID, Detail: detail})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: check cost entries: %w", l.where, err)
	}
	return out, nil
}

// sharedValues lists the non-empty values of a paid_tasks column held by
// more than one task. col is one of the package's own column names.
func (l *Ledger) sharedValues(ctx context.Context, tx *sql.Tx, col string) ([]string, error) {
	return l.queryStrings(ctx, tx, "check shared "+col, `SELECT `+col+` FROM paid_tasks WHERE `+col+` <> ''
		GROUP BY `+col+` HAVING COUNT(*) > 1 ORDER BY `+col)
}
