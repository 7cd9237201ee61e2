package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"allot/app"
	"allot/internal/cleanenv"
	"allot/internal/ledger"
	"allot/internal/pipelinetest"
	"allot/paidvendor"
	"allot/workflows"
)

// readOnlyLedger is a ledger with an import and an input, closed as a
// stopped worker leaves it, and the flags its commands take.
type readOnlyLedger struct {
	dir, path, url, pipelines, data string
}

func newReadOnlyLedger(t *testing.T) readOnlyLedger {
	t.Helper()
	l := readOnlyLedger{dir: filepath.Join(t.TempDir(), "ledger"), data: t.TempDir()}
	l.path = filepath.Join(l.dir, "allot.db")
	l.url = "sqlite:" + l.path
	l.pipelines = filepath.Join(t.TempDir(), "pipelines.toml")
	// weekly-video for the import (its vendors are never contacted) and
	// drafts for the inputs.
	if err := os.WriteFile(l.pipelines, fmt.Appendf(nil, importPipelines+draftsPipelines, "http://127.0.0.1:1"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STUDIO_API_KEY", "studio-key")
	led, err := ledger.Open(context.Background(), l.url) // created as the worker does
	if err != nil {
		t.Fatal(err)
	}
	led.Close()
	if code, out, errOut := run(t, "import", "--pipeline", "weekly-video", "--from", exampleJSONL, "--ledger", l.url, "--pipelines", l.pipelines, "--data-dir", l.data); code != exitOK {
		t.Fatalf("import: exit %d, %s %s", code, out, errOut)
	}
	l.addInput(t, "d-1")
	return l
}

func (l readOnlyLedger) addInput(t *testing.T, ref string) {
	t.Helper()
	if code, out, errOut := run(t, "input", "add", "--pipeline", "drafts", "--ref", ref, "--ready-at", "2026-08-03T08:00:00Z", "--ledger", l.url, "--pipelines", l.pipelines); code != exitOK {
		t.Fatalf("input add %s: exit %d, %s %s", ref, code, out, errOut)
	}
}

// readOnlyCommand is a command that only reads the ledger, with what its
// JSON output must hold to show that it read it.
type readOnlyCommand struct {
	args []string
	want []string
}

// commands are the read-only commands of the ledger at url (invariant 19),
// the inputs it holds named.
func (l readOnlyLedger) commands(url string, inputs ...string) []readOnlyCommand {
	flags := []string{"--json", "--ledger", url, "--pipelines", l.pipelines}
	inputWants := []string{}
	for _, ref := range inputs {
		inputWants = append(inputWants, `"ref": "`+ref+`"`)
	}
	cmds := []readOnlyCommand{
		{[]string{"check"}, []string{`"ok": true`}},
		{[]string{"episodes", "--pipeline", "weekly-video"}, []string{`"2026-W29-0"`, `"2026-W30-0"`, `"2026-W31-0"`}},
		{[]string{"costs", "--pipeline", "weekly-video"}, []string{`"2026-W29-0"`}},
		{[]string{"stats", "--pipeline", "weekly-video"}, []string{`"episodes_total": 3`}},
		{[]string{"input", "list", "--pipeline", "drafts"}, inputWants},
		{[]string{"import", "--pipeline", "weekly-video", "--from", exampleDir, "--dry-run", "--data-dir", l.data}, []string{`"dry_run": true`, `"2026-W32-0"`}},
	}
	for i := range cmds {
		cmds[i].args = append(cmds[i].args, flags...)
	}
	return cmds
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

func checkOutput(t *testing.T, cmd readOnlyCommand, code int, stdout, stderr string) {
	t.Helper()
	if code != exitOK {
		t.Fatalf("%v: exit %d, %s %s", cmd.args, code, stdout, stderr)
	}
	for _, w := range cmd.want {
		if !strings.Contains(stdout, w) {
			t.Fatalf("%v printed\n%s\nwithout %s", cmd.args, stdout, w)
		}
	}
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

// onlySQLiteCompanions fails unless what dir holds beyond before is the
// ledger's -wal, empty, and -shm: what SQLite's read-only mode creates
// beside a WAL database for any reader, which is no write to the ledger.
func onlySQLiteCompanions(t *testing.T, args []string, dir, ledger string, before map[string]string) {
	t.Helper()
	for name, state := range dirState(t, dir) {
		if _, ok := before[name]; ok {
			continue
		}
		switch name {
		case ledger + "-shm":
		case ledger + "-wal":
			if !strings.HasPrefix(state, "0 bytes") {
				t.Fatalf("%v wrote the ledger's log: %s is %s", args, name, state)
			}
		default:
			t.Fatalf("%v created %s (%s)", args, name, state)
		}
	}
}

// Invariant 19: check, episodes, costs, stats, input list and import
// --dry-run read the ledger and never write it: with every connection
// closed (as a stopped worker leaves the ledger), the file keeps its bytes
// and time after each command, and nothing appears beside it but the
// empty -wal and the -shm that SQLite's read-only mode needs. While a
// worker has the ledger open, they read what it committed to its -wal
// only.
func TestReadOnlyCommandsNeverWriteTheLedger(t *testing.T) {
	l := newReadOnlyLedger(t)
	before := dirState(t, l.dir)
	if len(before) != 1 {
		t.Fatalf("the closed ledger's directory holds %v, want the ledger alone", before)
	}
	file := fileState(t, l.path)
	for _, cmd := range l.commands(l.url, "d-1") {
		code, stdout, stderr := run(t, cmd.args...)
		checkOutput(t, cmd, code, stdout, stderr)
		if now := fileState(t, l.path); now != file {
			t.Fatalf("%v changed the ledger from %s to %s", cmd.args, file, now)
		}
		onlySQLiteCompanions(t, cmd.args, l.dir, "allot.db", before)
	}

	// A worker has the ledger open; an input added since is only in its
	// -wal.
	worker, err := ledger.Open(context.Background(), l.url)
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	l.addInput(t, "d-2")
	if st, err := os.Stat(l.path + "-wal"); err != nil || st.Size() == 0 {
		t.Fatalf("the input is not in the worker's -wal (%v, %v): the test proves nothing", st, err)
	}
	names := slices.Sorted(maps.Keys(dirState(t, l.dir)))
	for _, cmd := range l.commands(l.url, "d-1", "d-2") {
		code, stdout, stderr := run(t, cmd.args...)
		checkOutput(t, cmd, code, stdout, stderr)
		if after := slices.Sorted(maps.Keys(dirState(t, l.dir))); !slices.Equal(names, after) {
			t.Fatalf("%v with a worker running: the directory held %v, then %v", cmd.args, names, after)
		}
	}
}

// roHelperEnv carries the commands TestHelperReadOnlyCommands runs, and
// roResultEnv the file it writes their results to.
const (
	roHelperEnv = "ALLOT_TEST_READ_ONLY_COMMANDS"
	roResultEnv = "ALLOT_TEST_READ_ONLY_RESULTS"
)

type roResult struct {
	Code           int
	Stdout, Stderr string
}

// TestHelperReadOnlyCommands is not a test of its own:
// TestReadOnlyCommandsWorkOnAReadOnlyFilesystem runs the test binary again
// with it, inside a mount namespace where the ledger is on a read-only
// filesystem.
func TestHelperReadOnlyCommands(t *testing.T) {
	spec := os.Getenv(roHelperEnv)
	if spec == "" {
		t.Skip("run by TestReadOnlyCommandsWorkOnAReadOnlyFilesystem")
	}
	var cmds [][]string
	if err := json.Unmarshal([]byte(spec), &cmds); err != nil {
		t.Fatal(err)
	}
	var out []roResult
	for _, args := range cmds {
		code, stdout, stderr := run(t, args...)
		out = append(out, roResult{code, stdout, stderr})
	}
	data, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv(roResultEnv), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Invariant 19: the read-only commands work on a read-only copy of the
// ledger (a backup snapshot): one of a ledger closed cleanly (the file
// alone), and one taken while a worker had it open (the file, its -wal
// holding an input committed since, and its -shm). The copies are made
// read-only by a read-only bind mount in a mount namespace of their own
// (unshare -rm); where the machine allows none, the test says why and
// skips.
func TestReadOnlyCommandsWorkOnAReadOnlyFilesystem(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux mount namespaces (unshare) for a read-only filesystem")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skipf("no unshare(1) to make a read-only filesystem: %v", err)
	}
	l := newReadOnlyLedger(t)
	copies := t.TempDir()
	closed, live := filepath.Join(copies, "closed"), filepath.Join(copies, "live")
	copyFiles(t, l.dir, closed, "allot.db")
	worker, err := ledger.Open(context.Background(), l.url)
	if err != nil {
		t.Fatal(err)
	}
	l.addInput(t, "d-2")
	copyFiles(t, l.dir, live, "allot.db", "allot.db-wal", "allot.db-shm")
	worker.Close()

	var cmds []readOnlyCommand
	cmds = append(cmds, l.commands("sqlite:"+filepath.Join(closed, "allot.db"), "d-1")...)
	cmds = append(cmds, l.commands("sqlite:"+filepath.Join(live, "allot.db"), "d-1", "d-2")...)
	var argss [][]string
	for _, c := range cmds {
		argss = append(argss, c.args)
	}
	spec, err := json.Marshal(argss)
	if err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(t.TempDir(), "results.json")
	// Both copies' directories become read-only, and the helper runs only
	// if they are (exit 97 otherwise).
	script := `for d in "$1" "$2"; do mount --bind "$d" "$d" && mount -o remount,ro,bind "$d" || exit 97; ! touch "$d/probe" 2>/dev/null || exit 97; done; shift 2; exec "$@"`
	cmd := exec.Command(unshare, "-rm", "sh", "-c", script, "sh", closed, live, os.Args[0], "-test.run=^TestHelperReadOnlyCommands$", "-test.count=1")
	cmd.Env = cleanenv.Environ(roHelperEnv+"="+string(spec), roResultEnv+"="+results)
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.ExitCode() == 97 || errors.As(err, &exitErr) && strings.HasPrefix(string(out), "unshare:") {
		t.Skipf("this machine allows no read-only bind mount in a mount namespace: %s", out)
	}
	if err != nil {
		t.Fatalf("the helper: %v\n%s", err, out)
	}
	data, err := os.ReadFile(results)
	if err != nil {
		t.Fatalf("the helper wrote no results (%v):\n%s", err, out)
	}
	var got []roResult
	if err := json.Unmarshal(data, &got); err != nil || len(got) != len(cmds) {
		t.Fatalf("the helper's results %s: %v", data, err)
	}
	for i, c := range cmds {
		checkOutput(t, c, got[i].Code, got[i].Stdout, got[i].Stderr)
	}
}

func copyFiles(t *testing.T, from, to string, names ...string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		src, err := os.Open(filepath.Join(from, name))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(to, name))
		if err == nil {
			_, err = io.Copy(dst, src)
			err = errors.Join(err, dst.Close())
		}
		src.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A command that writes the ledger never creates one: with a mistyped
// --ledger (a SQLite file or directory that does not exist, a PostgreSQL
// database without allot's schema), input add, input withdraw and import
// are refused, naming the ledger and the command that creates it, and
// create nothing. That command, run as printed (the worker's main,
// in-process), creates the ledger, and the refused command then works.
func TestWritingCommandsNeverCreateALedger(t *testing.T) {
	dir := t.TempDir()
	pipelines := pipelinetest.Write(t, dir, fmt.Sprintf(importPipelines+draftsPipelines, "http://127.0.0.1:1"))
	t.Setenv("STUDIO_API_KEY", "studio-key")
	typo := filepath.Join(dir, "typo", "allot.db")
	noFile := filepath.Join(dir, "allot.db")
	cases := []struct {
		name, url, names string
		absent           []string
	}{
		{"sqlite, no directory", "sqlite:" + typo, typo, []string{filepath.Dir(typo)}},
		{"sqlite, no file", "sqlite:" + noFile, noFile, []string{noFile, noFile + "-wal", noFile + "-shm"}},
	}
	if ls := emptyTestLedgers(t); len(ls) > 1 {
		cases = append(cases, struct {
			name, url, names string
			absent           []string
		}{"postgres, no allot schema", ls[1].url, "has no allot schema", nil})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			flags := []string{"--ledger", c.url, "--pipelines", pipelines}
			add := append([]string{"input", "add", "--pipeline", "drafts", "--ref", "d-1"}, flags...)
			var remedy string
			for _, args := range [][]string{
				add,
				append([]string{"input", "withdraw", "--pipeline", "drafts", "--ref", "d-1"}, flags...),
				append([]string{"import", "--pipeline", "weekly-video", "--from", exampleJSONL, "--data-dir", filepath.Join(dir, "data")}, flags...),
			} {
				code, _, stderr := run(t, args...)
				_, fix, found := strings.Cut(stderr, "to create a new ledger there: ")
				if code != exitError || !strings.Contains(stderr, c.names) || !found {
					t.Fatalf("%v where there is no ledger: exit %d, %s; want a refusal naming %s and the command that creates the ledger", args, code, stderr, c.names)
				}
				remedy = strings.TrimSpace(fix)
				for _, p := range c.absent {
					if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
						t.Fatalf("%v created %s: %v", args, p, err)
					}
				}
				if l, err := ledger.OpenReadOnly(context.Background(), c.url); !errors.Is(err, ledger.ErrNotCreated) {
					if l != nil {
						l.Close()
					}
					t.Fatalf("after %v: %v, want still no ledger", args, err)
				}
			}

			words, err := workflows.SplitCommand(remedy)
			if err != nil || len(words) != 5 || !slices.Equal(words[:4], []string{"go", "run", "./worker", "--ledger"}) || words[4] != c.url {
				t.Fatalf("remedy %q = %q, %v; want go run ./worker --ledger %s", remedy, words, err, c.url)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err = app.RunWorker(ctx, app.WorkerConfig{
				Config: app.Config{Ledger: words[4], Pipelines: pipelines, DataDir: filepath.Join(dir, "data"),
					VendorURL: "http://127.0.0.1:1"}, // the embedded pipelines pay the default vendor
				Temporal:    client.Options{HostPort: "127.0.0.1:1"}, // the ledger comes first
				Credentials: paidvendor.NewStaticCredentials("test-key"),
			})
			cancel()
			if err == nil || !strings.Contains(err.Error(), "connect to Temporal") {
				t.Fatalf("the worker = %v, want it to create the ledger and then fail to reach Temporal", err)
			}
			if code, _, stderr := run(t, add...); code != exitOK {
				t.Fatalf("input add once the worker created the ledger: exit %d, %s", code, stderr)
			}
		})
	}
	// The command names a PostgreSQL ledger without its password.
	if cmd := workerCommand("postgres://allot:s3cret@db:5432/allot?sslmode=disable"); strings.Contains(cmd, "s3cret") {
		t.Fatalf("the worker command %q shows the password", cmd)
	}
}

// A damaged ledger is reported as damaged, naming the file and a backup,
// by the commands that read it and those that write it; never as a ledger
// to create (ledger.ErrCorrupt, TestSQLiteCorruptLedgerIsReportedAsCorrupt).
func TestDamagedLedgerIsReportedAsDamaged(t *testing.T) {
	l := newReadOnlyLedger(t)
	good, err := os.ReadFile(l.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.path, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	before, file := dirState(t, l.dir), fileState(t, l.path)
	for _, args := range [][]string{
		{"check"},
		{"episodes", "--pipeline", "weekly-video"},
		{"input", "add", "--pipeline", "drafts", "--ref", "d-9"},
	} {
		args = append(args, "--ledger", l.url, "--pipelines", l.pipelines)
		code, _, stderr := run(t, args...)
		if code != exitError || !strings.Contains(stderr, l.path) || !strings.Contains(stderr, "damaged") || !strings.Contains(stderr, "backup") || strings.Contains(stderr, "create") {
			t.Errorf("%v on a truncated ledger: exit %d, %s; want it reported damaged, naming the file and a backup", args, code, stderr)
		}
		if now := fileState(t, l.path); now != file {
			t.Fatalf("%v changed the damaged ledger from %s to %s", args, file, now)
		}
		onlySQLiteCompanions(t, args, l.dir, "allot.db", before)
	}
}

// Damage no open runs into (a page of an index) is found by check, and
// by the worker at start, which print the way out as commands: copy what SQLite can still read with the
// sqlite3 shell's .dump, and audit the copy. Run as printed, the copy
// passes the audit with every episode.
func TestCheckFindsADamagedIndexAndItsRemedyRecovers(t *testing.T) {
	if _, err := exec.LookPath("sqlite3"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no sqlite3 shell to run the remedy with: .ci/run installs Debian's sqlite3 (%v)", err)
		}
		t.Skipf("no sqlite3 shell to run the remedy with: install Debian's sqlite3 (%v)", err)
	}
	l := newReadOnlyLedger(t)
	damageAnIndex(t, l.path)
	code, stdout, stderr := run(t, "check", "--ledger", l.url, "--pipelines", l.pipelines)
	if code != exitError || !strings.Contains(stderr, "integrity check found") {
		t.Fatalf("check of a ledger with a damaged index: exit %d, %s %s; want the integrity check's finding", code, stdout, stderr)
	}
	// The worker refuses to start on it, before it dials Temporal.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	werr := app.RunWorker(ctx, app.WorkerConfig{
		Config:      app.Config{Ledger: l.url, Pipelines: l.pipelines, DataDir: t.TempDir(), VendorURL: "http://127.0.0.1:1"},
		Temporal:    client.Options{HostPort: "127.0.0.1:1"},
		Credentials: paidvendor.NewStaticCredentials("test-key"),
	})
	if !errors.Is(werr, ledger.ErrCorrupt) || !strings.Contains(werr.Error(), "integrity check found") {
		t.Fatalf("the worker on a ledger with a damaged index = %v, want it refused as damaged", werr)
	}
	// "... with `RECOVER`, audit the copy with `CHECK`, and ..."
	parts := strings.Split(stderr, "`")
	if len(parts) < 5 || !strings.HasPrefix(parts[1], "sqlite3 ") || !strings.HasPrefix(parts[3], "starter check ") {
		t.Fatalf("check printed %q; want the .dump command and the check of the copy, each in backquotes", stderr)
	}
	recoverCmd := exec.Command("sh", "-c", parts[1])
	recoverCmd.Env = cleanenv.Environ()
	if out, err := recoverCmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", parts[1], err, out)
	}
	words, err := workflows.SplitCommand(parts[3])
	if err != nil {
		t.Fatal(err)
	}
	args := append(words[1:], "--json", "--pipelines", l.pipelines)
	if code, stdout, stderr := run(t, args...); code != exitOK || !strings.Contains(stdout, `"ok": true`) {
		t.Fatalf("%v: exit %d, %s %s; want the copy to pass", args, code, stdout, stderr)
	}
	copyURL := words[len(words)-1]
	if code, stdout, stderr := run(t, "episodes", "--pipeline", "weekly-video", "--json", "--ledger", copyURL, "--pipelines", l.pipelines); code != exitOK || !strings.Contains(stdout, `"2026-W31-0"`) {
		t.Fatalf("episodes of the copy: exit %d, %s %s", code, stdout, stderr)
	}
}

// damageAnIndex garbles the root page of an index of the episodes of the
// closed ledger at path.
func damageAnIndex(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var root, pageSize int
	err = db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'episodes' ORDER BY rootpage DESC LIMIT 1`).Scan(&root)
	if err == nil {
		err = db.QueryRow(`PRAGMA page_size`).Scan(&pageSize)
	}
	if err = errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := (root - 1) * pageSize; i < root*pageSize; i++ {
		data[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
