package ledger

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"allot/internal/cleanenv"
)

// The tests here run a ledger's holder and ordinary SQLite clients as real
// processes: what they guard (POSIX advisory locks, which belong to a
// process, and the -wal a closing connection deletes when it believes it is
// the last) cannot be seen inside one process (docs/design.md, invariant 19
// and "One ledger per process").

// holderEnv carries the ledger URL TestHelperLedgerHolder holds open, and
// holderHowEnv how it opens it.
const (
	holderEnv    = "ALLOT_TEST_LEDGER_HOLDER"
	holderHowEnv = "ALLOT_TEST_LEDGER_HOLDER_HOW"
)

// How a holder opens the ledger.
const (
	// holdLikeTheDevserver: the worker's open, then the operator page's (a
	// read-only open while it waits for the ledger, then one to write).
	holdLikeTheDevserver = "devserver"
	// holdTwice: the worker's open, then a second set of connections of
	// the same process (as a read-only open followed by one that writes
	// makes), whose open must not cost the first its locks either.
	holdTwice = "twice"
)

// TestHelperLedgerHolder is not a test of its own: the split tests run the
// test binary again with it. It opens the ledger (holderHowEnv), and then
// answers lines on stdin: "write WHO" inserts a note through the worker's
// handle, "read" prints the notes the page's handle sees, one line each.
func TestHelperLedgerHolder(t *testing.T) {
	url := os.Getenv(holderEnv)
	if url == "" {
		t.Skip("run by the split tests")
	}
	ctx := context.Background()
	worker, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	var page *Ledger
	switch how := os.Getenv(holderHowEnv); how {
	case holdLikeTheDevserver:
		ro, rerr := OpenReadOnly(ctx, url)
		if rerr != nil {
			t.Fatal(rerr)
		}
		ro.Close()
		page, err = OpenExisting(ctx, url)
	case holdTwice:
		page, err = openAlone(ctx, url, openExisting)
	default:
		t.Fatalf("%s=%q: want %s or %s", holderHowEnv, how, holdLikeTheDevserver, holdTwice)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer page.Close()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "write":
			if _, err := worker.w.ExecContext(ctx, `INSERT INTO split_notes (who) VALUES (?)`, arg); err != nil {
				fmt.Fprintln(out, "error", err)
			} else {
				fmt.Fprintln(out, "written")
			}
		case "read":
			notes, err := readNotes(ctx, page)
			if err != nil {
				fmt.Fprintln(out, "error", err)
			} else {
				fmt.Fprintln(out, strings.Join(notes, ","))
			}
		}
		out.Flush()
	}
}

func readNotes(ctx context.Context, l *Ledger) ([]string, error) {
	rows, err := l.r.QueryContext(ctx, `SELECT who FROM split_notes ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var who string
		if err := rows.Scan(&who); err != nil {
			return nil, err
		}
		out = append(out, who)
	}
	return out, rows.Err()
}

// holder is a running TestHelperLedgerHolder.
type holder struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startHolder(t *testing.T, url, how string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLedgerHolder$", "-test.count=1")
	cmd.Env = cleanenv.Environ(holderEnv+"="+url, holderHowEnv+"="+how)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	if got := h.line(t); got != "ready" {
		t.Fatalf("the holder said %q, want ready", got)
	}
	return h
}

func (h *holder) line(t *testing.T) string {
	t.Helper()
	if !h.out.Scan() {
		t.Fatalf("the holder stopped: %v", h.out.Err())
	}
	return h.out.Text()
}

func (h *holder) ask(t *testing.T, line string) string {
	t.Helper()
	if _, err := fmt.Fprintln(h.in, line); err != nil {
		t.Fatal(err)
	}
	return h.line(t)
}

// sqliteClient runs SQL in a process of its own through an ordinary SQLite
// client (the sqlite3 shell, or Python's sqlite3 where there is no shell),
// which opens the file read-write and closes it, as an operator inspecting
// the ledger would. It returns what the client printed.
func sqliteClient(t *testing.T, path, sql string) string {
	t.Helper()
	var cmd *exec.Cmd
	if shell, err := exec.LookPath("sqlite3"); err == nil {
		cmd = exec.Command(shell, path, sql)
	} else if py, perr := exec.LookPath("python3"); perr == nil {
		cmd = exec.Command(py, "-c", `import sys, sqlite3
c = sqlite3.connect(sys.argv[1], isolation_level=None)
for row in c.execute(sys.argv[2]): print("|".join(str(v) for v in row))
c.close()`, path, sql)
	} else if os.Getenv("CI") != "" {
		t.Fatalf("no ordinary SQLite client (the sqlite3 shell or python3) to run: .ci/run installs Debian's sqlite3 (%v)", err)
	} else {
		t.Skipf("no ordinary SQLite client (sqlite3 or python3): install Debian's sqlite3 (%v)", err)
	}
	cmd.Env = cleanenv.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// locksOn lists the POSIX advisory locks pid holds on the file at path,
// from /proc/locks: "READ 1073741826 1073742335", one each.
func locksOn(t *testing.T, pid int, path string) []string {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ino := st.Sys().(*syscall.Stat_t).Ino
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		// 1: POSIX  ADVISORY  READ 4242 fd:01:1234 1073741826 1073742335
		f := strings.Fields(line)
		if len(f) < 8 || f[1] != "POSIX" || f[4] != strconv.Itoa(pid) {
			continue
		}
		dev := strings.Split(f[5], ":")
		if n, err := strconv.ParseUint(dev[len(dev)-1], 10, 64); err == nil && n == ino {
			out = append(out, f[3]+" "+f[6]+" "+f[7])
		}
	}
	return out
}

// The devserver split (issue 38 §1): a process holds the ledger the way the
// devserver does (worker and operator page), or with two sets of
// connections of its own, and an ordinary SQLite client
// opens it read-write, writes and closes it. The holder must still hold its
// lock on the ledger, so the client, not the last connection, leaves the
// -wal alone; and every process sees what every other wrote. When a second
// open in the holder drops its locks (a file handle opened and closed
// outside SQLite: closing any descriptor of a file drops all of a process's
// POSIX locks on it), the client checkpoints and deletes the -wal under the
// holder, which goes on writing into a deleted file that nobody else sees.
func TestSQLiteLedgerIsNotSplitByAnotherClient(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the holder's locks from /proc/locks (Linux)")
	}
	// It runs under -short too, where the mutants run: its processes are
	// this test binary and the sqlite3 shell, and it takes a second.
	for _, how := range []string{holdLikeTheDevserver, holdTwice} {
		t.Run(how, func(t *testing.T) { testSplit(t, how) })
	}
}

func testSplit(t *testing.T, how string) {
	path := filepath.Join(t.TempDir(), "allot.db")
	url := "sqlite:" + path
	l, err := Open(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	rawExec(t, l, `CREATE TABLE split_notes (id INTEGER PRIMARY KEY, who TEXT NOT NULL)`)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	h := startHolder(t, url, how)
	if got := h.ask(t, "write holder-1"); got != "written" {
		t.Fatalf("the holder's first write: %s", got)
	}
	pid := h.cmd.Process.Pid
	if locks := locksOn(t, pid, path); len(locks) == 0 {
		t.Errorf("the holder (pid %d) holds no lock on %s once it has opened it: another client that closes will take it for the last connection", pid, path)
	}

	// An operator inspects the ledger with an ordinary client, writes
	// and closes it.
	sqliteClient(t, path, `INSERT INTO split_notes (who) VALUES ('client')`)
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Errorf("after another client closed the ledger, its log is gone (%v): that client checkpointed and deleted it under the holder", err)
	}
	if locks := locksOn(t, pid, path); len(locks) == 0 {
		t.Errorf("after another client closed the ledger, the holder (pid %d) holds no lock on it", pid)
	}
	if got := h.ask(t, "write holder-2"); got != "written" {
		t.Fatalf("the holder's second write: %s", got)
	}
	want := []string{"holder-1", "client", "holder-2"}
	if got := strings.Split(h.ask(t, "read"), ","); !slices.Equal(got, want) {
		t.Errorf("the holder reads %v, want %v", got, want)
	}
	// A third process sees everything both wrote.
	if got := strings.Split(sqliteClient(t, path, `SELECT who FROM split_notes ORDER BY id`), "\n"); !slices.Equal(got, want) {
		t.Errorf("a third process reads %v, want %v: the holder writes where nobody else reads", got, want)
	}
	if err := h.in.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatal(err)
		}
		t.Fatalf("the holder failed: %v", err)
	}
	// What the holder wrote last survives its stop.
	if got := strings.Split(sqliteClient(t, path, `SELECT who FROM split_notes ORDER BY id`), "\n"); !slices.Equal(got, want) {
		t.Errorf("after the holder stopped, the ledger holds %v, want %v", got, want)
	}
}

// One ledger per process: the opens of one SQLite file in a process share
// its connections, whatever the mode and however the path is spelled, and
// the connections close with the last handle. A read-only open of a file
// the process writes reads through the pool that refuses writes.
func TestSQLiteOpensOfOneFileShareTheirConnections(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "allot.db")
	url := "sqlite:" + path
	worker, err := Open(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	page, err := OpenExisting(ctxT(t), "sqlite:"+filepath.Join(dir, ".", "allot.db"))
	if err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	if page.w != worker.w || page.r != worker.r {
		t.Errorf("a second open of %s made connections of its own: one process holds the file twice", path)
	}
	if ro.r != worker.r || ro.w != worker.r {
		t.Errorf("a read-only open of %s next to the worker's made connections of its own, or writes through the writer", path)
	}
	if _, err := ro.w.ExecContext(ctxT(t), `DELETE FROM episodes`); err == nil {
		t.Error("the read-only handle deleted rows")
	}
	if worker.Created() == page.Created() {
		t.Errorf("Created: the worker's open %v, the page's %v; only the open that created the ledger says so", worker.Created(), page.Created())
	}
	// The worker stops first: the others go on.
	if err := worker.Close(); err != nil {
		t.Fatal(err)
	}
	if err := worker.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	ep := alloc(t, page, "weekly", "k", "2026-W32", 0).Episode
	if got, err := ro.Episode(ctxT(t), "weekly", ep.ID); err != nil || got != ep {
		t.Fatalf("after the worker's handle closed: Episode = %+v, %v; want %+v", got, err, ep)
	}
	if err := page.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if err := worker.w.PingContext(ctxT(t)); err == nil {
		t.Fatal("the connections are still open after the last handle closed")
	}
	// A new open after the last close opens anew.
	again, err := OpenReadOnly(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.r == worker.r {
		t.Fatal("an open after every handle closed got the closed connections")
	}
	if got, err := again.Episode(ctxT(t), "weekly", ep.ID); err != nil || got != ep {
		t.Fatalf("reopened: Episode = %+v, %v; want %+v", got, err, ep)
	}
}
