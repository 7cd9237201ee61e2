package ledger

// This file is the one seam between SQLite and PostgreSQL: how a URL becomes
// connections (and the writer pool's prepared statements), placeholders, the
// per-pipeline lock, how times are stored and where the migrations live. All
// other SQL in the package is shared and written with '?' placeholders.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite" // the pure-Go "sqlite" driver (no cgo); registers it too
	sqlite3 "modernc.org/sqlite/lib"
)

type dialect struct {
	name string
	// migrations is this dialect's directory in the embedded migrations FS.
	migrations string
	// dollarPlaceholders: PostgreSQL numbers its parameters ($1, $2, ...).
	dollarPlaceholders bool
	// lockPipeline runs first in Allocate's transaction with the pipeline's
	// lock key as its only argument, before anything is read. Empty when
	// BEGIN already took a lock that covers the pipeline (SQLite's BEGIN
	// IMMEDIATE takes the single database write lock).
	lockPipeline string
	// lockEpisode runs first in every transaction that writes an episode's
	// paid tasks or decisions, with the episode's lock key as its only
	// argument, so that check-then-insert (WriteIntent, PlanRevision,
	// RecordDecision) sees concurrent writers of the same episode. Empty
	// when BEGIN already took a lock that covers it.
	lockEpisode string
	// lockMigrations serialises concurrent Opens that migrate; empty when
	// BEGIN IMMEDIATE already does.
	lockMigrations string
	// timeAsText: SQLite has no time type, so times are stored as
	// fixed-width UTC text, which sorts and compares in time order.
	timeAsText bool
	// utcDay is the SQL of a time column's UTC day as YYYY-MM-DD text,
	// with %s for the column.
	utcDay string
	// explain prefixes a query to get its plan instead of its rows, one row
	// per plan line with the text in the last column, and preferIndexes
	// (if set) runs first in the same transaction so that the planner uses
	// an index whenever one serves the query, even on a test's tiny tables.
	// Only tests use them, to check that the metrics queries are indexed.
	explain       string
	preferIndexes string
}

var (
	sqliteDialect = &dialect{
		name:       "sqlite",
		migrations: "migrations/sqlite",
		timeAsText: true,
		// The text is UTC and begins with the day.
		utcDay:  "substr(%s, 1, 10)",
		explain: "EXPLAIN QUERY PLAN ",
	}
	postgresDialect = &dialect{
		name:               "postgres",
		migrations:         "migrations/postgres",
		dollarPlaceholders: true,
		// A transaction-scoped advisory lock keyed by a hash of the
		// pipeline: allocations in other pipelines take other keys and do
		// not wait (invariant 5); it is released by COMMIT or ROLLBACK.
		lockPipeline:   "SELECT pg_advisory_xact_lock(?)",
		lockEpisode:    "SELECT pg_advisory_xact_lock(?)",
		lockMigrations: "SELECT pg_advisory_xact_lock(?)",
		utcDay:         "to_char(%s AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
		explain:        "EXPLAIN ",
		preferIndexes:  "SET LOCAL enable_seqscan = off",
	}
)

// migrationLockKey is the advisory lock key for migrations; any constant
// that no pipeline hash is likely to hit will do.
var migrationLockKey = lockKey("\x00allot/ledger/migrations")

// q rewrites a shared query for this dialect. Shared queries use '?' only
// as a placeholder, never inside a literal, so a plain scan is enough ('?' is
// ASCII, so scanning bytes is safe in UTF-8). Rewrites are remembered: the
// package's queries are a fixed set of constants and their combinations, so
// a query is rewritten once per process rather than on every call.
func (d *dialect) q(query string) string {
	if !d.dollarPlaceholders || strings.IndexByte(query, '?') < 0 {
		return query
	}
	if v, ok := rewrittenQueries.Load(query); ok {
		return v.(string)
	}
	b := make([]byte, 0, len(query)+16)
	n := int64(0)
	for i := 0; i < len(query); i++ {
		if c := query[i]; c != '?' {
			b = append(b, c)
			continue
		}
		n++
		b = append(b, '$')
		b = strconv.AppendInt(b, n, 10)
	}
	out := string(b)
	// Bounded all the same, in case a caller ever builds queries from data.
	if rewrittenCount.Load() < maxRewrittenQueries {
		if _, loaded := rewrittenQueries.LoadOrStore(query, out); !loaded {
			rewrittenCount.Add(1)
		}
	}
	return out
}

var (
	rewrittenQueries sync.Map // shared query -> its $n form
	rewrittenCount   atomic.Int64
)

const maxRewrittenQueries = 4096

// writerStmts holds the prepared statements of every open ledger's writer
// pool, keyed by the pool. An entry lives exactly as long as its pool:
// openWriterPool adds it and the pool's Close removes it (poolConnector).
var writerStmts sync.Map // *sql.DB -> *stmtCache

// openWriterPool opens a ledger's writer pool on connector, with its
// statement cache.
func openWriterPool(connector driver.Connector, d *dialect) *sql.DB {
	c := &poolConnector{Connector: connector}
	db := sql.OpenDB(c)
	c.db = db
	writerStmts.Store(db, &stmtCache{d: d, db: db, m: map[string]*sql.Stmt{}})
	return db
}

// poolConnector is the driver's connector, unchanged, plus the Close that
// sql.DB.Close calls last, once the pool's connections (and with them every
// statement prepared on them) are closed: it drops the pool's cache.
type poolConnector struct {
	driver.Connector
	db *sql.DB
}

func (c *poolConnector) Close() error {
	writerStmts.Delete(c.db)
	if cl, ok := c.Connector.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

// stmtCache prepares a ledger's hot write statements once instead of on
// every call: a shared '?' query is rewritten and prepared on the writer
// pool the first time it is asked for, and a transaction then runs it
// through tx.StmtContext, which reuses the statement already prepared on the
// transaction's connection (database/sql prepares it on another connection
// of the pool the first time that one needs it). On SQLite this saves
// parsing and planning every statement of every transaction; on PostgreSQL,
// where pgx already keeps prepared statements per connection, it saves the
// rewrite and pgx's cache look-up.
//
// Only constant queries belong here: the cache keeps every query it is given
// for the pool's lifetime. A statement stays valid across schema changes:
// SQLite re-prepares it, PostgreSQL re-plans it.
type stmtCache struct {
	d  *dialect
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// prepared returns the shared query prepared on l's writer pool. It must not
// be called inside a write transaction on SQLite: the first preparation
// needs the single writer connection, which the transaction holds.
func (l *Ledger) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	v, ok := writerStmts.Load(l.w)
	if !ok {
		return nil, fmt.Errorf("ledger %s is closed", l.where)
	}
	return v.(*stmtCache).get(ctx, query)
}

func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	st, ok := c.m[query]
	c.mu.Unlock()
	if ok {
		return st, nil
	}
	// Prepared outside the lock, so that callers of statements already
	// prepared never wait for a connection; a concurrent first call may
	// prepare the same query too, and the loser closes its copy.
	st, err := c.db.PrepareContext(ctx, c.d.q(query))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[query]; ok {
		_ = st.Close()
		return prev, nil
	}
	c.m[query] = st
	return st, nil
}

// lockKey maps a pipeline to the 64-bit key of its advisory lock. Two
// pipelines sharing a hash would only wait for each other, never mix data.
func lockKey(pipeline string) int64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, "allot/ledger/pipeline/"+pipeline)
	return int64(h.Sum64())
}

// advisoryKey maps a kind of lock and its parts to a 64-bit advisory lock
// key: the hash of "allot/ledger/<kind>/" and the parts joined by NUL. The
// text is what running workers share, so it never changes.
func advisoryKey(kind string, parts ...string) int64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, "allot/ledger/"+kind+"/"+strings.Join(parts, "\x00"))
	return int64(h.Sum64())
}

// episodeLockKey maps an episode to the advisory lock over its paid tasks
// and decisions. The kind differs from lockKey's, so paid work does not
// wait for allocations in the pipeline.
func episodeLockKey(pipeline, episodeID string) int64 {
	return advisoryKey("episode", pipeline, episodeID)
}

// lockTx takes a transaction-scoped advisory lock where BEGIN did not
// (PostgreSQL; SQLite's writer lock covers it): an episode's, a budget
// period's, a deadline period's. what names it in the error.
func (l *Ledger) lockTx(ctx context.Context, tx *sql.Tx, key int64, what string) error {
	if l.d.lockEpisode == "" {
		return nil
	}
	if _, err := tx.ExecContext(ctx, l.d.q(l.d.lockEpisode), key); err != nil {
		return fmt.Errorf("ledger %s: lock %s: %w", l.where, what, err)
	}
	return nil
}

// timeTextLayout is fixed-width (always six fractional digits, always Z) so
// that text comparison in SQL is time comparison.
const timeTextLayout = "2006-01-02T15:04:05.000000Z07:00"

// timeArg is how a time is passed as a query argument; zero means NULL.
func (d *dialect) timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	t = normTime(t)
	if d.timeAsText {
		return t.Format(timeTextLayout)
	}
	return t
}

// dbTime scans a time column from either dialect; NULL scans as zero.
type dbTime struct{ t *time.Time }

func (s dbTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*s.t = time.Time{}
		return nil
	case time.Time:
		*s.t = normTime(v)
		return nil
	case []byte:
		return s.Scan(string(v))
	case string:
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return fmt.Errorf("ledger time %q is not RFC 3339: %w", v, err)
		}
		*s.t = normTime(t)
		return nil
	}
	return fmt.Errorf("ledger time column holds %T, want a time or RFC 3339 text", src)
}

// sqliteHeader starts every SQLite database file.
const sqliteHeader = "SQLite format 3\x00"

// How allot opens a SQLite ledger, each against SQLite's documentation
// (docs/design.md, "How allot opens a SQLite ledger"):
//
//   - Nothing of allot's opens the file outside SQLite while this process
//     may hold it: closing any descriptor of a file drops every POSIX lock
//     the process holds on it, and a process without its shared lock is
//     taken for gone by the next connection that closes, which checkpoints
//     and deletes the -wal under it (sqlite.org/howtocorrupt.html, 2.2).
//     The checks before the first connection only stat the file; whether it
//     is a database at all SQLite itself answers, on a read-only connection
//     (probeSQLite).
//   - A process opens a file once; later opens share those connections
//     (shared.go).
//   - The writer: WAL, synchronous=FULL, BEGIN IMMEDIATE, busy_timeout.
//   - Read-only opens: mode=ro, which takes reader locks and reads the log
//     of a live writer (sqlite.org/wal.html, "Read-Only Databases": SQLite
//     creates the -wal and -shm of a WAL database beside it when they are
//     missing). Only on read-only media, where nothing can write the file,
//     and only when no -wal is there to read, immutable=1 (sqlite.org/uri.html).

func openSQLite(ctx context.Context, path string, mode openMode) (*Ledger, error) {
	if path == "" {
		return nil, fmt.Errorf("ledger URL \"sqlite:\" names no file: use sqlite:PATH, e.g. sqlite:data/ledger.db")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("ledger path %q: %w", path, err)
	}
	where := "sqlite:" + path
	exists, err := checkSQLiteFile(abs, where, mode)
	if err != nil {
		return nil, err
	}
	if mode == openReadOnly {
		return openSQLiteReadOnly(ctx, abs, where)
	}
	if mode == openCreate {
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return nil, fmt.Errorf("ledger %s: create its directory: %w", where, err)
		}
	}
	if exists {
		// Before the writer, whose first connection switches the file to
		// WAL: a file that is not a database is never written.
		if err := probeSQLite(ctx, abs, where); err != nil {
			return nil, err
		}
	}
	connector, err := sqlite.NewConnector(sqliteDSN(abs, true))
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", where, err)
	}
	w := openWriterPool(connector, sqliteDialect)
	// One writer connection: see Ledger.w.
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := pingSQLiteWriter(ctx, w); err != nil {
		_ = w.Close()
		return nil, sqliteOpenError(where, err)
	}
	r, err := sql.Open("sqlite", sqliteDSN(abs, false))
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("ledger %s: %w", where, err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	return &Ledger{d: sqliteDialect, w: w, r: r, where: where}, nil
}

// probeSQLite asks SQLite, on a read-only connection that never writes the
// file, whether the file at abs is a database it can read.
func probeSQLite(ctx context.Context, abs, where string) error {
	db, err := sql.Open("sqlite", sqliteReadOnlyDSN(abs, false))
	if err != nil {
		return fmt.Errorf("ledger %s: %w", where, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA schema_version`).Scan(&version); err != nil {
		return sqliteOpenError(where, err)
	}
	return nil
}

// sqliteBusyTimeout is how long a SQLite connection waits for a lock
// another holds (busy_timeout), and how long a first connection waits to
// set up WAL.
const sqliteBusyTimeout = 10 * time.Second

// pingSQLiteWriter opens the writer's first connection, whose pragmas
// switch a new file to WAL. The switch needs the file alone, and SQLite
// answers SQLITE_BUSY at once, without waiting out busy_timeout, when
// another connection has it: two workers starting on a new ledger would
// see one of them fail with "database is locked". It tries again, with a
// growing pause, until the busy timeout or ctx ends.
func pingSQLiteWriter(ctx context.Context, w *sql.DB) error {
	deadline := time.Now().Add(sqliteBusyTimeout)
	pause := 5 * time.Millisecond
	for {
		err := w.PingContext(ctx)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// isBusy: SQLite found the file locked by another connection.
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// openSQLiteReadOnly opens one pool of read-only connections for both of
// the ledger's pools (it never writes). They are mode=ro connections: the
// same locks and the same view of the log as any reader of a live WAL
// database, and no write to the ledger (invariant 19). On read-only media
// SQLite cannot create the -wal and -shm such a connection needs: with
// both there (a snapshot of a live ledger) it reads them, the -shm
// read-only; with no -wal (a snapshot of a ledger closed cleanly, the file
// alone) the file is all there is, and immutable=1, which SQLite documents
// for read-only media, reads it without them.
func openSQLiteReadOnly(ctx context.Context, abs, where string) (*Ledger, error) {
	immutable := false
	if onReadOnlyMedia(filepath.Dir(abs)) {
		switch wal, shm := exists(abs+"-wal"), exists(abs+"-shm"); {
		case !wal:
			immutable = true
		case !shm:
			return nil, fmt.Errorf("ledger %s is on read-only media with its write-ahead log %s-wal but without its index %s-shm, which SQLite would have to create to read the log: copy the -shm file along with the ledger and its -wal",
				where, abs, abs)
		}
	}
	db, err := sql.Open("sqlite", sqliteReadOnlyDSN(abs, immutable))
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", where, err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, sqliteReadOnlyOpenError(where, abs, err)
	}
	return &Ledger{d: sqliteDialect, w: db, r: db, where: where, readOnly: true}, nil
}

// sqliteReadOnlyOpenError says why a read-only open failed. A WAL database
// whose -wal and -shm are missing is readable only by a process that may
// create them.
func sqliteReadOnlyOpenError(where, abs string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CANTOPEN && !exists(abs+"-shm") {
		return fmt.Errorf("ledger %s cannot be read by this user: SQLite must create its %s-wal and %s-shm beside it to read it, and %s is not writable here: run the command as the worker's user, or once the worker has opened the ledger (it leaves both files there while it runs): %w",
			where, abs, abs, filepath.Dir(abs), err)
	}
	return sqliteOpenError(where, err)
}

// exists: a file is at path (an error other than its absence counts as
// there: SQLite will report it).
func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

// checkSQLiteFile refuses, before SQLite touches it, what cannot be a
// ledger for mode: a directory, no file or an empty one where the ledger
// must exist. It only stats the file (see openSQLite); exists says a
// non-empty file is there for SQLite to check.
func checkSQLiteFile(abs, where string, mode openMode) (exists bool, err error) {
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if mode != openCreate {
			return false, notCreatedError{fmt.Errorf("ledger %s does not exist (no file %s): check the path", where, abs)}
		}
		return false, nil
	case err != nil:
		return false, fmt.Errorf("ledger %s: %w", where, err)
	case st.IsDir():
		return false, fmt.Errorf("ledger %s is a directory, not a SQLite database: name a file, e.g. %s", where, filepath.Join(where, "ledger.db"))
	case st.Size() == 0:
		if mode != openCreate {
			return false, notCreatedError{fmt.Errorf("ledger %s is an empty file, not a ledger yet: check the path", where)}
		}
		return false, nil
	}
	return true, nil
}

// sqliteDSN builds a file: URI for a read-write ledger's pools, so that the
// path is escaped; the driver sets the pragmas on every new connection.
func sqliteDSN(abs string, writer bool) string {
	params := []string{
		// busy_timeout first: the pragmas after it may need a lock that
		// another process holds.
		fmt.Sprintf("_pragma=busy_timeout(%d)", sqliteBusyTimeout.Milliseconds()),
		"_pragma=foreign_keys(1)",
		// Invariant 9: an acknowledged commit is on disk.
		"_pragma=synchronous(FULL)",
	}
	if writer {
		// WAL lets readers proceed while the writer works. IMMEDIATE takes
		// the write lock at BEGIN, before the transaction's first read, so
		// read-decide-save is never based on a stale read and never fails
		// half-way with SQLITE_BUSY on lock upgrade.
		params = append(params, "_pragma=journal_mode(WAL)", "_txlock=immediate")
	} else {
		// The read pool never writes; make a mistake loud.
		params = append(params, "_pragma=query_only(1)")
	}
	return sqliteURI(abs) + "?" + strings.Join(params, "&")
}

// sqliteReadOnlyDSN builds the URI of a read-only connection: mode=ro, or
// with immutable, a file on read-only media read alone (openSQLiteReadOnly).
func sqliteReadOnlyDSN(abs string, immutable bool) string {
	params := []string{"mode=ro", fmt.Sprintf("_pragma=busy_timeout(%d)", sqliteBusyTimeout.Milliseconds()), "_pragma=query_only(1)"}
	if immutable {
		params = append(params, "immutable=1")
	}
	return sqliteURI(abs) + "?" + strings.Join(params, "&")
}

func sqliteURI(abs string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
}

func sqliteOpenError(where string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB {
		return corruptError{fmt.Errorf("ledger %s is not a SQLite database (SQLite finds no database header in it): check the path; if it is the ledger, it is damaged: restore it from a backup (the file was left untouched)", where)}
	}
	if isCorrupt(err) {
		return damaged(where, err)
	}
	if strings.Contains(err.Error(), "unable to open") {
		return fmt.Errorf("ledger %s cannot be opened: check that the path exists and is readable (and writable unless read-only): %w", where, err)
	}
	return fmt.Errorf("ledger %s: %w", where, err)
}

// isCorrupt: SQLite found the file damaged or not a database.
func isCorrupt(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff // the primary code of an extended one
	return code == sqlite3.SQLITE_CORRUPT || code == sqlite3.SQLITE_NOTADB
}

func damaged(where string, err error) error {
	return corruptError{fmt.Errorf("ledger %s is damaged: SQLite cannot read it (%w): restore it from a backup", where, err)}
}

// corruptOr is err, or ErrCorrupt naming the file when err is SQLite's
// report of a damaged one.
func (l *Ledger) corruptOr(err error) error {
	if l.d == sqliteDialect && !errors.Is(err, ErrCorrupt) && isCorrupt(err) {
		return damaged(l.where, err)
	}
	return err
}

// noSuchTable: the query named a table the database does not have.
func noSuchTable(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqlite3.SQLITE_ERROR && strings.Contains(se.Error(), "no such table")
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01" // undefined_table
}

func openPostgres(ctx context.Context, rawURL string, readOnly bool) (*Ledger, error) {
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		// pgx redacts the password in its parse errors.
		return nil, fmt.Errorf("ledger URL is not a valid PostgreSQL URL: %w", err)
	}
	if readOnly {
		// The server refuses writes, whatever a caller tries.
		cfg.RuntimeParams["default_transaction_read_only"] = "on"
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "allot-ledger"
	}
	where := fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	db := openWriterPool(stdlib.GetConnector(*cfg), postgresDialect)
	// Bounded so that many workers (and parallel tests) stay well under the
	// server's max_connections.
	db.SetMaxOpenConns(10)
	db.SetMaxIdleConns(10)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("ledger %s: cannot connect: check the host, port, database and credentials: %w", where, err)
	}
	return &Ledger{d: postgresDialect, w: db, r: db, where: where}, nil
}

// redactURL hides a password in a URL that is about to appear in an error.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
