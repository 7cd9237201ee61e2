package ledger

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// newSQLiteURL names a fresh database file, removed with the test's
// temporary directory.
func newSQLiteURL(t *testing.T) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "ledger.db")
}

func openSQLiteT(t *testing.T) *Ledger {
	t.Helper()
	return openURLT(t, newSQLiteURL(t))
}

func TestSQLiteConformance(t *testing.T) {
	runConformance(t, newSQLiteURL)
}

func TestSQLitePragmas(t *testing.T) {
	l := openSQLiteT(t)
	// Both pools: the writer that commits and the readers.
	for _, pool := range []struct {
		name string
		db   *sql.DB
	}{{"writer", l.w}, {"reader", l.r}} {
		db := pool.db
		for pragma, want := range map[string]string{
			"journal_mode": "wal",
			"synchronous":  "2", // FULL
			"foreign_keys": "1",
			"busy_timeout": "10000",
		} {
			var got string
			if err := db.QueryRowContext(ctxT(t), "PRAGMA "+pragma).Scan(&got); err != nil {
				t.Fatalf("%s: PRAGMA %s: %v", pool.name, pragma, err)
			}
			if !strings.EqualFold(got, want) {
				t.Errorf("%s: PRAGMA %s = %q, want %q", pool.name, pragma, got, want)
			}
		}
	}
}

func TestSQLiteNotADatabase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "notes.txt")
	content := []byte("these are my notes, not a ledger\nplease do not overwrite them\n")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(context.Context, string) (*Ledger, error){"Open": Open, "OpenReadOnly": OpenReadOnly} {
		l, err := open(ctxT(t), "sqlite:"+path)
		if err == nil {
			_ = l.Close()
			t.Fatalf("%s accepted a text file as a ledger", name)
		}
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a SQLite database") {
			t.Errorf("%s error %q should name %s and say it is not a SQLite database", name, err, path)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) {
		t.Fatalf("the file changed: %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("opening left files behind: %v", entries)
	}
}

func TestSQLiteOpenReadOnlyMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "ledger.db")
	_, err := OpenReadOnly(ctxT(t), "sqlite:"+path)
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), path) || !errors.Is(err, ErrNotCreated) {
		t.Fatalf("OpenReadOnly(missing) = %v, want ErrNotCreated naming the path", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenReadOnly created %s: %v", path, err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenReadOnly created the directory: %v", err)
	}
}

func TestSQLiteReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(ctxT(t), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	ro, err := OpenReadOnly(ctxT(t), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	got, err := ro.Episode(ctxT(t), "weekly", ep.ID)
	if err != nil || got != ep {
		t.Fatalf("read-only Episode = %+v, %v; want %+v", got, err, ep)
	}
	if vs, err := ro.Check(ctxT(t), ""); err != nil || len(vs) != 0 {
		t.Fatalf("read-only Check = %v, %v", vs, err)
	}
	if _, err := ro.Allocate(ctxT(t), AllocateInput{Pipeline: "weekly", Key: "k2", Period: "2026-W32", NominalTime: t0}); err == nil {
		t.Fatal("a read-only ledger allocated")
	}
	// Even around the API, the connection refuses writes.
	if _, err := ro.w.ExecContext(ctxT(t), `DELETE FROM episodes`); err == nil {
		t.Fatal("a read-only connection deleted rows")
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("OpenReadOnly changed the database file")
	}
}

func TestSQLiteReopenAndParentDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "ledger.db")
	l, err := Open(ctxT(t), "sqlite:"+path)
	if err != nil {
		t.Fatalf("Open did not create the parent directories: %v", err)
	}
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	_ = l.Close()

	// Migrations run once; the data survives a reopen.
	l, err = Open(ctxT(t), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n, want := countRows(t, l, "schema_migrations"), migrationCount(t, l); n != want {
		t.Fatalf("%d rows in schema_migrations after two opens, want %d", n, want)
	}
	if r := alloc(t, l, "weekly", "k", "2026-W32", 0); r.Decision != DecisionReused || r.Episode != ep {
		t.Fatalf("after reopen: %+v, want reused %+v", r, ep)
	}
}

func TestSQLiteNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(ctxT(t), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	rawExec(t, l, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, '0099_future.sql', 'x')`)
	_ = l.Close()
	for name, open := range map[string]func(context.Context, string) (*Ledger, error){"Open": Open, "OpenReadOnly": OpenReadOnly} {
		if l, err := open(ctxT(t), "sqlite:"+path); err == nil || !strings.Contains(err.Error(), "upgrade") {
			if l != nil {
				_ = l.Close()
			}
			t.Errorf("%s of a newer schema = %v, want an error saying to upgrade", name, err)
		}
	}
}

func TestOpenUnsupportedURL(t *testing.T) {
	for _, u := range []string{"", "ledger.db", "mysql://root:hunter2@db/allot", "sqlite:"} {
		l, err := Open(ctxT(t), u)
		if err == nil {
			_ = l.Close()
			t.Fatalf("Open(%q) succeeded", u)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q) leaked the password: %v", u, err)
		}
		if !strings.Contains(err.Error(), "sqlite:PATH") {
			t.Errorf("Open(%q) = %v, want the accepted forms named", u, err)
		}
	}
}

// Two Ledgers on one file stand for two worker processes: each has its own
// writer connection, so only SQLite's lock (BEGIN IMMEDIATE + busy_timeout)
// keeps their allocations apart.
func TestSQLiteTwoProcessesShareOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	var ls [2]*Ledger
	for i := range ls {
		l, err := Open(ctxT(t), "sqlite:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ls[i] = l
	}
	const perLedger = 25
	var wg sync.WaitGroup
	errs := make(chan error, 2*perLedger)
	for i := range 2 * perLedger {
		wg.Go(func() {
			r, err := ls[i%2].Allocate(ctxT(t), AllocateInput{Pipeline: "weekly", Key: fmt.Sprintf("k%d", i), Period: "2026-W32", NominalTime: t0})
			if err == nil && r.Decision != DecisionAllocated {
				err = fmt.Errorf("decision %s", r.Decision)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	eps, err := ls[0].ListEpisodes(ctxT(t), "weekly", "2026-W32")
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 2*perLedger {
		t.Fatalf("%d episodes, want %d", len(eps), 2*perLedger)
	}
	mustCheckClean(t, ls[1], "")
}
