package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"allot/internal/ledger"
	"allot/internal/ledgertest"
)

// testLedger is an empty ledger database for one test, on one driver, with
// a raw connection that reads it around allot.
type testLedger struct {
	driver string
	url    string // the --ledger value
	raw    *sql.DB
}

// testLedgers returns a fresh ledger on SQLite and, when
// ALLOT_TEST_POSTGRES_DSN is set, one on PostgreSQL (its own schema), each
// created as the worker creates it (the starter's commands create none).
func testLedgers(t *testing.T) []testLedger {
	t.Helper()
	out := emptyTestLedgers(t)
	for _, l := range out {
		led, err := ledger.Open(context.Background(), l.url)
		if err != nil {
			t.Fatal(err)
		}
		led.Close()
	}
	return out
}

func emptyTestLedgers(t *testing.T) []testLedger {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger", "allot.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	out := []testLedger{{driver: "sqlite", url: "sqlite:" + path, raw: raw}}
	pgURL := ledgertest.DriverURL(t, "postgres")
	if pgURL == "" {
		t.Log("ALLOT_TEST_POSTGRES_DSN is not set: SQLite only")
		return out
	}
	pg, err := sql.Open("pgx", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() }) // before ledgertest drops the schema
	return append(out, testLedger{driver: "postgres", url: pgURL, raw: pg})
}

// dump reads every row of every table of the ledger, each row as text,
// sorted per table.
func (l testLedger) dump(t *testing.T) map[string][]string {
	t.Helper()
	ctx := context.Background()
	query := `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`
	if l.driver == "postgres" {
		query = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name`
	}
	rows, err := l.raw.QueryContext(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	if len(tables) < 8 {
		t.Fatalf("the ledger has tables %v: not migrated?", tables)
	}
	out := map[string][]string{}
	for _, table := range tables {
		rows, err := l.raw.QueryContext(ctx, `SELECT * FROM `+table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
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
				v := *(v.(*any))
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				fmt.Fprintf(&b, "%s=%v ", cols[i], v)
			}
			out[table] = append(out[table], b.String())
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		slices.Sort(out[table])
	}
	return out
}

// createLedger creates the ledger at url as the worker does: the starter's
// commands never create one.
func createLedger(t *testing.T, url string) {
	t.Helper()
	led, err := ledger.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	led.Close()
}
