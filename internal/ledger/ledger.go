// Package ledger is allot's durable store, and the one place its state
// changes. It holds:
//
//   - episodes (units of work), the allocation keys bound to them and the
//     runs' outcomes (allocate.go, allocbatch.go, episodes.go, outcomes.go);
//   - inputs, local step records and operators' decisions (inputs.go,
//     steps.go, decisions.go);
//   - paid tasks and their cost entries (paid_tasks.go, costs.go), and the
//     vendor batches that carry many of them (batches.go);
//   - budgets with their reservations (budgets.go), raises, alerts, audit
//     and views (budget_raises.go, budget_alerts.go, budget_audit.go,
//     budget_views.go), their shapes, spend and forecast (budget_shapes.go,
//     spend.go, forecast.go);
//   - vendors' shared state: pause, breaker, in-flight slots and rate
//     (vendor_state.go, vendor_limits.go);
//   - the vendors' bills as the reconciler read them, with their drift
//     items (bill.go, bill_drift.go);
//   - period deadlines, the operator page's ended sessions, and what the
//     page reads in one look (deadlines.go, sessions.go, console.go);
//   - imports of old runs (import.go), and the read-only audit, check
//     (audit.go, check.go, health.go).
//
// It runs on SQLite (one host, the default) or PostgreSQL (several hosts).
// The SQL is shared; the differences between the two live in dialect.go,
// and one conformance suite runs against both. The schema is the embedded,
// numbered migrations of migrations/ (migrate.go); a ledger has an identity
// (identity.go) and a process opens a SQLite file once (shared.go).
//
// Allocation is one transaction under a per-pipeline lock, backed by unique
// constraints, so that invariants 1-5 of docs/design.md hold even when the
// scheduler starts the same run twice. Paid tasks keep invariants 7 and 8:
// intent before the vendor call, one remote reference per task, and cost
// entries written as absolute values keyed by remote reference; a task's
// state changes only through changePaidTask, checked against paidMoves (a
// batch's against batchMoves). Budgets keep invariant 20
// (a reservation before every paid call), the bill invariant 22 and
// batches invariant 24. Outcomes keep invariant 10: each run's and each
// episode's outcome is stored with its reason and counted per reason by
// indexed queries.
package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"allot"
)

// Errors callers tell apart with errors.Is. Every error the package returns
// wraps one of these when it is a domain failure rather than an I/O one.
// The refusals are allot.Errors, so their type reaches the caller
// (allot.ErrorType) and the activity boundary without a table of cases;
// the others (an intent owned, a send in flight, a missing file) are
// untyped: the caller decides what they mean.
var (
	ErrEpisodeNotFound  = &allot.Error{Type: allot.EpisodeNotFound, Message: "episode not found"}
	ErrKeyCrossesPeriod = &allot.Error{Type: allot.AllocationKeyCrossesPeriod, Message: "allocation key crosses period"}
	ErrKeyAmbiguous     = &allot.Error{Type: allot.AllocationKeyAmbiguous, Message: "allocation key ambiguous"}
	ErrInvalidInput     = &allot.Error{Type: allot.InvalidInput, Message: "invalid ledger input"}

	ErrPaidTaskNotFound = &allot.Error{Type: allot.PaidTaskNotFound, Message: "paid task not found"}
	// ErrPaidTaskState: the message names the task, its current state and
	// the states that would allow the operation.
	ErrPaidTaskState     = &allot.Error{Type: allot.PaidTaskStateConflict, Message: "paid task is not in a state that allows this"}
	ErrRemoteRefConflict = &allot.Error{Type: allot.RemoteRefConflict, Message: "paid task already has another remote reference"}
	// ErrIntentOwned: another attempt owns the intent; only it sends. Not
	// a refusal: the caller asks the vendor, or waits for the owner.
	ErrIntentOwned = errors.New("paid task intent is owned by another attempt")
	// ErrSendInFlight: an earlier attempt's send may still reach the
	// vendor; a look-up proves nothing until its deadline has passed.
	ErrSendInFlight = errors.New("an earlier send of the paid task may still be under way")
	ErrCostNotFound = errors.New("cost entry not found")
	// ErrNotCreated: OpenReadOnly or OpenExisting found no ledger there
	// (no SQLite file, no allot schema); only Open, the worker's, creates
	// one.
	ErrNotCreated = errors.New("ledger not created yet")
	// ErrCorrupt: the SQLite file is not a database SQLite can read (not
	// its header, SQLITE_CORRUPT, SQLITE_NOTADB); the message names the
	// file and says to restore it from a backup.
	ErrCorrupt = errors.New("ledger file is corrupt")
)

// The episode's nouns are the domain's (allot.Episode); the ledger
// stores them.
type (
	EpisodeStatus = allot.EpisodeStatus
	Episode       = allot.Episode
)

// Episode statuses (allot's).
const (
	EpisodeAllocated = allot.EpisodeAllocated
	EpisodeCompleted = allot.EpisodeCompleted
)

// EpisodeID formats "<period>-<sequence>".
func EpisodeID(period string, sequence int) string {
	return period + "-" + strconv.Itoa(sequence)
}

// Ledger is an open ledger. It is safe for concurrent use.
type Ledger struct {
	d *dialect
	// w runs every write transaction. On SQLite it holds a single connection,
	// so writers in this process queue in Go instead of racing for SQLite's
	// file lock (busy_timeout still covers other processes).
	w *sql.DB
	// r runs plain reads. On SQLite it is a separate pool so that reads never
	// wait behind the writer (WAL lets them proceed); on PostgreSQL r == w.
	r     *sql.DB
	where string // the ledger's location for error messages, secrets redacted
	// txOptions start every write transaction. On PostgreSQL they name
	// READ COMMITTED explicitly: under a server default of REPEATABLE READ
	// the snapshot would be taken before the advisory lock is granted, and
	// a transaction would miss what the lock's previous holder committed.
	txOptions *sql.TxOptions
	readOnly  bool
	// created: this open applied the first migration, so the ledger is new.
	created bool
	// conns are the connections this handle shares with the process's
	// other opens of the same SQLite file (shared.go); nil otherwise.
	conns  *sharedConns
	closed bool
	// id is the ledger's identity (identity.go).
	id string
	// alloc groups concurrent allocations into shared transactions
	// (allocbatch.go).
	alloc *allocBatcher
}

// openMode is what an open may do to the ledger.
type openMode int

const (
	// openCreate creates the ledger where there is none and migrates it:
	// the worker's open.
	openCreate openMode = iota
	// openExisting writes and migrates an existing ledger and never creates
	// one: the operator's commands that write.
	openExisting
	// openReadOnly creates, migrates and writes nothing, not even a file
	// beside a SQLite ledger (invariant 19).
	openReadOnly
)

// Open opens the ledger named by url, creating it if needed, and applies the
// embedded numbered migrations. Only the worker creates ledgers; Created
// says whether this open did.
//
// Accepted forms: "sqlite:PATH" (the parent directory is created),
// "postgres://..." or "postgresql://...".
func Open(ctx context.Context, url string) (*Ledger, error) {
	return open(ctx, url, openCreate)
}

// OpenExisting opens an existing ledger to write it, migrating it like
// Open, but never creates one: no SQLite file (or directory), an empty file
// or a database without allot's schema is ErrNotCreated, and nothing is
// written. A mistyped ALLOT_LEDGER is refused instead of becoming a new,
// empty ledger.
func OpenExisting(ctx context.Context, url string) (*Ledger, error) {
	return open(ctx, url, openExisting)
}

// OpenReadOnly opens an existing ledger without creating, migrating or
// writing anything (invariant 19; see openSQLiteReadOnly), for operators'
// read-only commands.
func OpenReadOnly(ctx context.Context, url string) (*Ledger, error) {
	return open(ctx, url, openReadOnly)
}

// View opens the ledger read-only, runs read and closes the ledger. An
// error that is SQLite's report of a damaged file is ErrCorrupt.
func View(ctx context.Context, url string, read func(*Ledger) error) error {
	l, err := OpenReadOnly(ctx, url)
	if err != nil {
		return err
	}
	err = read(l)
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		err = l.corruptOr(err)
	}
	return err
}

// Created reports whether this open created the ledger: it applied the
// first migration to a database without allot's schema.
func (l *Ledger) Created() bool { return l.created }

// open opens the ledger at url, sharing the connections this process
// already holds on a SQLite file (shared.go).
func open(ctx context.Context, url string, mode openMode) (*Ledger, error) {
	path, isSQLite := sqlitePath(url)
	if !isSQLite {
		return openAlone(ctx, url, mode)
	}
	key, ok := fileKey(path)
	if !ok {
		return openAlone(ctx, url, mode)
	}
	if l := shareOpen(key, url, mode); l != nil {
		return l, nil
	}
	l, err := openAlone(ctx, url, mode)
	if err != nil {
		return nil, err
	}
	return register(key, l), nil
}

// openAlone opens connections of its own to the ledger at url. Only tests
// that stand for several processes call it directly.
func openAlone(ctx context.Context, url string, mode openMode) (*Ledger, error) {
	l, err := connect(ctx, url, mode)
	if err != nil {
		return nil, err
	}
	switch mode {
	case openReadOnly:
		err = l.checkSchema(ctx)
	case openExisting:
		if _, err = l.readSchemaVersion(ctx); err == nil {
			err = l.migrate(ctx, 0)
		}
	default:
		err = l.migrate(ctx, 0)
	}
	if err == nil {
		err = l.ensureIdentity(ctx)
	}
	if err != nil {
		_ = l.Close()
		return nil, l.corruptOr(err)
	}
	return l, nil
}

// connect opens the ledger's connections without touching its schema.
func connect(ctx context.Context, url string, mode openMode) (*Ledger, error) {
	var (
		l   *Ledger
		err error
	)
	switch {
	case strings.HasPrefix(url, "sqlite:"):
		l, err = openSQLite(ctx, strings.TrimPrefix(url, "sqlite:"), mode)
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		l, err = openPostgres(ctx, url, mode == openReadOnly)
	default:
		return nil, fmt.Errorf("ledger URL %q is not supported: use sqlite:PATH (e.g. sqlite:data/ledger.db), postgres://USER@HOST:PORT/DB or postgresql://USER@HOST:PORT/DB", redactURL(url))
	}
	if err != nil {
		return nil, err
	}
	l.readOnly = mode == openReadOnly
	l.alloc = &allocBatcher{}
	if l.d.name == postgresDialect.name {
		l.txOptions = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	return l, nil
}

// Close releases the handle: the ledger's connections, or, when other
// opens of this process share them, its share of them. A second Close does
// nothing.
func (l *Ledger) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	if l.conns != nil {
		return l.conns.release()
	}
	return l.closePools()
}

// writeTx runs fn in one write transaction and commits it if fn returns nil.
// On SQLite the transaction starts with BEGIN IMMEDIATE (see dialect.go), so
// it holds the database's write lock before its first read.
func (l *Ledger) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if l.readOnly {
		return fmt.Errorf("ledger %s was opened read-only: open it with ledger.Open to write", l.where)
	}
	tx, err := l.w.BeginTx(ctx, l.txOptions)
	if err != nil {
		return fmt.Errorf("ledger %s: begin transaction: %w", l.where, err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger %s: commit: %w", l.where, err)
	}
	return nil
}

// now is the ledger's clock, at the precision both databases keep.
func now() time.Time { return normTime(time.Now()) }

// normTime converts to UTC and truncates to microseconds, the precision of
// PostgreSQL's timestamptz, so that a time reads back equal on both drivers.
func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

func notFound(pipeline, episodeID string) error {
	return fmt.Errorf("%w: pipeline %q has no episode %q: check the pipeline and the episode ID (<period>-<sequence>, e.g. 2026-W32-0) against the ledger's episode list",
		ErrEpisodeNotFound, pipeline, episodeID)
}

// notCreatedError is an error that says how a ledger is missing, and is
// ErrNotCreated.
type notCreatedError struct{ error }

func (e notCreatedError) Is(target error) bool { return target == ErrNotCreated }

// corruptError is an error that says which file is damaged and how to
// recover, and is ErrCorrupt.
type corruptError struct{ error }

func (e corruptError) Is(target error) bool { return target == ErrCorrupt }
