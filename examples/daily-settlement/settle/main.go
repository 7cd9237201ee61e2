// Command settle computes one business date's total from the payments
// table of a SQLite database and stores it in daily_totals, keyed by the
// date. It is the exec step of the daily-settlement example, and the same
// command a crontab line would run.
//
//	settle --date 2026-03-29           settle a business date (the exec step)
//	settle init                        create the tables if they are missing
//	settle pay --date D --cents N      record one payment (for demos)
//
// The database is --db, else the environment variable SETTLE_DB.
//
// Settling is a full recompute, never an increment: in one write
// transaction it reads every payment of the date and upserts the date's
// row with their sum and count, replacing whatever the row held. Running it
// again for the same date (a retry, a duplicate start, a re-run by hand)
// leaves the same one row; a payment that arrived late is counted by the
// next run, never twice. It then writes total.json (--out) in its working
// directory, which allot runs it in: the episode's directory.
//
// Exit codes: 0 settled; 75 (EX_TEMPFAIL) the database stayed busy
// (locked by another writer) for --busy-timeout: nothing was written, run
// it again later (allot does, as retry_exit_codes says); 2 a bad command
// line; 1 anything else (a missing table, an unreadable database), which
// allot does not retry: it parks the episode with the message.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"allot/artifacts"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	// exitBusy is EX_TEMPFAIL of sysexits.h: allot's default retry exit
	// code.
	exitBusy = 75
)

// Environment variables.
const (
	envDB          = "SETTLE_DB"
	envBusyTimeout = "SETTLE_BUSY_TIMEOUT"
)

// schema is the source table and the result table.
const schema = `
CREATE TABLE IF NOT EXISTS payments (
	id            INTEGER PRIMARY KEY,
	business_date TEXT    NOT NULL,
	amount_cents  INTEGER NOT NULL,
	reference     TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS payments_business_date ON payments (business_date);
CREATE TABLE IF NOT EXISTS daily_totals (
	business_date TEXT    PRIMARY KEY,
	total_cents   INTEGER NOT NULL,
	payments      INTEGER NOT NULL,
	computed_at   TEXT    NOT NULL
);`

// Total is one business date's settlement: the row of daily_totals and the
// content of total.json.
type Total struct {
	BusinessDate string `json:"business_date"`
	TotalCents   int64  `json:"total_cents"`
	Payments     int64  `json:"payments"`
	ComputedAt   string `json:"computed_at"`
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// errBusy: the database stayed locked by another writer.
var errBusy = errors.New("the database is busy (locked by another writer)")

// usageError is a command line mistake.
type usageError struct{ error }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd := "settle"
	if len(args) > 0 && (args[0] == "init" || args[0] == "pay") {
		cmd, args = args[0], args[1:]
	}
	err := dispatch(ctx, cmd, args, getenv, stdout, stderr)
	var uerr usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &uerr):
		fmt.Fprintf(stderr, "settle %s: %v\n", cmd, err)
		return exitUsage
	case errors.Is(err, errBusy):
		fmt.Fprintf(stderr, "settle %s: %v; nothing was written: run it again later (exit %d)\n", cmd, err, exitBusy)
		return exitBusy
	default:
		fmt.Fprintf(stderr, "settle %s: %v\n", cmd, err)
		return exitError
	}
}

func dispatch(ctx context.Context, cmd string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("settle "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbPath := fs.String("db", getenv(envDB), "the SQLite database (env "+envDB+")")
	busy := fs.Duration("busy-timeout", 5*time.Second, "how long to wait for another writer's lock before exiting 75 (env "+envBusyTimeout+")")
	var date, out string
	var cents int64
	var reference string
	if cmd != "init" {
		fs.StringVar(&date, "date", "", "the business date, YYYY-MM-DD (required)")
	}
	switch cmd {
	case "settle":
		fs.StringVar(&out, "out", "total.json", "the file the total is written to, in the working directory")
	case "pay":
		fs.Int64Var(&cents, "cents", 0, "the payment's amount in cents (required)")
		fs.StringVar(&reference, "ref", "", "the payment's reference")
	}
	if v := getenv(envBusyTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return usageError{fmt.Errorf("%s=%q is not a duration (e.g. 5s)", envBusyTimeout, v)}
		}
		*busy = d
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if *dbPath == "" {
		return usageError{fmt.Errorf("no database: give --db PATH or set %s", envDB)}
	}
	if cmd != "init" {
		if _, err := time.Parse(time.DateOnly, date); err != nil {
			return usageError{fmt.Errorf("--date %q is not a date like 2026-03-29", date)}
		}
	}
	db, err := open(*dbPath, *busy, cmd == "init")
	if err != nil {
		return err
	}
	defer db.Close()
	switch cmd {
	case "init":
		if _, err := db.ExecContext(ctx, schema); err != nil {
			return classify(fmt.Errorf("create the tables: %w", err))
		}
		fmt.Fprintf(stdout, "tables ready in %s\n", *dbPath)
		return nil
	case "pay":
		if cents == 0 {
			return usageError{errors.New("--cents is required")}
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO payments (business_date, amount_cents, reference) VALUES (?, ?, ?)`, date, cents, reference); err != nil {
			return classify(fmt.Errorf("record the payment: %w", err))
		}
		return nil
	}
	total, err := settle(ctx, db, *dbPath, date, time.Now())
	if err != nil {
		return err
	}
	if err := writeTotal(out, total); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "settled %s: %d payments, %s\n", total.BusinessDate, total.Payments, money(total.TotalCents))
	return nil
}

// open opens the database. Only init may create it: settling a database
// that is not there would book a zero total for a typo.
func open(path string, busy time.Duration, create bool) (*sql.DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if create {
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return nil, err
		}
	} else if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("database %s: %w (create it with `settle init --db %s`)", path, err, abs)
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
	q := "_pragma=busy_timeout(" + strconv.FormatInt(busy.Milliseconds(), 10) + ")&_txlock=immediate"
	db, err := sql.Open("sqlite", u.String()+"?"+q)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// settle recomputes the date's total in one write transaction: the whole
// day is read and the row keyed by the date is replaced, so the result
// depends only on the payments, never on what ran before.
func settle(ctx context.Context, db *sql.DB, dbPath, date string, now time.Time) (Total, error) {
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock first
	if err != nil {
		return Total{}, classify(fmt.Errorf("begin: %w", err))
	}
	defer tx.Rollback()
	for _, table := range []string{"payments", "daily_totals"} {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&n); err != nil {
			return Total{}, classify(err)
		}
		if n == 0 {
			abs, _ := filepath.Abs(dbPath)
			return Total{}, fmt.Errorf("the database has no table %s: create the tables with `settle init --db %s`", table, abs)
		}
	}
	t := Total{BusinessDate: date, ComputedAt: now.UTC().Format(time.RFC3339)}
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(amount_cents), 0), count(*) FROM payments WHERE business_date = ?`, date).Scan(&t.TotalCents, &t.Payments); err != nil {
		return Total{}, classify(fmt.Errorf("read the payments of %s: %w", date, err))
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO daily_totals (business_date, total_cents, payments, computed_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (business_date) DO UPDATE SET total_cents = excluded.total_cents, payments = excluded.payments, computed_at = excluded.computed_at`,
		t.BusinessDate, t.TotalCents, t.Payments, t.ComputedAt); err != nil {
		return Total{}, classify(fmt.Errorf("store the total of %s: %w", date, err))
	}
	if err := tx.Commit(); err != nil {
		return Total{}, classify(fmt.Errorf("commit: %w", err))
	}
	return t, nil
}

// classify marks SQLite's busy and locked errors as errBusy.
func classify(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%w: %v", errBusy, err)
		}
	}
	return err
}

// writeTotal writes the total to path whole (artifacts.WriteFile: a
// temporary file, synced, renamed over it, the directory synced).
func writeTotal(path string, t Total) error {
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	_, err = artifacts.WriteFile(path, append(data, '\n'))
	return err
}

func money(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
}
