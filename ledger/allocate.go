package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Decision is what Allocate did for a key.
type Decision string

// Allocation decisions; each comes with one reason.
const (
	DecisionAllocated Decision = "allocated" // reason "new_episode"
	DecisionReused    Decision = "reused"    // reason "key_bound"
	DecisionSkipped   Decision = "skipped"   // reason "cap_reached"
)

// Allocation reasons.
const (
	ReasonNewEpisode = "new_episode"
	ReasonKeyBound   = "key_bound"
	ReasonCapReached = "cap_reached"
)

// AllocateInput asks for the episode owned by one logical run.
type AllocateInput struct {
	Pipeline     string
	Key          string
	Period       string // computed by the caller from the nominal time
	NominalTime  time.Time
	MaxPerPeriod int // 0 = unlimited
}

// AllocateResult is the ledger's decision for a key.
type AllocateResult struct {
	Decision Decision
	Reason   string
	Episode  Episode // zero value when skipped
}

const episodeCols = `pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status, completed_at,
	outcome, outcome_reason`

// Allocate binds in.Key to an episode, or returns the episode it is already
// bound to. It is one transaction that takes the pipeline's write lock before
// its first read (invariant 5), so concurrent calls for one pipeline see each
// other's results: the same key always gets the same episode (invariant 1)
// and new episodes get dense sequences (invariant 2). A key bound in another
// period (invariant 3) or to several episodes (invariant 4) fails with
// nothing written. Every query is an index seek, so the cost does not grow
// with the ledger's history.
func (l *Ledger) Allocate(ctx context.Context, in AllocateInput) (AllocateResult, error) {
	switch {
	case in.Pipeline == "":
		return AllocateResult{}, invalid("allocation for key %q names no pipeline", in.Key)
	case in.Key == "":
		return AllocateResult{}, invalid("allocation in pipeline %q has an empty allocation key: pass the ScheduledRun workflow ID", in.Pipeline)
	case in.Period == "":
		return AllocateResult{}, invalid("allocation of key %q in pipeline %q has no period: compute it from the nominal time", in.Key, in.Pipeline)
	case in.NominalTime.IsZero():
		return AllocateResult{}, invalid("allocation of key %q in pipeline %q has no nominal time", in.Key, in.Pipeline)
	case in.MaxPerPeriod < 0:
		return AllocateResult{}, invalid("allocation in pipeline %q has a negative cap %d: use 0 for unlimited", in.Pipeline, in.MaxPerPeriod)
	}

	var res AllocateResult
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		if l.d.lockPipeline != "" {
			if _, err := tx.ExecContext(ctx, l.d.q(l.d.lockPipeline), lockKey(in.Pipeline)); err != nil {
				return fmt.Errorf("ledger %s: lock pipeline %q: %w", l.where, in.Pipeline, err)
			}
		}

		// LIMIT 2: one row more than a sound ledger has is enough to refuse.
		bound, err := l.queryEpisodes(ctx, tx,
			`SELECT `+episodeCols+` FROM episodes WHERE pipeline = ? AND allocation_key = ? LIMIT 2`,
			in.Pipeline, in.Key)
		if err != nil {
			return err
		}
		switch {
		case len(bound) > 1:
			return ambiguous(in.Pipeline, in.Key, bound)
		case len(bound) == 1 && bound[0].Period == in.Period:
			res = AllocateResult{Decision: DecisionReused, Reason: ReasonKeyBound, Episode: bound[0]}
			return nil
		case len(bound) == 1:
			ep := bound[0]
			return fmt.Errorf("%w: key %q of pipeline %q is bound to episode %s in period %s but was asked for period %s: a key belongs to one period forever; check the run's nominal time, or start the run under a new key",
				ErrKeyCrossesPeriod, in.Key, in.Pipeline, ep.ID, ep.Period, in.Period)
		}

		if in.MaxPerPeriod > 0 {
			// Counted rather than derived from max(sequence) so that the cap
			// holds even on imported data with duplicates; the scan is over
			// one period's index range, which the cap keeps small.
			var n int
			if err := tx.QueryRowContext(ctx, l.d.q(`SELECT COUNT(*) FROM episodes WHERE pipeline = ? AND period = ?`),
				in.Pipeline, in.Period).Scan(&n); err != nil {
				return fmt.Errorf("ledger %s: count episodes of %s/%s: %w", l.where, in.Pipeline, in.Period, err)
			}
			if n >= in.MaxPerPeriod {
				res = AllocateResult{Decision: DecisionSkipped, Reason: ReasonCapReached}
				return nil
			}
		}

		// A lone MAX over the (pipeline, period, sequence) unique index is a
		// single seek on both databases.
		var maxSeq sql.NullInt64
		if err := tx.QueryRowContext(ctx, l.d.q(`SELECT MAX(sequence) FROM episodes WHERE pipeline = ? AND period = ?`),
			in.Pipeline, in.Period).Scan(&maxSeq); err != nil {
			return fmt.Errorf("ledger %s: read last sequence of %s/%s: %w", l.where, in.Pipeline, in.Period, err)
		}
		seq := 0
		if maxSeq.Valid {
			seq = int(maxSeq.Int64) + 1
		}
		ep := Episode{
			Pipeline:      in.Pipeline,
			ID:            EpisodeID(in.Period, seq),
			Period:        in.Period,
			Sequence:      seq,
			AllocationKey: in.Key,
			NominalTime:   normTime(in.NominalTime),
			CreatedAt:     now(),
			Status:        EpisodeAllocated,
		}
		if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO episodes
			(pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
			ep.Pipeline, ep.ID, ep.Period, ep.Sequence, ep.AllocationKey,
			l.d.timeArg(ep.NominalTime), l.d.timeArg(ep.CreatedAt), string(ep.Status)); err != nil {
			// Under the lock this means a writer bypassed it; the unique
			// indexes kept the data sound and a retry will see its row.
			return fmt.Errorf("ledger %s: insert episode %s for key %q of pipeline %q: %w", l.where, ep.ID, in.Key, in.Pipeline, err)
		}
		res = AllocateResult{Decision: DecisionAllocated, Reason: ReasonNewEpisode, Episode: ep}
		return nil
	})
	if err != nil {
		return AllocateResult{}, err
	}
	return res, nil
}

func ambiguous(pipeline, key string, eps []Episode) error {
	ids := make([]string, len(eps))
	for i, e := range eps {
		ids[i] = e.ID
	}
	return fmt.Errorf("%w: key %q of pipeline %q matches more than one episode (%s, ...): the ledger will not guess; an operator must keep one episode for the key and re-key or remove the others (ledger Check lists them)",
		ErrKeyAmbiguous, key, pipeline, strings.Join(ids, ", "))
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryEpisodes runs a shared query selecting episodeCols.
func (l *Ledger) queryEpisodes(ctx context.Context, db querier, query string, args ...any) ([]Episode, error) {
	rows, err := db.QueryContext(ctx, l.d.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: query episodes: %w", l.where, err)
	}
	defer rows.Close()
	var eps []Episode
	for rows.Next() {
		var (
			e      Episode
			status string
		)
		if err := rows.Scan(&e.Pipeline, &e.ID, &e.Period, &e.Sequence, &e.AllocationKey,
			dbTime{&e.NominalTime}, dbTime{&e.CreatedAt}, &status, dbTime{&e.CompletedAt},
			&e.Outcome, &e.OutcomeReason); err != nil {
			return nil, fmt.Errorf("ledger %s: read episode: %w", l.where, err)
		}
		e.Status = EpisodeStatus(status)
		eps = append(eps, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read episodes: %w", l.where, err)
	}
	return eps, nil
}
