package ledger

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
)

// Migration 0006 (episode indexes): on SQLite it rebuilds the episodes
// table WITHOUT ROWID, under the foreign keys of four child tables; on both
// drivers it makes the outcome index partial. These tests build a v5 ledger
// with data in every table that names an episode and show that all of it
// comes through unchanged, every constraint still holds, and the ledger
// works on.

func TestSQLiteMigrateV5ToV6(t *testing.T) {
	testMigrateV5ToV6(t, newSQLiteURL(t))
}

func TestPostgresMigrateV5ToV6(t *testing.T) {
	testMigrateV5ToV6(t, newPostgresURL(t))
}

// v6Episodes is how many episodes the v5 ledger gets: enough for every
// b-tree of the table to span several pages.
const v6Episodes = 150

func testMigrateV5ToV6(t *testing.T, url string) {
	ctx := ctxT(t)
	v5 := ledgerAtVersion(t, url, 5)
	fillV5(t, v5)
	before := dumpTables(t, v5)
	beforeRuns := dumpRunOutcomes(t, v5)
	var beforeCols, beforeTypes []string
	if v5.d == sqliteDialect {
		beforeCols, beforeTypes = sqliteColumns(t, v5, "episodes"), sqliteStorageClasses(t, v5)
		var fk int
		if err := v5.w.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
			t.Fatalf("the writer migrates with PRAGMA foreign_keys = %d, %v; want 1: the test would not show that the rebuild keeps them", fk, err)
		}
	}
	if err := v5.Close(); err != nil {
		t.Fatal(err)
	}

	// Exactly 0006, so that the dumps compare the same tables and columns.
	v6 := ledgerAtVersion(t, url, 6)
	if diff := dumpDiff(before, dumpTables(t, v6)); diff != "" {
		t.Fatalf("migration 0006 changed the data: %s", diff)
	}
	if after := dumpRunOutcomes(t, v6); !slices.Equal(after, beforeRuns) {
		t.Fatalf("migration 0006 changed run_outcomes from\n  %s\nto\n  %s", strings.Join(beforeRuns, "\n  "), strings.Join(after, "\n  "))
	}
	for table, n := range map[string]int{"episodes": v6Episodes + 2, "step_records": v6Episodes + 1, "paid_tasks": 3,
		"cost_entries": 2, "operator_decisions": 2, "run_outcomes": v6Episodes + 2} {
		if got := countRows(t, v6, table); got != n {
			t.Errorf("%s has %d rows after migration, want %d", table, got, n)
		}
	}
	if v6.d == sqliteDialect {
		checkSQLiteV6Schema(t, v6, beforeCols)
		// The dumps print 5 and "5" alike: the storage classes, too.
		if after := sqliteStorageClasses(t, v6); !slices.Equal(after, beforeTypes) {
			t.Errorf("storage classes of episodes changed from\n  %s\nto\n  %s", strings.Join(beforeTypes, "\n  "), strings.Join(after, "\n  "))
		}
	} else {
		checkPostgresV6Schema(t, v6)
	}
	checkV6Constraints(t, v6)
	if err := v6.Close(); err != nil {
		t.Fatal(err)
	}

	// This build's ledger, every migration applied, reads and writes on.
	l := openURLT(t, url)
	mustBeAtLatestVersion(t, l)
	parked := mustEpisode(t, l, "weekly", "2026-W32-1")
	if parked.Outcome != string(allot.OutcomeNeedsAttention) || parked.OutcomeReason != "OutcomeUnknown" {
		t.Fatalf("the parked episode after migration: %+v", parked)
	}
	if done := mustEpisode(t, l, "weekly", "2026-W32-0"); done.Status != EpisodeCompleted || done.CompletedAt.IsZero() {
		t.Fatalf("the completed episode after migration: %+v", done)
	}
	if plan, err := l.EpisodePlan(ctx, "weekly", "2026-W32-0"); err != nil || plan != bigPlan() {
		t.Fatalf("the pinned plan after migration: %d bytes, %v; want %d", len(plan), err, len(bigPlan()))
	}
	if m, err := l.EpisodesNeedingAttention(ctx); err != nil || len(m) != 1 || m["weekly"] != 1 {
		t.Fatalf("EpisodesNeedingAttention after migration = %v, %v; want weekly: 1", m, err)
	}
	got, err := l.EpisodeOutcomeCounts(ctx, "weekly", time.Time{})
	wantCounts(t, "weekly episode outcomes after migration", got, err,
		oc("allocated", "", v6Episodes-2), oc("completed", "steps_completed", 1), oc("needs_attention", "OutcomeUnknown", 1))
	got, err = l.EpisodeOutcomeCounts(ctx, "weekly", t0.Add(time.Hour))
	wantCounts(t, "weekly episode outcomes since after migration", got, err, oc("allocated", "", 1))
	if r := alloc(t, l, "weekly", "k-new", "2026-W32", 0); r.Decision != DecisionAllocated || r.Episode.ID != fmt.Sprintf("2026-W32-%d", v6Episodes) {
		t.Fatalf("allocation after migration: %+v", r)
	}
	if r := alloc(t, l, "weekly", "k-1", "2026-W32", 0); r.Decision != DecisionReused || r.Episode.ID != "2026-W32-1" {
		t.Fatalf("reuse after migration: %+v", r)
	}
	mustEpisodeOutcome(t, l, "daily", "2026-08-03-0", "needs_attention", "OperatorHold", t0.Add(2*time.Hour))
	if m, err := l.EpisodesNeedingAttention(ctx); err != nil || len(m) != 2 || m["daily"] != 1 {
		t.Fatalf("EpisodesNeedingAttention = %v, %v; want daily: 1 too", m, err)
	}
	mustCheckClean(t, l, "")
	// Opening again applies nothing more.
	mustBeAtLatestVersion(t, openURLT(t, url))
}

func bigPlan() string {
	// Larger than a page: on SQLite it spills to overflow pages, which the
	// rebuild must carry over.
	return `{"steps":[` + strings.Repeat(`{"name":"step","kind":"local"},`, 200) + `{"name":"last","kind":"local"}]}`
}

// fillV5 writes, with raw SQL as the v5 build would, episodes in two
// pipelines (one completed with a pinned plan, one parked, one with a
// created_at after t0) and rows naming them in every child table, and run
// outcomes.
func fillV5(t *testing.T, l *Ledger) {
	t.Helper()
	for i := range v6Episodes {
		id := EpisodeID("2026-W32", i)
		rawInsertEpisode(t, l, "weekly", id, "2026-W32", i, fmt.Sprintf("k-%d", i))
		rawExec(t, l, `INSERT INTO step_records (pipeline, episode_id, step, status, artifact, sha256, completed_at, revision, outputs, result)
			VALUES ('weekly', ?, 'plan', 'completed', 'plan.json', 'abc', ?, 1, '[{"path":"plan.json","sha256":"abc"}]', '{"ok":true}')`,
			id, l.d.timeArg(t0))
		rawInsertRun(t, l, "weekly", fmt.Sprintf("k-%d", i), "2026-W32", i)
	}
	rawExec(t, l, `UPDATE episodes SET status = 'completed', completed_at = ?, outcome = 'completed', outcome_at = ?, plan = ?
		WHERE pipeline = 'weekly' AND episode_id = '2026-W32-0'`, l.d.timeArg(t0.Add(time.Hour)), l.d.timeArg(t0.Add(time.Hour)), bigPlan())
	rawExec(t, l, `UPDATE episodes SET outcome = 'needs_attention', outcome_reason = 'OutcomeUnknown', outcome_at = ?
		WHERE pipeline = 'weekly' AND episode_id = '2026-W32-1'`, l.d.timeArg(t0.Add(time.Hour)))
	rawExec(t, l, `UPDATE episodes SET created_at = ? WHERE pipeline = 'weekly' AND episode_id = '2026-W32-2'`, l.d.timeArg(t0.Add(time.Hour)))
	rawInsertEpisode(t, l, "daily", "2026-08-03-0", "2026-08-03", 0, "d-0")
	rawInsertEpisode(t, l, "daily", "2026-08-03-1", "2026-08-03", 1, "d-1")
	rawInsertStep(t, l, "daily", "2026-08-03-1", "fetch", "completed")
	rawInsertRun(t, l, "daily", "d-0", "2026-08-03", 0)
	rawInsertRun(t, l, "daily", "d-1", "2026-08-03", 1)

	ep := Episode{Pipeline: "weekly", ID: "2026-W32-0"}
	done := paidRef(ep, "render", 0)
	rawInsertPaidTask(t, l, done, testKey(done), "succeeded", "vr-1")
	rawInsertCost(t, l, "vr-1", done, 250)
	redone := paidRef(ep, "render", 1)
	rawInsertPaidTask(t, l, redone, testKey(redone), "succeeded", "vr-2")
	rawInsertCost(t, l, "vr-2", redone, 300)
	rawExec(t, l, `UPDATE paid_tasks SET owner = 'attempt-1', maybe_sent = ?, resubmit_request = 'u-9'
		WHERE pipeline = 'weekly' AND episode_id = '2026-W32-0' AND revision = 1`, true)
	daily := paidRef(Episode{Pipeline: "daily", ID: "2026-08-03-1"}, "voice", 0)
	rawInsertPaidTask(t, l, daily, testKey(daily), "intent", "")
	for _, d := range []struct{ pipeline, episode, request, action string }{
		{"weekly", "2026-W32-0", "u-1", string(allot.ActionApprove)},
		{"daily", "2026-08-03-1", "u-2", string(allot.ActionAbandon)},
	} {
		rawExec(t, l, `INSERT INTO operator_decisions (request_id, pipeline, episode_id, step, revision, action, remote_ref, reason, decided_at)
			VALUES (?, ?, ?, '', 0, ?, '', 'checked', ?)`, d.request, d.pipeline, d.episode, d.action, l.d.timeArg(t0))
	}
}

// rawInsertRun records the run that allocated an episode, with the columns
// every schema version has.
func rawInsertRun(t *testing.T, l *Ledger, pipeline, key, period string, seq int) {
	t.Helper()
	rawExec(t, l, `INSERT INTO run_outcomes (pipeline, allocation_key, run_id, nominal_time, nominal_time_source, outcome, reason,
			episode_id, period, sequence, recorded_at)
		VALUES (?, ?, 'run-1', ?, 'schedule', 'allocated', 'new_episode', ?, ?, ?, ?)`,
		pipeline, key, l.d.timeArg(t0), EpisodeID(period, seq), period, seq, l.d.timeArg(t0))
}

// dumpRunOutcomes prints every row of run_outcomes, every column, in key
// order.
func dumpRunOutcomes(t *testing.T, l *Ledger) []string {
	t.Helper()
	rows, err := l.w.QueryContext(ctxT(t), `SELECT * FROM run_outcomes ORDER BY pipeline, allocation_key, run_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		for i := range vals {
			vals[i] = new(any)
		}
		if err := rows.Scan(vals...); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for i, v := range vals {
			fmt.Fprintf(&b, "%s=%v ", cols[i], *(v.(*any)))
		}
		out = append(out, b.String())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sqliteColumns describes a table's columns as SQLite declares them: name,
// type, NOT NULL, default and primary-key position.
func sqliteColumns(t *testing.T, l *Ledger, table string) []string {
	t.Helper()
	rows, err := l.w.QueryContext(ctxT(t), `SELECT name, type, "notnull", COALESCE(dflt_value, 'NULL'), pk FROM pragma_table_info(?) ORDER BY cid`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var (
			name, typ, dflt string
			notNull, pk     int
		)
		if err := rows.Scan(&name, &typ, &notNull, &dflt, &pk); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s notnull=%d default=%s pk=%d", name, typ, notNull, dflt, pk))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sqliteStorageClasses lists, per episode, the storage class SQLite holds
// each column's value in.
func sqliteStorageClasses(t *testing.T, l *Ledger) []string {
	t.Helper()
	rows, err := l.w.QueryContext(ctxT(t), `SELECT pipeline || '/' || episode_id, typeof(pipeline), typeof(episode_id), typeof(period),
		typeof(sequence), typeof(allocation_key), typeof(nominal_time), typeof(created_at), typeof(status), typeof(completed_at),
		typeof(outcome), typeof(outcome_reason), typeof(outcome_at), typeof(plan) FROM episodes ORDER BY pipeline, episode_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		cols := make([]string, 14)
		ptrs := make([]any, len(cols))
		for i := range cols {
			ptrs[i] = &cols[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join(cols, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func checkSQLiteV6Schema(t *testing.T, l *Ledger, beforeCols []string) {
	t.Helper()
	ctx := ctxT(t)
	if after := sqliteColumns(t, l, "episodes"); !slices.Equal(after, beforeCols) {
		t.Errorf("episodes columns changed from\n  %s\nto\n  %s", strings.Join(beforeCols, "\n  "), strings.Join(after, "\n  "))
	}
	// Clustered on its primary key: no rowid.
	var withoutRowid int
	if err := l.w.QueryRowContext(ctx, `SELECT wr FROM pragma_table_list WHERE name = 'episodes' AND schema = 'main'`).Scan(&withoutRowid); err != nil || withoutRowid != 1 {
		t.Errorf("episodes is not WITHOUT ROWID after migration (wr = %d, %v)", withoutRowid, err)
	}
	if _, err := l.w.ExecContext(ctx, `SELECT rowid FROM episodes`); err == nil {
		t.Error("episodes still has a rowid")
	}
	// The indexes, with their uniqueness; only the outcome index is partial.
	rows, err := l.w.QueryContext(ctx, `SELECT name, "unique", partial FROM pragma_index_list('episodes') ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var idx []string
	for rows.Next() {
		var (
			name            string
			unique, partial int
		)
		if err := rows.Scan(&name, &unique, &partial); err != nil {
			t.Fatal(err)
		}
		idx = append(idx, fmt.Sprintf("%s unique=%d partial=%d", name, unique, partial))
	}
	_ = rows.Close()
	want := []string{
		"episodes_outcome_pipeline unique=0 partial=1",
		"episodes_pipeline_created unique=0 partial=0",
		"episodes_pipeline_key_uniq unique=1 partial=0",
		"episodes_pipeline_period_seq_uniq unique=1 partial=0",
		"sqlite_autoindex_episodes_1 unique=1 partial=0", // the primary key
	}
	if !slices.Equal(idx, want) {
		t.Errorf("episodes indexes after migration:\n  %s\nwant\n  %s", strings.Join(idx, "\n  "), strings.Join(want, "\n  "))
	}
	var copies int
	if err := l.w.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_schema WHERE name = 'episodes_v5_copy'`).Scan(&copies); err != nil || copies != 0 {
		t.Errorf("the migration left its copy of the old table behind (%d, %v)", copies, err)
	}
	// Every child row has its episode.
	rows, err = l.w.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			table, parent string
			rowid, fkid   sql.NullInt64
		)
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			t.Fatal(err)
		}
		t.Errorf("foreign_key_check after migration: %s row %v has no %s", table, rowid, parent)
	}
	_ = rows.Close()
}

func checkPostgresV6Schema(t *testing.T, l *Ledger) {
	t.Helper()
	var def string
	if err := l.w.QueryRowContext(ctxT(t), `SELECT indexdef FROM pg_indexes
		WHERE schemaname = current_schema() AND indexname = 'episodes_outcome_pipeline'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, "WHERE") || !strings.Contains(def, "outcome <> ''") {
		t.Errorf("episodes_outcome_pipeline after migration is %q, want it partial on outcome <> ''", def)
	}
}

// checkV6Constraints shows that the rebuilt table refuses what the v5 one
// refused and fills in what it filled in: foreign keys from child tables,
// CHECKs, NOT NULLs, the primary key and the defaults.
func checkV6Constraints(t *testing.T, l *Ledger) {
	t.Helper()
	ctx := ctxT(t)
	at := l.d.timeArg(t0)
	for _, tc := range []struct {
		what  string
		query string
		args  []any
	}{
		{"a step of a missing episode", `INSERT INTO step_records (pipeline, episode_id, step, status, completed_at) VALUES ('weekly', 'nope-0', 's', 'completed', ?)`, []any{at}},
		{"a paid task of a missing episode", `INSERT INTO paid_tasks (pipeline, episode_id, step, revision, state, created_at, updated_at) VALUES ('weekly', 'nope-0', 's', 0, 'planned', ?, ?)`, []any{at, at}},
		{"a cost of a missing episode", `INSERT INTO cost_entries (remote_ref, pipeline, episode_id, step, revision, amount, currency, recorded_at) VALUES ('vr-x', 'weekly', 'nope-0', 's', 0, 1, 'EUR', ?)`, []any{at}},
		{"a decision of a missing episode", `INSERT INTO operator_decisions (request_id, pipeline, episode_id, action, decided_at) VALUES ('u-x', 'weekly', 'nope-0', 'approve', ?)`, []any{at}},
		{"an episode's removal under its steps", `DELETE FROM episodes WHERE pipeline = 'weekly' AND episode_id = '2026-W32-3'`, nil},
		{"a negative sequence", `INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at) VALUES ('x', 'p--1', 'p', -1, 'kx', ?, ?)`, []any{at, at}},
		{"an unknown status", `INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status) VALUES ('x', 'p-0', 'p', 0, 'kx', ?, ?, 'lost')`, []any{at, at}},
		{"no nominal time", `INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, created_at) VALUES ('x', 'p-0', 'p', 0, 'kx', ?)`, []any{at}},
		{"a NULL outcome", `INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, outcome) VALUES ('x', 'p-0', 'p', 0, 'kx', ?, ?, NULL)`, []any{at, at}},
		{"a NULL pipeline", `INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at) VALUES (NULL, 'p-0', 'p', 0, 'kx', ?, ?)`, []any{at, at}},
		{"a duplicate episode ID", `INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at) VALUES ('weekly', '2026-W32-0', 'other', 0, 'kx', ?, ?)`, []any{at, at}},
		{"a duplicate key", `INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at) VALUES ('weekly', 'other-0', 'other', 0, 'k-0', ?, ?)`, []any{at, at}},
		{"a duplicate sequence", `INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at) VALUES ('weekly', 'x-0', '2026-W32', 0, 'kx', ?, ?)`, []any{at, at}},
	} {
		if _, err := l.w.ExecContext(ctx, l.d.q(tc.query), tc.args...); err == nil {
			t.Errorf("the migrated ledger accepted %s", tc.what)
		}
	}
	// The defaults of every column a v5 insert could leave out.
	rawExec(t, l, `INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at)
		VALUES ('defaults', 'p-0', 'p', 0, 'kd', ?, ?)`, at, at)
	var status, outcome, reason, plan string
	var completedAt, outcomeAt any
	if err := l.w.QueryRowContext(ctx, `SELECT status, outcome, outcome_reason, plan, completed_at, outcome_at FROM episodes
		WHERE pipeline = 'defaults'`).Scan(&status, &outcome, &reason, &plan, &completedAt, &outcomeAt); err != nil {
		t.Fatal(err)
	}
	if status != "allocated" || outcome != "" || reason != "" || plan != "" || completedAt != nil || outcomeAt != nil {
		t.Errorf("defaults after migration: status %q, outcome %q, reason %q, plan %q, completed_at %v, outcome_at %v",
			status, outcome, reason, plan, completedAt, outcomeAt)
	}
	rawExec(t, l, `DELETE FROM episodes WHERE pipeline = 'defaults'`)
}

// The SQLite rebuild leans on defer_foreign_keys: dropping the parent table
// counts the child rows it orphans, putting the parents back counts them
// back, and COMMIT fails if any is left. This shows that on the pattern
// itself, with the ledger's connection settings: a rebuild that loses a
// parent row fails whole, one that keeps them all commits.
func TestSQLiteRebuildUnderForeignKeys(t *testing.T) {
	for _, lose := range []bool{false, true} {
		t.Run(fmt.Sprintf("lose=%v", lose), func(t *testing.T) {
			ctx := ctxT(t)
			db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(t.TempDir(), "fk.db"), true))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			if _, err := db.ExecContext(ctx, `
				CREATE TABLE parent (a TEXT NOT NULL, b TEXT NOT NULL, PRIMARY KEY (a, b));
				CREATE TABLE child (a TEXT NOT NULL, b TEXT NOT NULL, n INTEGER NOT NULL, FOREIGN KEY (a, b) REFERENCES parent (a, b));
				INSERT INTO parent VALUES ('p', '1'), ('p', '2'), ('q', '1');
				INSERT INTO child VALUES ('p', '1', 1), ('p', '1', 2), ('p', '2', 3), ('q', '1', 4);`); err != nil {
				t.Fatal(err)
			}
			keep := "1 = 1"
			if lose {
				keep = "NOT (a = 'p' AND b = '2')"
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tx.ExecContext(ctx, `
				PRAGMA defer_foreign_keys = ON;
				CREATE TABLE parent_copy AS SELECT a, b FROM parent;
				DROP TABLE parent;
				CREATE TABLE parent (a TEXT NOT NULL, b TEXT NOT NULL, PRIMARY KEY (a, b)) WITHOUT ROWID;
				INSERT INTO parent (a, b) SELECT a, b FROM parent_copy WHERE `+keep+` ORDER BY a, b;
				DROP TABLE parent_copy;`)
			if err != nil {
				_ = tx.Rollback()
				t.Fatalf("rebuild: %v", err)
			}
			err = tx.Commit()
			if lose && (err == nil || !strings.Contains(err.Error(), "FOREIGN KEY")) {
				t.Fatalf("COMMIT of a rebuild that orphaned a child row = %v, want a foreign key failure", err)
			}
			if !lose && err != nil {
				t.Fatalf("COMMIT of a rebuild that kept every parent: %v", err)
			}
			var parents int
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM parent`).Scan(&parents); err != nil || parents != 3 {
				t.Fatalf("%d parents after the rebuild, %v; want 3 (kept, or rolled back)", parents, err)
			}
		})
	}
}

// A v5 ledger that already holds an orphan (a child row written with
// foreign keys off, as a legacy import might have) migrates all the same:
// the rebuild neither fails on it nor drops it; Check is what reports it.
func TestSQLiteMigrateV5ToV6KeepsOrphans(t *testing.T) {
	ctx := ctxT(t)
	url := newSQLiteURL(t)
	v5 := ledgerAtVersion(t, url, 5)
	rawInsertEpisode(t, v5, "weekly", "2026-W32-0", "2026-W32", 0, "k-0")
	rawInsertStep(t, v5, "weekly", "2026-W32-0", "plan", "completed")
	// The writer is a single connection, so the pragma holds for the insert.
	rawExec(t, v5, `PRAGMA foreign_keys = OFF`)
	rawInsertStep(t, v5, "weekly", "2026-W32-9", "plan", "completed")
	rawExec(t, v5, `PRAGMA foreign_keys = ON`)
	before := dumpTables(t, v5)
	if err := v5.Close(); err != nil {
		t.Fatal(err)
	}
	v6 := ledgerAtVersion(t, url, 6)
	defer v6.Close()
	if diff := dumpDiff(before, dumpTables(t, v6)); diff != "" {
		t.Fatalf("migration 0006 changed the data: %s", diff)
	}
	var orphans int
	if err := v6.w.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_foreign_key_check('step_records')`).Scan(&orphans); err != nil || orphans != 1 {
		t.Fatalf("foreign_key_check after migration: %d orphans, %v; want the one there was", orphans, err)
	}
}
