package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type env map[string]string

func (e env) get(name string) string { return e[name] }

// settleCmd runs the command in dir, as allot runs it in the episode's
// directory, and returns its exit code and output.
func settleCmd(t *testing.T, dir string, e env, args ...string) (int, string) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	var out bytes.Buffer
	code := run(context.Background(), args, e.get, &out, &out)
	return code, out.String()
}

func newDB(t *testing.T) (string, env) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "settlement.db")
	e := env{envDB: db}
	if code, out := settleCmd(t, t.TempDir(), e, "init"); code != exitOK {
		t.Fatalf("init: %d %s", code, out)
	}
	return db, e
}

func pay(t *testing.T, e env, date, cents string) {
	t.Helper()
	if code, out := settleCmd(t, t.TempDir(), e, "pay", "--date", date, "--cents", cents); code != exitOK {
		t.Fatalf("pay: %d %s", code, out)
	}
}

func rows(t *testing.T, path string) []Total {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs, err := db.Query(`SELECT business_date, total_cents, payments, computed_at FROM daily_totals ORDER BY business_date`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []Total
	for rs.Next() {
		var r Total
		if err := rs.Scan(&r.BusinessDate, &r.TotalCents, &r.Payments, &r.ComputedAt); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// Settling is a full recompute: run again it replaces the date's row with
// the sum of the date's payments (a late one included), never adds to it,
// and leaves other dates alone. total.json says the same.
func TestSettleRecomputesTheDayAndUpsertsItsRow(t *testing.T) {
	path, e := newDB(t)
	pay(t, e, "2026-03-29", "1250")
	pay(t, e, "2026-03-29", "-250")
	pay(t, e, "2026-03-28", "999")
	pay(t, e, "2026-03-30", "1")
	dir := t.TempDir()
	for range 2 {
		if code, out := settleCmd(t, dir, e, "--date", "2026-03-29"); code != exitOK || !strings.Contains(out, "settled 2026-03-29: 2 payments, 10.00") {
			t.Fatalf("settle: %d %s", code, out)
		}
	}
	if got := rows(t, path); len(got) != 1 || got[0].BusinessDate != "2026-03-29" || got[0].TotalCents != 1000 || got[0].Payments != 2 {
		t.Fatalf("daily_totals %+v, want one row of 1000 cents from 2 payments", got)
	}
	pay(t, e, "2026-03-29", "500") // late
	if code, out := settleCmd(t, dir, e, "--date", "2026-03-29"); code != exitOK {
		t.Fatalf("settle: %d %s", code, out)
	}
	got := rows(t, path)
	if len(got) != 1 || got[0].TotalCents != 1500 || got[0].Payments != 3 {
		t.Fatalf("daily_totals after a late payment %+v, want one row of 1500 cents from 3 payments", got)
	}
	var file Total
	data, err := os.ReadFile(filepath.Join(dir, "total.json"))
	if err != nil || json.Unmarshal(data, &file) != nil || file != got[0] {
		t.Fatalf("total.json %s (%v), want %+v", data, err, got[0])
	}
	// A day without payments settles to zero, as its own row.
	if code, out := settleCmd(t, dir, e, "--date", "2026-03-31"); code != exitOK {
		t.Fatalf("settle: %d %s", code, out)
	}
	if got := rows(t, path); len(got) != 2 || got[1].BusinessDate != "2026-03-31" || got[1].TotalCents != 0 || got[1].Payments != 0 {
		t.Fatalf("daily_totals %+v", got)
	}
}

// Another writer holding the database: exit 75 after the busy timeout,
// nothing written; once it lets go, the same command settles.
func TestSettleExits75WhileTheDatabaseIsBusy(t *testing.T) {
	path, e := newDB(t)
	pay(t, e, "2026-03-29", "700")
	holder, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	conn, err := holder.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	e[envBusyTimeout] = "50ms"
	dir := t.TempDir()
	code, out := settleCmd(t, dir, e, "--date", "2026-03-29")
	if code != exitBusy || !strings.Contains(out, "busy") {
		t.Fatalf("settle while another writer holds the database: %d %s, want exit %d", code, out, exitBusy)
	}
	if _, err := os.Stat(filepath.Join(dir, "total.json")); !os.IsNotExist(err) {
		t.Fatalf("a busy settle wrote total.json (%v)", err)
	}
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if code, out := settleCmd(t, dir, e, "--date", "2026-03-29"); code != exitOK {
		t.Fatalf("settle after the lock: %d %s", code, out)
	}
	if got := rows(t, path); len(got) != 1 || got[0].TotalCents != 700 {
		t.Fatalf("daily_totals %+v", got)
	}
}

// What retrying cannot fix exits 1 (allot parks) or 2, never 75: a
// database that is not there is not created, a missing table is named, and
// a date that is not one is refused.
func TestSettleRefusesWhatARetryCannotFix(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.db")
	if code, out := settleCmd(t, dir, env{envDB: missing}, "--date", "2026-03-29"); code != exitError || !strings.Contains(out, "settle init --db "+missing) {
		t.Fatalf("settle without a database: %d %s", code, out)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("settle created the database it was not given (%v)", err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := settleCmd(t, dir, env{envDB: empty}, "--date", "2026-03-29"); code != exitError || !strings.Contains(out, "no table payments") {
		t.Fatalf("settle without tables: %d %s", code, out)
	}
	_, e := newDB(t)
	for _, args := range [][]string{{"--date", "2026-02-30"}, {"--date", "yesterday"}, {}, {"--date", "2026-03-29", "extra"}} {
		if code, out := settleCmd(t, dir, e, args...); code != exitUsage {
			t.Fatalf("settle %q: %d %s, want %d", args, code, out, exitUsage)
		}
	}
	if code, out := settleCmd(t, dir, env{}, "--date", "2026-03-29"); code != exitUsage || !strings.Contains(out, envDB) {
		t.Fatalf("settle without a database named: %d %s", code, out)
	}
}
