package ledger

// Health: what operators and the worker ask the ledger about itself and
// about what is going wrong: whether it can be written at all, which
// episodes keep retrying a step (and since when), which pipelines it holds,
// and how the runs of a set of keys ended (a backfill's progress).

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"allot"
)

// writtenTables are the tables the worker writes (inputs: an allocation
// claims one). On PostgreSQL
// CheckWritable asks for the privileges to insert into and update each of
// them, so that a role that may read but not write them is found at start.
var writtenTables = []string{"episodes", "step_records", "run_outcomes", "paid_tasks", "cost_entries", "operator_decisions", "inputs"}

// CheckWritable runs a write transaction that changes nothing: it rewrites
// one row of schema_migrations with its own values (on PostgreSQL it also
// checks the privileges to insert into and update every table the worker
// writes) and commits. It fails, naming the fix, when the ledger was opened
// read-only, when its SQLite file or directory cannot be written, or when a
// PostgreSQL role may not write the ledger's tables: the worker calls it at
// start, so such a ledger is found before the first allocation retries
// forever.
func (l *Ledger) CheckWritable(ctx context.Context) error {
	if l.readOnly {
		return fmt.Errorf("ledger %s was opened read-only: the worker needs it writable", l.where)
	}
	fix := "make the database file and its directory writable by the worker's user (SQLite writes a journal beside the file)"
	if l.d.name == postgresDialect.name {
		fix = "grant the worker's role INSERT and UPDATE on the ledger's tables (or connect as their owner)"
	}
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE schema_migrations SET name = name
			WHERE version = (SELECT MAX(version) FROM schema_migrations)`); err != nil {
			return err
		}
		if l.d.name != postgresDialect.name {
			return nil
		}
		var missing []string
		for _, table := range writtenTables {
			var ok bool
			if err := tx.QueryRowContext(ctx, l.d.q(`SELECT has_table_privilege(?, 'INSERT') AND has_table_privilege(?, 'UPDATE')`),
				table, table).Scan(&ok); err != nil {
				return fmt.Errorf("table %s: %w", table, err)
			}
			if !ok {
				missing = append(missing, table)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the role may not insert into or update %s", strings.Join(missing, ", "))
		}
		return nil
	})
	if err == nil {
		return nil
	}
	return fmt.Errorf("ledger %s cannot be written: %w: %s", l.where, err, fix)
}

// RetryingEpisode is an episode whose step keeps failing with errors a retry
// may fix: outcome "retrying" since Since (its outcome time), with the last
// error's type as Reason.
type RetryingEpisode struct {
	Pipeline  string    `json:"pipeline"`
	EpisodeID string    `json:"episode_id"`
	Reason    string    `json:"reason"`
	Since     time.Time `json:"since"`
	CreatedAt time.Time `json:"created_at"`
}

// RetryingEpisodes lists the episodes of a pipeline ("" = every pipeline)
// whose current outcome is "retrying", oldest first. It reads one range of
// the episodes_outcome_pipeline index (the retrying episodes of every
// pipeline, a handful, filtered here: with the pipeline in the query SQLite
// would rather read the pipeline's whole history by its primary key).
func (l *Ledger) RetryingEpisodes(ctx context.Context, pipeline string) ([]RetryingEpisode, error) {
	query, args := l.retryingQuery()
	rows, err := l.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: list retrying episodes: %w", l.where, err)
	}
	defer rows.Close()
	var out []RetryingEpisode
	for rows.Next() {
		var e RetryingEpisode
		if err := rows.Scan(&e.Pipeline, &e.EpisodeID, &e.Reason, dbTime{&e.Since}, dbTime{&e.CreatedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: read retrying episode: %w", l.where, err)
		}
		if pipeline != "" && e.Pipeline != pipeline {
			continue
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read retrying episodes: %w", l.where, err)
	}
	slices.SortFunc(out, func(a, b RetryingEpisode) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		if c := strings.Compare(a.Pipeline, b.Pipeline); c != 0 {
			return c
		}
		return strings.Compare(a.EpisodeID, b.EpisodeID)
	})
	return out, nil
}

// retryingQuery reads a range of the episodes_outcome_pipeline index: it is
// read on every metrics scrape, however long the history.
func (l *Ledger) retryingQuery() (string, []any) {
	// "outcome <> ''" lets SQLite use the partial outcome index (0006).
	return l.d.q(`SELECT pipeline, episode_id, outcome_reason, outcome_at, created_at FROM episodes
		WHERE outcome = ? AND outcome <> ''`), []any{allot.OutcomeRetrying}
}

// Stalled reports whether a retrying episode has been retrying for longer
// than stallAfter at now.
func (e RetryingEpisode) Stalled(stallAfter time.Duration, now time.Time) bool {
	return !e.Since.IsZero() && now.Sub(e.Since) > stallAfter
}

// CountStalled counts, per pipeline, the episodes that have been retrying
// for longer than their pipeline's stallAfter at now; pipelines with none
// are absent. It is read on every metrics scrape.
func (l *Ledger) CountStalled(ctx context.Context, stallAfter func(pipeline string) time.Duration, now time.Time) (map[string]int, error) {
	eps, err := l.RetryingEpisodes(ctx, "")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range eps {
		if e.Stalled(stallAfter(e.Pipeline), now) {
			out[e.Pipeline]++
		}
	}
	return out, nil
}

// HasPipeline reports whether the ledger holds an episode or a run of the
// pipeline.
func (l *Ledger) HasPipeline(ctx context.Context, pipeline string) (bool, error) {
	for _, table := range []string{"episodes", "run_outcomes"} {
		rows, err := l.r.QueryContext(ctx, l.d.q(`SELECT 1 FROM `+table+` WHERE pipeline = ? LIMIT 1`), pipeline)
		if err != nil {
			return false, fmt.Errorf("ledger %s: look for pipeline %s: %w", l.where, pipeline, err)
		}
		found := rows.Next()
		err = rows.Err()
		rows.Close()
		if err != nil {
			return false, fmt.Errorf("ledger %s: look for pipeline %s: %w", l.where, pipeline, err)
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

// PipelineNames lists, sorted, the pipelines the ledger holds episodes or
// runs of.
func (l *Ledger) PipelineNames(ctx context.Context) ([]string, error) {
	names, err := l.queryStrings(ctx, l.r, "list pipelines", `SELECT pipeline FROM episodes UNION SELECT pipeline FROM run_outcomes`)
	if err != nil {
		return nil, err
	}
	slices.Sort(names) // byte order, whatever the database's collation
	return names, nil
}

// keysPerQuery bounds the keys one IN list carries (SQLite allows 32766
// parameters, PostgreSQL 65535; smaller lists keep statements short).
const keysPerQuery = 500

// RunOutcomesOfKeys returns every recorded run of the pipeline's keys, in
// no particular order. Each look-up is a range of run_outcomes' primary
// key.
func (l *Ledger) RunOutcomesOfKeys(ctx context.Context, pipeline string, keys []string) ([]RunOutcome, error) {
	if pipeline == "" {
		return nil, invalid("run outcomes by key need a pipeline")
	}
	var out []RunOutcome
	for chunk := range slices.Chunk(keys, keysPerQuery) {
		args := []any{pipeline}
		for _, k := range chunk {
			args = append(args, k)
		}
		query := `SELECT pipeline, allocation_key, run_id, nominal_time, nominal_time_source, outcome, reason,
			episode_id, period, sequence, recorded_at FROM run_outcomes
			WHERE pipeline = ? AND allocation_key IN (?` + strings.Repeat(`, ?`, len(chunk)-1) + `)`
		rows, err := l.r.QueryContext(ctx, l.d.q(query), args...)
		if err != nil {
			return nil, fmt.Errorf("ledger %s: query run outcomes by key: %w", l.where, err)
		}
		for rows.Next() {
			var o RunOutcome
			if err := rows.Scan(&o.Pipeline, &o.AllocationKey, &o.RunID, dbTime{&o.NominalTime}, &o.NominalTimeSource,
				&o.Outcome, &o.Reason, &o.EpisodeID, &o.Period, &o.Sequence, dbTime{&o.RecordedAt}); err != nil {
				rows.Close()
				return nil, fmt.Errorf("ledger %s: read run outcome: %w", l.where, err)
			}
			out = append(out, o)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("ledger %s: read run outcomes: %w", l.where, err)
		}
	}
	return out, nil
}

// EpisodesPerKey counts the episodes bound to each of the pipeline's keys
// that has one (a key maps to one episode; more is the ambiguity check
// reports). Keys without an episode are absent. It answers a backfill's
// look-ups of many keys in a few queries instead of one per key.
func (l *Ledger) EpisodesPerKey(ctx context.Context, pipeline string, keys []string) (map[string]int, error) {
	if pipeline == "" {
		return nil, invalid("episodes by key need a pipeline")
	}
	out := map[string]int{}
	for chunk := range slices.Chunk(keys, keysPerQuery) {
		args := []any{pipeline}
		for _, k := range chunk {
			args = append(args, k)
		}
		query := `SELECT allocation_key, COUNT(*) FROM episodes
			WHERE pipeline = ? AND allocation_key IN (?` + strings.Repeat(`, ?`, len(chunk)-1) + `)
			GROUP BY allocation_key`
		rows, err := l.r.QueryContext(ctx, l.d.q(query), args...)
		if err != nil {
			return nil, fmt.Errorf("ledger %s: query episodes by key: %w", l.where, err)
		}
		for rows.Next() {
			var k string
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				rows.Close()
				return nil, fmt.Errorf("ledger %s: read episodes by key: %w", l.where, err)
			}
			out[k] = n
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("ledger %s: read episodes by key: %w", l.where, err)
		}
	}
	return out, nil
}

// CheckIntegrity runs SQLite's quick integrity check (PRAGMA quick_check:
// every page and b-tree well formed, without matching indexes to their
// tables) on a SQLite ledger; on PostgreSQL, whose server keeps its own
// pages, it is nil. A damaged file is ErrCorrupt naming what SQLite found
// and the way out: a backup, or what SQLite can still read copied to a new
// file and checked. The worker runs it at start and `starter check` before
// its audit, so damage is found before anything is decided on it.
func (l *Ledger) CheckIntegrity(ctx context.Context) error {
	if l.d != sqliteDialect {
		return nil
	}
	rows, err := l.r.QueryContext(ctx, `PRAGMA quick_check(5)`)
	if err != nil {
		return l.corruptOr(fmt.Errorf("ledger %s: integrity check: %w", l.where, err))
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return l.corruptOr(fmt.Errorf("ledger %s: integrity check: %w", l.where, err))
		}
		if s != "ok" {
			found = append(found, s)
		}
	}
	if err := rows.Err(); err != nil {
		return l.corruptOr(fmt.Errorf("ledger %s: integrity check: %w", l.where, err))
	}
	if len(found) == 0 {
		return nil
	}
	path := strings.TrimPrefix(l.where, "sqlite:")
	copyTo := strings.TrimSuffix(path, filepath.Ext(path)) + "-recovered" + filepath.Ext(path)
	return corruptError{fmt.Errorf("ledger %s is damaged: SQLite's integrity check found %s: stop every worker and restore the ledger from a backup; without one, copy out what SQLite can still read with `%s`, audit the copy with `%s`, and put it in the ledger's place",
		l.where, strings.Join(found, "; "), allot.RecoverSQLiteCommand(path, copyTo), allot.CheckCommand("sqlite:"+copyTo))}
}
