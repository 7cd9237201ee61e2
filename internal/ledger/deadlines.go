package ledger

// Period deadlines (docs/design.md, "Period deadlines"): the deadline each
// pipeline declared and when, and what each judged period came to, once
// per (pipeline, period, kind) however many watchers judge it.
//
// A judgement counts the period's completed episodes and writes its record
// in one transaction, under the period's lock; completing an episode takes
// the same lock and, when the period was recorded late and now has its
// episodes, records when. So a period judged late while its last episode
// completes is either on time or late and then completed late, never late
// for ever.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"allot"
)

// DeadlineDeclaration is the deadline a pipeline declared, as the workers
// read it.
type DeadlineDeclaration struct {
	Pipeline string `json:"pipeline"`
	// Spec is pipeline.DeadlineSpec: the deadline in one canonical line.
	Spec string `json:"spec"`
	// DeclaredAt is when a worker first read a deadline of the pipeline;
	// ChangedAt when it last read another one (DeclaredAt at first).
	// Periods due after ChangedAt are judged.
	DeclaredAt time.Time `json:"declared_at"`
	ChangedAt  time.Time `json:"changed_at"`
}

// DeclareDeadline records that the pipeline's deadline is spec, as read
// at now: the first time, declared and changed then; with another spec
// than the stored one, changed then; with the same, nothing changes. It
// returns the declaration as stored.
func (l *Ledger) DeclareDeadline(ctx context.Context, pipeline, spec string, now time.Time) (DeadlineDeclaration, error) {
	if pipeline == "" || spec == "" {
		return DeadlineDeclaration{}, invalid("a deadline declaration names its pipeline and its deadline, got %q and %q", pipeline, spec)
	}
	if now.IsZero() {
		now = time.Now()
	}
	var out DeadlineDeclaration
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO deadline_declarations (pipeline, spec, declared_at, changed_at)
			VALUES (?, ?, ?, ?) ON CONFLICT (pipeline) DO NOTHING`), pipeline, spec, l.d.timeArg(now), l.d.timeArg(now)); err != nil {
			return fmt.Errorf("ledger %s: declare the deadline of %s: %w", l.where, pipeline, err)
		}
		if _, err := tx.ExecContext(ctx, l.d.q(`UPDATE deadline_declarations SET spec = ?, changed_at = ?
			WHERE pipeline = ? AND spec <> ?`), spec, l.d.timeArg(now), pipeline, spec); err != nil {
			return fmt.Errorf("ledger %s: declare the deadline of %s: %w", l.where, pipeline, err)
		}
		var found bool
		var err error
		out, found, err = l.deadlineDeclaration(ctx, tx, pipeline)
		if err == nil && !found {
			err = fmt.Errorf("ledger %s: the deadline of %s is not there after it was declared", l.where, pipeline)
		}
		return err
	})
	return out, err
}

// WithdrawnDeadline is the spec of a declaration whose pipeline no longer
// declares a deadline: declaring one again is a change, so the periods due
// while there was none are never judged.
const WithdrawnDeadline = "withdrawn"

// WithdrawDeadline records that the pipeline declares no deadline any
// more, as read at now; withdrawn says whether this call changed anything
// (a pipeline never declared, or withdrawn already, is left as it is).
func (l *Ledger) WithdrawDeadline(ctx context.Context, pipeline string, now time.Time) (withdrawn bool, err error) {
	if now.IsZero() {
		now = time.Now()
	}
	err = l.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, l.d.q(`UPDATE deadline_declarations SET spec = ?, changed_at = ? WHERE pipeline = ? AND spec <> ?`),
			WithdrawnDeadline, l.d.timeArg(now), pipeline, WithdrawnDeadline)
		if err != nil {
			return fmt.Errorf("ledger %s: withdraw the deadline of %s: %w", l.where, pipeline, err)
		}
		n, err := res.RowsAffected()
		withdrawn = n == 1
		return err
	})
	return withdrawn, err
}

// DeadlineDeclaration reads the pipeline's declared deadline; found is
// false when no worker has declared one.
func (l *Ledger) DeadlineDeclaration(ctx context.Context, pipeline string) (d DeadlineDeclaration, found bool, err error) {
	return l.deadlineDeclaration(ctx, l.r, pipeline)
}

func (l *Ledger) deadlineDeclaration(ctx context.Context, db queryer, pipeline string) (DeadlineDeclaration, bool, error) {
	d := DeadlineDeclaration{Pipeline: pipeline}
	err := db.QueryRowContext(ctx, l.d.q(`SELECT spec, declared_at, changed_at FROM deadline_declarations WHERE pipeline = ?`), pipeline).
		Scan(&d.Spec, dbTime{&d.DeclaredAt}, dbTime{&d.ChangedAt})
	if errors.Is(err, sql.ErrNoRows) {
		return DeadlineDeclaration{}, false, nil
	}
	if err != nil {
		return DeadlineDeclaration{}, false, fmt.Errorf("ledger %s: read the deadline of %s: %w", l.where, pipeline, err)
	}
	return d, true, nil
}

// DeadlineRecord is what one judged period came to.
type DeadlineRecord struct {
	ID       int64              `json:"id"`
	Pipeline string             `json:"pipeline"`
	Period   string             `json:"period"`
	Kind     allot.DeadlineKind `json:"kind"`
	DueAt    time.Time          `json:"due_at"`
	// Needed and Completed count the period's completed episodes: needed
	// by the deadline, and had when the record was written.
	Needed    int `json:"needed"`
	Completed int `json:"completed"`
	// Cause, Detail, EpisodeID and Command say, for a warning or a late
	// period, why it was short (the schedule's note, the episode's
	// reason) and the complete command that moves it on.
	Cause     allot.LateCause `json:"cause,omitempty"`
	Detail    string          `json:"detail,omitempty"`
	EpisodeID string          `json:"episode_id,omitempty"`
	Command   string          `json:"command,omitempty"`
	// CompletedAt and LateBy: for completed_late, when the period got its
	// episodes and how long after its deadline.
	CompletedAt time.Time     `json:"completed_at,omitzero"`
	LateBy      time.Duration `json:"late_by,omitempty"`
	RecordedAt  time.Time     `json:"recorded_at"`
}

// PeriodJudgement asks to judge one period at its warning time (Kind
// DeadlineWarning) or its deadline (DeadlineLate): Cause and the rest are
// what the watcher found, used only when the period is short.
type PeriodJudgement struct {
	Pipeline  string
	Period    string
	Kind      allot.DeadlineKind // DeadlineWarning or DeadlineLate
	DueAt     time.Time
	Needed    int
	Cause     allot.LateCause
	Detail    string
	EpisodeID string
	Command   string
	At        time.Time // zero: now
}

// JudgePeriod counts the period's completed episodes and, in the same
// transaction, records what the period came to: at the deadline, on_time
// or late; at the warning time, a warning when it is short (nothing when
// it is not). A period judged before keeps its first record: the result
// is the stored record, and recorded says whether this call wrote it;
// a warning not needed returns found false.
func (l *Ledger) JudgePeriod(ctx context.Context, j PeriodJudgement) (rec DeadlineRecord, recorded, found bool, err error) {
	switch {
	case j.Pipeline == "" || j.Period == "":
		return rec, false, false, invalid("a period judgement names its pipeline and period, got %q and %q", j.Pipeline, j.Period)
	case j.Kind != allot.DeadlineWarning && j.Kind != allot.DeadlineLate:
		return rec, false, false, invalid("period %s of %s: a judgement is a %s or a %s, not %q", j.Period, j.Pipeline, allot.DeadlineWarning, allot.DeadlineLate, j.Kind)
	case j.Needed < 1:
		return rec, false, false, invalid("period %s of %s: a judgement needs at least one completed episode, got %d", j.Period, j.Pipeline, j.Needed)
	case j.DueAt.IsZero():
		return rec, false, false, invalid("period %s of %s: a judgement names its deadline", j.Period, j.Pipeline)
	case j.Cause != "" && !j.Cause.Valid():
		return rec, false, false, invalid("period %s of %s: cause %q is not one of allot.LateCauses", j.Period, j.Pipeline, j.Cause)
	}
	at := j.At
	if at.IsZero() {
		at = now()
	}
	err = l.writeTx(ctx, func(tx *sql.Tx) error {
		if err := l.lockPeriodTx(ctx, tx, j.Pipeline, j.Period); err != nil {
			return err
		}
		completed, err := l.completedInPeriod(ctx, tx, j.Pipeline, j.Period)
		if err != nil {
			return err
		}
		r := DeadlineRecord{Pipeline: j.Pipeline, Period: j.Period, Kind: j.Kind, DueAt: j.DueAt, Needed: j.Needed, Completed: completed, RecordedAt: at}
		switch {
		case completed >= j.Needed && j.Kind == allot.DeadlineWarning:
			return nil
		case completed >= j.Needed:
			r.Kind = allot.DeadlineOnTime
		default:
			r.Cause, r.Detail, r.EpisodeID, r.Command = j.Cause, j.Detail, j.EpisodeID, j.Command
		}
		if recorded, err = l.insertDeadlineTx(ctx, tx, r); err != nil {
			return err
		}
		// A period judged before keeps its first verdict: return it.
		recs, err := l.queryDeadlines(ctx, tx, `SELECT `+deadlineCols+` FROM deadline_records
			WHERE pipeline = ? AND period = ? AND kind IN (?, ?) ORDER BY id`, j.Pipeline, j.Period, string(r.Kind), string(otherVerdict(r.Kind)))
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return fmt.Errorf("ledger %s: the %s record of %s period %s is not there after it was written", l.where, r.Kind, j.Pipeline, j.Period)
		}
		rec, found = recs[0], true
		return nil
	})
	if err != nil {
		return DeadlineRecord{}, false, false, err
	}
	return rec, recorded, found, nil
}

// otherVerdict is the verdict a deadline could have given instead of k:
// a period is on time or late, never both (a warning has none).
func otherVerdict(k allot.DeadlineKind) allot.DeadlineKind {
	switch k {
	case allot.DeadlineOnTime:
		return allot.DeadlineLate
	case allot.DeadlineLate:
		return allot.DeadlineOnTime
	}
	return k
}

// recordCompletedLateTx records, when the period was recorded late and now
// has the completed episodes it needed, when it completed and how late;
// called in the transaction that completes an episode of it.
func (l *Ledger) recordCompletedLateTx(ctx context.Context, tx *sql.Tx, pipeline, period string, at time.Time) error {
	if err := l.lockPeriodTx(ctx, tx, pipeline, period); err != nil {
		return err
	}
	late, err := l.queryDeadlines(ctx, tx, `SELECT `+deadlineCols+` FROM deadline_records WHERE pipeline = ? AND period = ? AND kind = ?`,
		pipeline, period, string(allot.DeadlineLate))
	if err != nil || len(late) == 0 {
		return err
	}
	completed, err := l.completedInPeriod(ctx, tx, pipeline, period)
	if err != nil || completed < late[0].Needed {
		return err
	}
	lateBy := max(at.Sub(late[0].DueAt).Truncate(time.Second), 0)
	_, err = l.insertDeadlineTx(ctx, tx, DeadlineRecord{
		Pipeline: pipeline, Period: period, Kind: allot.DeadlineCompletedLate, DueAt: late[0].DueAt,
		Needed: late[0].Needed, Completed: completed, CompletedAt: at, LateBy: lateBy, RecordedAt: at,
	})
	return err
}

func (l *Ledger) insertDeadlineTx(ctx context.Context, tx *sql.Tx, r DeadlineRecord) (bool, error) {
	res, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO deadline_records
		(pipeline, period, kind, due_at, needed, completed, cause, detail, episode_id, command, completed_at, late_by_seconds, recorded_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (pipeline, period, kind) DO NOTHING`),
		r.Pipeline, r.Period, string(r.Kind), l.d.timeArg(r.DueAt), r.Needed, r.Completed, string(r.Cause), r.Detail, r.EpisodeID, r.Command,
		l.d.timeArg(r.CompletedAt), int64(r.LateBy/time.Second), l.d.timeArg(r.RecordedAt))
	if err != nil {
		return false, fmt.Errorf("ledger %s: record %s period %s as %s: %w", l.where, r.Pipeline, r.Period, r.Kind, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("ledger %s: record %s period %s as %s: %w", l.where, r.Pipeline, r.Period, r.Kind, err)
	}
	return n == 1, nil
}

// CompletedInPeriod counts the period's completed episodes.
func (l *Ledger) CompletedInPeriod(ctx context.Context, pipeline, period string) (int, error) {
	return l.completedInPeriod(ctx, l.r, pipeline, period)
}

func (l *Ledger) completedInPeriod(ctx context.Context, db queryer, pipeline, period string) (int, error) {
	var n int
	if err := db.QueryRowContext(ctx, l.d.q(`SELECT COUNT(*) FROM episodes WHERE pipeline = ? AND period = ? AND status = ?`),
		pipeline, period, string(EpisodeCompleted)).Scan(&n); err != nil {
		return 0, fmt.Errorf("ledger %s: count the completed episodes of %s period %s: %w", l.where, pipeline, period, err)
	}
	return n, nil
}

// periodLockKey maps a pipeline's period to the advisory lock that
// serialises its judgement with the completion of its episodes.
func periodLockKey(pipeline, period string) int64 { return advisoryKey("deadline", pipeline, period) }

// lockPeriodTx takes the period's deadline lock (lockTx).
func (l *Ledger) lockPeriodTx(ctx context.Context, tx *sql.Tx, pipeline, period string) error {
	return l.lockTx(ctx, tx, periodLockKey(pipeline, period), pipeline+" period "+period)
}

// LastJudgedDue is the latest deadline of the pipeline judged at its
// deadline (on time or late); zero when none was.
func (l *Ledger) LastJudgedDue(ctx context.Context, pipeline string) (time.Time, error) {
	var due time.Time
	err := l.r.QueryRowContext(ctx, l.d.q(`SELECT due_at FROM deadline_records WHERE pipeline = ? AND kind IN (?, ?)
		ORDER BY due_at DESC LIMIT 1`), pipeline, string(allot.DeadlineLate), string(allot.DeadlineOnTime)).Scan(dbTime{&due})
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("ledger %s: read the last judged deadline of %s: %w", l.where, pipeline, err)
	}
	return due, nil
}

// DeadlineFilter selects deadline records.
type DeadlineFilter struct {
	Pipeline string // required
	// Since, when set, keeps the records due at or after it.
	Since time.Time
	// Kind, when set, keeps one kind.
	Kind allot.DeadlineKind
	// AfterID and Limit page through the records in ID order (Limit 0:
	// DefaultDeadlinePage).
	AfterID int64
	Limit   int
}

// DefaultDeadlinePage is the page size of DeadlineRecords.
const DefaultDeadlinePage = 500

// DeadlineRecords lists one page of a pipeline's deadline records, in the
// order they were written.
func (l *Ledger) DeadlineRecords(ctx context.Context, f DeadlineFilter) ([]DeadlineRecord, error) {
	if f.Pipeline == "" {
		return nil, invalid("deadline records are listed per pipeline: name one")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultDeadlinePage
	}
	query := `SELECT ` + deadlineCols + ` FROM deadline_records WHERE pipeline = ? AND id > ?`
	args := []any{f.Pipeline, f.AfterID}
	if !f.Since.IsZero() {
		query += ` AND due_at >= ?`
		args = append(args, l.d.timeArg(f.Since))
	}
	if f.Kind != "" {
		query += ` AND kind = ?`
		args = append(args, string(f.Kind))
	}
	query += ` ORDER BY id LIMIT ?`
	args = append(args, limit)
	return l.queryDeadlines(ctx, l.r, query, args...)
}

// LateOpen lists the periods recorded late that have not completed since,
// across pipelines, oldest deadline first.
func (l *Ledger) LateOpen(ctx context.Context) ([]DeadlineRecord, error) {
	return l.queryDeadlines(ctx, l.r, `SELECT `+deadlineCols+` FROM deadline_records d WHERE kind = ?
		AND NOT EXISTS (SELECT 1 FROM deadline_records c WHERE c.pipeline = d.pipeline AND c.period = d.period AND c.kind = ?)
		ORDER BY due_at, pipeline`, string(allot.DeadlineLate), string(allot.DeadlineCompletedLate))
}

// WarningsOpen lists the warnings of the periods not judged at their
// deadline yet (no on-time, late or completed-late record), the nearest
// deadline first: the periods that may still be saved. A period that got
// its episodes since its warning stays listed until its deadline judges
// it; CompletedInPeriod tells.
func (l *Ledger) WarningsOpen(ctx context.Context) ([]DeadlineRecord, error) {
	return l.queryDeadlines(ctx, l.r, `SELECT `+deadlineCols+` FROM deadline_records d WHERE kind = ?
		AND NOT EXISTS (SELECT 1 FROM deadline_records c WHERE c.pipeline = d.pipeline AND c.period = d.period AND c.kind IN (?, ?, ?))
		ORDER BY due_at, pipeline`, string(allot.DeadlineWarning), string(allot.DeadlineOnTime), string(allot.DeadlineLate), string(allot.DeadlineCompletedLate))
}

// DeadlineTotal counts one pipeline's records of one kind.
type DeadlineTotal struct {
	Pipeline string
	Kind     allot.DeadlineKind
	Count    int
}

// DeadlineTotals counts every pipeline's deadline records by kind, for the
// metrics.
func (l *Ledger) DeadlineTotals(ctx context.Context) ([]DeadlineTotal, error) {
	rows, err := l.r.QueryContext(ctx, l.d.q(`SELECT pipeline, kind, COUNT(*) FROM deadline_records GROUP BY pipeline, kind ORDER BY pipeline, kind`))
	if err != nil {
		return nil, fmt.Errorf("ledger %s: count deadline records: %w", l.where, err)
	}
	defer rows.Close()
	var out []DeadlineTotal
	for rows.Next() {
		var (
			t    DeadlineTotal
			kind string
		)
		if err := rows.Scan(&t.Pipeline, &kind, &t.Count); err != nil {
			return nil, fmt.Errorf("ledger %s: count deadline records: %w", l.where, err)
		}
		t.Kind = allot.DeadlineKind(kind)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: count deadline records: %w", l.where, err)
	}
	return out, nil
}

const deadlineCols = `id, pipeline, period, kind, due_at, needed, completed, cause, detail, episode_id, command, completed_at, late_by_seconds, recorded_at`

func (l *Ledger) queryDeadlines(ctx context.Context, db querier, query string, args ...any) ([]DeadlineRecord, error) {
	rows, err := db.QueryContext(ctx, l.d.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: query deadline records: %w", l.where, err)
	}
	defer rows.Close()
	var out []DeadlineRecord
	for rows.Next() {
		var (
			r           DeadlineRecord
			kind, cause string
			lateBy      int64
		)
		if err := rows.Scan(&r.ID, &r.Pipeline, &r.Period, &kind, dbTime{&r.DueAt}, &r.Needed, &r.Completed, &cause, &r.Detail,
			&r.EpisodeID, &r.Command, dbTime{&r.CompletedAt}, &lateBy, dbTime{&r.RecordedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: read a deadline record: %w", l.where, err)
		}
		r.Kind, r.Cause, r.LateBy = allot.DeadlineKind(kind), allot.LateCause(cause), time.Duration(lateBy)*time.Second
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read deadline records: %w", l.where, err)
	}
	return out, nil
}
