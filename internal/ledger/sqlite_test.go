package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
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

// dirState lists dir: each entry's name with its size and modification
// time.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fmt.Sprintf("%d bytes, modified %s", fi.Size(), fi.ModTime().Format(time.RFC3339Nano))
	}
	return out
}

func dirDiff(before, after map[string]string) string {
	var diff []string
	for name, was := range before {
		if now, ok := after[name]; !ok {
			diff = append(diff, name+" removed")
		} else if now != was {
			diff = append(diff, fmt.Sprintf("%s changed from %s to %s", name, was, now))
		}
	}
	for name, now := range after {
		if _, ok := before[name]; !ok {
			diff = append(diff, fmt.Sprintf("%s created (%s)", name, now))
		}
	}
	slices.Sort(diff)
	return strings.Join(diff, "; ")
}

// fileState is a file's bytes, size and modification time.
func fileState(t *testing.T, path string) string {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d bytes, modified %s, sha256 %x", st.Size(), st.ModTime().Format(time.RFC3339Nano), sha256.Sum256(data))
}

// onlySQLiteCompanions fails unless what dir holds beyond the names before
// is the ledger's -wal and -shm, which SQLite creates for any reader of a
// WAL database, the -wal empty: a reader never writes the log.
func onlySQLiteCompanions(t *testing.T, dir, ledger string, before map[string]string) {
	t.Helper()
	for name, state := range dirState(t, dir) {
		if _, ok := before[name]; ok {
			continue
		}
		switch name {
		case ledger + "-shm":
		case ledger + "-wal":
			if !strings.HasPrefix(state, "0 bytes") {
				t.Errorf("a read-only open wrote the log: %s is %s", name, state)
			}
		default:
			t.Errorf("a read-only open created %s (%s)", name, state)
		}
	}
}

// Invariant 19: a read-only open of a ledger that no process has open
// reads it, refuses writes, and never writes the ledger: the file keeps
// its bytes and time, and nothing but the -wal (empty) and -shm that
// SQLite's read-only mode creates beside a WAL database appears.
func TestSQLiteReadOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	l, err := Open(ctxT(t), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	before := dirState(t, dir)
	if len(before) != 1 {
		t.Fatalf("a closed ledger's directory holds %v, want the ledger alone", before)
	}
	file := fileState(t, path)

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
	if now := fileState(t, path); now != file {
		t.Fatalf("OpenReadOnly changed the ledger from %s to %s", file, now)
	}
	onlySQLiteCompanions(t, dir, "ledger.db", before)
}

// Invariant 19: a read-only ledger sees every committed transaction,
// including those only in a live worker's -wal: one opened while no worker
// had the ledger open sees what a worker commits after it started, and one
// opened while a worker runs reads the worker's log. They stand for other
// processes: each has connections of its own.
func TestSQLiteReadOnlySeesALiveWritersLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	url := "sqlite:" + path
	w0, err := Open(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	ep0 := alloc(t, w0, "weekly", "k0", "2026-W32", 0).Episode
	w0.Close()

	early, err := openAlone(ctxT(t), url, openReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	if got, err := early.Episode(ctxT(t), "weekly", ep0.ID); err != nil || got != ep0 {
		t.Fatalf("read-only Episode = %+v, %v; want %+v", got, err, ep0)
	}

	w, err := openAlone(ctxT(t), url, openCreate) // a worker starts
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ep1 := alloc(t, w, "weekly", "k1", "2026-W32", 0).Episode
	if st, err := os.Stat(path + "-wal"); err != nil || st.Size() == 0 {
		t.Fatalf("the worker's commit is not in its -wal (%v, %v): the test proves nothing", st, err)
	}
	if got, err := early.Episode(ctxT(t), "weekly", ep1.ID); err != nil || got != ep1 {
		t.Fatalf("a read-only ledger opened before the worker started: Episode = %+v, %v; want %+v", got, err, ep1)
	}

	during, err := openAlone(ctxT(t), url, openReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := during.Episode(ctxT(t), "weekly", ep1.ID); err != nil || got != ep1 {
		t.Fatalf("a read-only ledger opened while the worker runs: Episode = %+v, %v; want %+v", got, err, ep1)
	}
	ep2 := alloc(t, w, "weekly", "k2", "2026-W32", 0).Episode
	for name, ro := range map[string]*Ledger{"opened before": early, "opened during": during} {
		if got, err := ro.Episode(ctxT(t), "weekly", ep2.ID); err != nil || got != ep2 {
			t.Fatalf("%s: a later commit: Episode = %+v, %v; want %+v", name, got, err, ep2)
		}
	}
	if err := during.Close(); err != nil {
		t.Fatal(err)
	}
}

// A -wal with commits but without its -shm (a copy that left the -shm
// behind) is read: SQLite rebuilds the index from the log.
func TestSQLiteReadOnlyReadsALogWithoutItsIndex(t *testing.T) {
	src := filepath.Join(t.TempDir(), "ledger.db")
	w, err := Open(ctxT(t), "sqlite:"+src)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ep := alloc(t, w, "weekly", "k", "2026-W32", 0).Episode // in the -wal only
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	for _, suffix := range []string{"", "-wal"} {
		data, err := os.ReadFile(src + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+suffix, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err = View(ctxT(t), "sqlite:"+path, func(l *Ledger) error {
		got, err := l.Episode(ctxT(t), "weekly", ep.ID)
		if err == nil && got != ep {
			err = fmt.Errorf("read %+v", got)
		}
		return err
	})
	if err != nil {
		t.Fatalf("reading a copy's -wal without its -shm: %v; want %+v", err, ep)
	}
}

// A damaged ledger file is reported as damaged, naming the file and a
// backup, by every open and by a read that finds the damage later; never
// as a ledger to create. Nothing is written to it.
func TestSQLiteCorruptLedgerIsReportedAsCorrupt(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "good.db")
	l, err := Open(ctxT(t), "sqlite:"+src)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 { // the episodes span several pages
		alloc(t, l, "weekly", fmt.Sprintf("key-%03d-%s", i, strings.Repeat("x", 40)), "2026-W32", 0)
	}
	pages := map[string]int{}
	for _, table := range []string{"schema_migrations", "episodes"} {
		var root int
		if err := l.r.QueryRowContext(ctxT(t), `SELECT rootpage FROM sqlite_master WHERE name = ?`, table).Scan(&root); err != nil {
			t.Fatal(err)
		}
		pages[table] = root
	}
	var pageSize int
	if err := l.r.QueryRowContext(ctxT(t), `PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	l.Close()
	good, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	garble := func(b []byte, from, to int) []byte {
		b = bytes.Clone(b)
		for i := from; i < to && i < len(b); i++ {
			b[i] = byte(i*7 + 3)
		}
		return b
	}
	page := func(n int) (int, int) { return (n - 1) * pageSize, n * pageSize }
	migrationsFrom, migrationsTo := page(pages["schema_migrations"])
	episodesFrom, episodesTo := page(pages["episodes"])
	for name, content := range map[string][]byte{
		"not a database":         garble(good, 0, len(good)),
		"truncated":              good[:len(good)/2],
		"schema_migrations page": garble(good, migrationsFrom, migrationsTo),
		"header after the magic": garble(good, len(sqliteHeader), 100),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "allot.db")
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
			before, file := dirState(t, dir), fileState(t, path)
			for open, fn := range map[string]func(context.Context, string) (*Ledger, error){"Open": Open, "OpenExisting": OpenExisting, "OpenReadOnly": OpenReadOnly} {
				l, err := fn(ctxT(t), "sqlite:"+path)
				if err == nil {
					l.Close()
				}
				if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotCreated) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "backup") {
					t.Errorf("%s = %v, want ErrCorrupt naming %s and a backup", open, err, path)
				}
			}
			if now := fileState(t, path); now != file {
				t.Errorf("opening the damaged ledger changed it from %s to %s", file, now)
			}
			onlySQLiteCompanions(t, dir, "allot.db", before)
		})
	}
	// Damage that only a later read runs into.
	path := filepath.Join(t.TempDir(), "allot.db")
	if err := os.WriteFile(path, garble(good, episodesFrom, episodesTo), 0o644); err != nil {
		t.Fatal(err)
	}
	err = View(ctxT(t), "sqlite:"+path, func(l *Ledger) error {
		_, err := l.ListEpisodes(ctxT(t), "weekly", "")
		return err
	})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("View of a ledger whose episodes are damaged = %v, want ErrCorrupt naming %s", err, path)
	}
}

// OpenExisting never creates a ledger, nor its directory, nor anything in
// an empty file.
func TestSQLiteOpenExistingCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo", "allot.db")
	if _, err := OpenExisting(ctxT(t), "sqlite:"+missing); !errors.Is(err, ErrNotCreated) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("OpenExisting(%s) = %v, want ErrNotCreated naming the file", missing, err)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenExisting created the directory: %v", err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before := dirState(t, dir)
	if _, err := OpenExisting(ctxT(t), "sqlite:"+empty); !errors.Is(err, ErrNotCreated) {
		t.Fatalf("OpenExisting of an empty file = %v, want ErrNotCreated", err)
	}
	if diff := dirDiff(before, dirState(t, dir)); diff != "" {
		t.Fatalf("OpenExisting of an empty file changed the directory: %s", diff)
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
		l, err := openAlone(ctxT(t), "sqlite:"+path, openCreate)
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

// Workers starting together on a new SQLite ledger all start, on one
// identity. The first connection of each switches the file to WAL, and
// while another is doing the same SQLite can answer SQLITE_BUSY at once,
// without waiting out busy_timeout ("database is locked"); the open tries
// again (pingSQLiteWriter). Without that, about one round in thirty of
// four openers failed here; this runs enough rounds to see it.
func TestSQLiteConcurrentFirstOpensAllStart(t *testing.T) {
	const rounds, openers = 40, 8
	for round := range rounds {
		ids, err := openTogether(t, "sqlite:"+filepath.Join(t.TempDir(), "ledger.db"), openers)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, id := range ids {
			if id == "" || id != ids[0] {
				t.Fatalf("round %d: identities %q, want one", round, ids)
			}
		}
	}
}

// The integrity check finds damage that no open runs into (an index's
// page): ErrCorrupt naming the file, what SQLite found, and the commands
// that copy out what can still be read and audit the copy. A sound ledger
// passes it.
func TestSQLiteIntegrityCheckFindsDamageNoOpenSees(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "allot.db")
	l, err := Open(ctxT(t), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		alloc(t, l, "weekly", fmt.Sprintf("key-%03d-%s", i, strings.Repeat("x", 40)), "2026-W32", 0)
	}
	if err := l.CheckIntegrity(ctxT(t)); err != nil {
		t.Fatalf("a sound ledger: %v", err)
	}
	page := damageAnIndex(t, l, path)
	l, err = Open(ctxT(t), "sqlite:"+path)
	if err != nil {
		t.Fatalf("the damage is in an index only (page %d), yet the open ran into it: %v", page, err)
	}
	defer l.Close()
	err = l.CheckIntegrity(ctxT(t))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), ".dump") || !strings.Contains(err.Error(), "starter check --ledger") {
		t.Fatalf("CheckIntegrity of a ledger with a damaged index = %v, want ErrCorrupt naming %s, the .dump copy and the check of it", err, path)
	}
}

// damageAnIndex closes l and garbles the root page of an index of its
// episodes, returning the page's number.
func damageAnIndex(t *testing.T, l *Ledger, path string) int {
	t.Helper()
	var root, pageSize int
	if err := l.r.QueryRowContext(ctxT(t), `SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'episodes' ORDER BY rootpage DESC LIMIT 1`).Scan(&root); err != nil {
		t.Fatal(err)
	}
	if err := l.r.QueryRowContext(ctxT(t), `PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := (root-1)*pageSize + 8; i < root*pageSize; i++ {
		data[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}
