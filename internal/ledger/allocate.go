package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"allot"
)

// Decision is what Allocate did for a key.
type Decision string

// Allocation decisions, the run outcomes of the vocabulary; each comes with
// one reason.
const (
	DecisionAllocated = Decision(allot.OutcomeAllocated) // reason new_episode
	DecisionReused    = Decision(allot.OutcomeReused)    // reason key_bound
	DecisionSkipped   = Decision(allot.OutcomeSkipped)   // reason cap_reached or no_ready_input
)

// Allocation reasons.
const (
	ReasonNewEpisode   = allot.ReasonNewEpisode
	ReasonKeyBound     = allot.ReasonKeyBound
	ReasonCapReached   = allot.ReasonCapReached
	ReasonNoReadyInput = allot.ReasonNoReadyInput
)

// AllocateInput asks for the episode owned by one logical run.
type AllocateInput struct {
	Pipeline     string
	Key          string
	Period       string // computed by the caller from the nominal time
	NominalTime  time.Time
	MaxPerPeriod int // 0 = unlimited
	// RunID is the run asking (the ScheduledRun's run ID). The run that
	// allocates an episode gets allocated/new_episode again if it asks
	// again (its first answer was lost); any other run gets reused.
	RunID string
	// ClaimInput: the pipeline consumes inputs; a new episode claims the
	// oldest input ready by NominalTime, or the run is skipped with
	// no_ready_input.
	ClaimInput bool
}

// AllocateResult is the ledger's decision for a key.
type AllocateResult struct {
	Decision Decision
	Reason   string
	Episode  Episode // zero value when skipped
	// Input is the input the episode claimed (ClaimInput), nil otherwise.
	Input *Input
}

const episodeCols = `pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status, completed_at,
	outcome, outcome_reason, allocated_by_run, outcome_at`

// Allocate's statements, prepared once per writer connection (see
// stmtCache). Each is served by the unique indexes named below, so its cost
// does not grow with the ledger's history. (PostgreSQL chooses them from
// statistics: on a table autovacuum has not analyzed yet, its first minute
// or so, it may read the key through the (pipeline, created_at) index.)
const (
	// allocProbe reads in one statement what a new key's allocation needs:
	// the period's last sequence (NULL if the period is empty), by reading
	// the (pipeline, period, sequence) unique index backwards for one entry,
	// and whether the key is bound, by a seek in the key's unique index.
	allocProbe = `SELECT
		(SELECT sequence FROM episodes WHERE pipeline = ? AND period = ? ORDER BY sequence DESC LIMIT 1),
		CASE WHEN EXISTS (SELECT 1 FROM episodes WHERE pipeline = ? AND allocation_key = ?) THEN 1 ELSE 0 END`
	// allocProbeCapped also counts the period's episodes for the cap:
	// counted rather than derived from the last sequence so that the cap
	// holds even on imported data with duplicates; the count is over one
	// period's index range, which the cap keeps small.
	allocProbeCapped = allocProbe + `,
		(SELECT COUNT(*) FROM episodes WHERE pipeline = ? AND period = ?)`
	allocInsert = `INSERT INTO episodes
		(pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status, allocated_by_run)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// allocBound reads the episodes bound to a key. LIMIT 2: one row more
	// than a sound ledger has is enough to refuse.
	allocBound = `SELECT ` + episodeCols + ` FROM episodes WHERE pipeline = ? AND allocation_key = ? LIMIT 2`
)

// Allocate binds in.Key to an episode, or returns the episode it is already
// bound to. It runs in a transaction that takes the pipeline's write lock
// before its first read (invariant 5), so concurrent calls for one pipeline
// see each other's results: the same key always gets the same episode
// (invariant 1) and new episodes get dense sequences (invariant 2). A key
// bound in another period (invariant 3) or to several episodes (invariant 4)
// fails with nothing written. Every query is an index seek, so the cost does
// not grow with the ledger's history.
//
// Concurrent calls share a transaction (group commit, allocbatch.go): each
// is decided in arrival order under the one lock, and a call that fails
// writes nothing and fails no other call. If the shared transaction cannot
// commit, every call in it fails with that error; a retry is safe, since a
// key gets the same answer every time. A caller whose ctx ends while it
// waits returns ctx's error at once; if its call was already in a
// transaction, that call may still commit, and its retry gets the episode
// back.
//
// A new key costs two prepared statements under the lock: one read of the
// period's last sequence and of whether the key is bound (and of the
// period's count when capped), and the insert. Only a bound key reads its
// episodes.
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
	if l.readOnly || l.alloc.off {
		// writeTx refuses a read-only ledger with its own message.
		return l.allocateAlone(ctx, in)
	}
	return l.allocateBatched(ctx, in)
}

// allocStmts are Allocate's statements, prepared on the writer pool; lock
// is nil where BEGIN already takes the pipeline's lock (SQLite).
type allocStmts struct {
	lock, probe, probeCapped, insert, bound *sql.Stmt
}

// allocStatements prepares (once per pool, see stmtCache) Allocate's
// statements. It must run before the transaction: on SQLite the first
// preparation needs the single writer connection, which the transaction
// would hold.
func (l *Ledger) allocStatements(ctx context.Context) (*allocStmts, error) {
	var (
		st  allocStmts
		err error
	)
	if l.d.lockPipeline != "" {
		st.lock, err = l.prepared(ctx, l.d.lockPipeline)
	}
	for _, p := range []struct {
		stmt  **sql.Stmt
		query string
	}{{&st.probe, allocProbe}, {&st.probeCapped, allocProbeCapped}, {&st.insert, allocInsert}, {&st.bound, allocBound}} {
		if err == nil {
			*p.stmt, err = l.prepared(ctx, p.query)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ledger %s: prepare allocation: %w", l.where, err)
	}
	return &st, nil
}

// lockAllocation takes pipeline's allocation lock first in tx (PostgreSQL;
// on SQLite BEGIN IMMEDIATE took the database's).
func (l *Ledger) lockAllocation(ctx context.Context, tx *sql.Tx, st *allocStmts, pipeline string) error {
	if st.lock == nil {
		return nil
	}
	if _, err := tx.StmtContext(ctx, st.lock).ExecContext(ctx, lockKey(pipeline)); err != nil {
		return fmt.Errorf("ledger %s: lock pipeline %q: %w", l.where, pipeline, err)
	}
	return nil
}

// allocateAlone is Allocate in a transaction of its own.
func (l *Ledger) allocateAlone(ctx context.Context, in AllocateInput) (AllocateResult, error) {
	// A read-only ledger prepares nothing; writeTx refuses it.
	st := &allocStmts{}
	if !l.readOnly {
		var err error
		if st, err = l.allocStatements(ctx); err != nil {
			return AllocateResult{}, err
		}
	}
	var res AllocateResult
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		if err := l.lockAllocation(ctx, tx, st, in.Pipeline); err != nil {
			return err
		}
		var err error
		res, err = l.allocateTx(ctx, tx, st, in)
		return err
	})
	if err != nil {
		return AllocateResult{}, err
	}
	l.alloc.txs.Add(1)
	return res, nil
}

// allocateTx decides and saves one allocation in tx, which holds the
// pipeline's lock. On error the caller rolls back what it wrote; but
// ErrKeyCrossesPeriod and ErrKeyAmbiguous are decided before anything is
// written and after no failed statement, so tx goes on as it was (group
// commit relies on it).
func (l *Ledger) allocateTx(ctx context.Context, tx *sql.Tx, st *allocStmts, in AllocateInput) (AllocateResult, error) {
	capped := in.MaxPerPeriod > 0
	var (
		last          sql.NullInt64
		isBound, size int
		err           error
	)
	if capped {
		err = tx.StmtContext(ctx, st.probeCapped).QueryRowContext(ctx, in.Pipeline, in.Period, in.Pipeline, in.Key, in.Pipeline, in.Period).
			Scan(&last, &isBound, &size)
	} else {
		err = tx.StmtContext(ctx, st.probe).QueryRowContext(ctx, in.Pipeline, in.Period, in.Pipeline, in.Key).
			Scan(&last, &isBound)
	}
	if err != nil {
		return AllocateResult{}, fmt.Errorf("ledger %s: read the last sequence of %s/%s and the binding of key %q: %w", l.where, in.Pipeline, in.Period, in.Key, err)
	}

	if isBound != 0 {
		rows, err := tx.StmtContext(ctx, st.bound).QueryContext(ctx, in.Pipeline, in.Key)
		if err != nil {
			return AllocateResult{}, fmt.Errorf("ledger %s: query episodes: %w", l.where, err)
		}
		eps, err := l.scanEpisodes(rows)
		if err != nil {
			return AllocateResult{}, err
		}
		switch {
		case len(eps) > 1:
			return AllocateResult{}, ambiguous(in.Pipeline, in.Key, eps)
		case len(eps) == 1 && eps[0].Period == in.Period:
			res := AllocateResult{Decision: DecisionReused, Reason: ReasonKeyBound, Episode: eps[0]}
			if in.RunID != "" && eps[0].AllocatedByRun == in.RunID {
				// The allocating run again: its first answer was lost.
				res.Decision, res.Reason = DecisionAllocated, ReasonNewEpisode
			}
			if in.ClaimInput {
				if res.Input, err = l.episodeInput(ctx, tx, in.Pipeline, eps[0].ID); err != nil {
					return AllocateResult{}, err
				}
			}
			return res, nil
		case len(eps) == 1:
			return AllocateResult{}, fmt.Errorf("%w: key %q of pipeline %q is bound to episode %s in period %s but was asked for period %s: a key belongs to one period forever; check the run's nominal time, or start the run under a new key",
				ErrKeyCrossesPeriod, in.Key, in.Pipeline, eps[0].ID, eps[0].Period, in.Period)
		}
		// Seen bound a statement ago under the lock: only a writer that
		// bypassed the lock can have removed it.
		return AllocateResult{}, fmt.Errorf("ledger %s: key %q of pipeline %q was bound and is no longer: retry the allocation", l.where, in.Key, in.Pipeline)
	}

	if capped && size >= in.MaxPerPeriod {
		return AllocateResult{Decision: DecisionSkipped, Reason: ReasonCapReached}, nil
	}

	var claim *Input
	if in.ClaimInput {
		if claim, err = l.oldestReady(ctx, tx, in.Pipeline, in.NominalTime); err != nil {
			return AllocateResult{}, err
		}
		if claim == nil {
			return AllocateResult{Decision: DecisionSkipped, Reason: ReasonNoReadyInput}, nil
		}
	}

	seq := 0
	if last.Valid {
		seq = int(last.Int64) + 1
	}
	ep := Episode{
		Pipeline:       in.Pipeline,
		ID:             EpisodeID(in.Period, seq),
		Period:         in.Period,
		Sequence:       seq,
		AllocationKey:  in.Key,
		NominalTime:    normTime(in.NominalTime),
		CreatedAt:      now(),
		Status:         EpisodeAllocated,
		AllocatedByRun: in.RunID,
	}
	if _, err := tx.StmtContext(ctx, st.insert).ExecContext(ctx,
		ep.Pipeline, ep.ID, ep.Period, ep.Sequence, ep.AllocationKey,
		l.d.timeArg(ep.NominalTime), l.d.timeArg(ep.CreatedAt), string(ep.Status), ep.AllocatedByRun); err != nil {
		// Under the lock this means a writer bypassed it; the unique
		// indexes kept the data sound and a retry will see its row.
		return AllocateResult{}, fmt.Errorf("ledger %s: insert episode %s for key %q of pipeline %q: %w", l.where, ep.ID, in.Key, in.Pipeline, err)
	}
	if claim != nil {
		if err := l.claimInput(ctx, tx, claim, ep.ID); err != nil {
			return AllocateResult{}, err
		}
	}
	return AllocateResult{Decision: DecisionAllocated, Reason: ReasonNewEpisode, Episode: ep, Input: claim}, nil
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

// queryStrings runs a query of one text column and returns its values; what
// names the query in errors.
func (l *Ledger) queryStrings(ctx context.Context, db querier, what, query string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, l.d.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %s: %w", l.where, what, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("ledger %s: %s: %w", l.where, what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: %s: %w", l.where, what, err)
	}
	return out, nil
}

// queryEpisodes runs a shared query selecting episodeCols.
func (l *Ledger) queryEpisodes(ctx context.Context, db querier, query string, args ...any) ([]Episode, error) {
	rows, err := db.QueryContext(ctx, l.d.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: query episodes: %w", l.where, err)
	}
	return l.scanEpisodes(rows)
}

// scanEpisodes reads rows of episodeCols and closes them.
func (l *Ledger) scanEpisodes(rows *sql.Rows) ([]Episode, error) {
	defer rows.Close()
	var eps []Episode
	for rows.Next() {
		var (
			e      Episode
			status string
		)
		if err := rows.Scan(&e.Pipeline, &e.ID, &e.Period, &e.Sequence, &e.AllocationKey,
			dbTime{&e.NominalTime}, dbTime{&e.CreatedAt}, &status, dbTime{&e.CompletedAt},
			&e.Outcome, &e.OutcomeReason, &e.AllocatedByRun, dbTime{&e.OutcomeAt}); err != nil {
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
