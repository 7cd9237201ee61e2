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
	"time"

	_ "modernc.org/sqlite"

	"allot/internal/ledger"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := execute(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestBadInputIsAUsageErrorBeforeAnythingIsContacted(t *testing.T) {
	// TEMPORAL_ADDRESS points nowhere: a command that got as far as dialing
	// would fail differently than with the usage errors asserted here.
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "--pipeline is required"},
		{[]string{"run", "--pipeline", "weekly-video", "--nominal-time", "2026-08-03 02:00"}, "not RFC3339"},
		{[]string{"run", "--pipeline", "weekly-video", "--nominal-time", "yesterday"}, "not RFC3339"},
		{[]string{"run", "--pipeline", "weekly-video", "extra"}, "unexpected argument \"extra\""},
		{[]string{"run", "--pipeline", "weekly-video", "--ledger", "mysql://x"}, "use sqlite:PATH"},
		{[]string{"episodes", "--period", "2026-W32"}, "--pipeline is required"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"episode", "approve", "--pipeline", "weekly-video", "--episode", "2026-W32-0", "--by", strings.Repeat("b", 1001)}, "--by is 1001 characters"},
		{[]string{"schedule"}, "schedule takes a subcommand"},
		{[]string{"schedule", "create"}, "--pipeline is required"},
		{[]string{"schedule", "backfill", "--pipeline", "weekly-video", "--from", "yesterday", "--to", "2026-08-03T00:00:00Z"}, "--from \"yesterday\" is not RFC3339"},
		{[]string{"schedule", "backfill", "--pipeline", "weekly-video", "--from", "2026-08-03T00:00:00Z"}, "--from and --to are required"},
		{[]string{"schedule", "backfill", "--pipeline", "weekly-video", "--from", "2026-08-03T00:00:00Z", "--to", "2026-08-04T00:00:00Z", "--rate", "0"}, "--rate 0: give a positive number"},
		{[]string{"schedule", "backfill", "--pipeline", "weekly-video", "--from", "2026-08-03T00:00:00Z", "--to", "2026-08-04T00:00:00Z", "--max-in-flight", "-1"}, "--max-in-flight -1: give a positive number"},
		{[]string{"schedule", "backfill", "--pipeline", "weekly-video", "--from", "2026-08-03T00:00:00Z", "--to", "2026-08-04T00:00:00Z", "--via-schedule", "--rate", "5"}, "drop them, or drop --via-schedule"},
		{[]string{"episode", "rework", "--pipeline", "weekly-video"}, "--episode are required"},
		{[]string{"episode", "resolve", "--pipeline", "weekly-video", "--episode", "2026-W32-0", "--step", "video"}, "exactly one of"},
		{[]string{"episode", "resolve", "--pipeline", "weekly-video", "--episode", "2026-W32-0", "--step", "video", "--abandon"}, "--abandon needs --reason"},
		{[]string{"stats", "--pipeline", "weekly-video", "--since", "last week"}, "not RFC3339"},
	}
	for _, c := range cases {
		code, _, stderr := run(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
}

func TestUnknownOrInvalidPipelineFailsBeforeDialing(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	for args, want := range map[string]string{
		"monthly-podcast": "is not defined",
		"Weekly_Video":    "is invalid",
	} {
		code, _, stderr := run(t, "run", "--pipeline", args)
		if code != exitError || !strings.Contains(stderr, want) || strings.Contains(stderr, "connect to Temporal") {
			t.Errorf("pipeline %q: exit %d, stderr %q; want %q without dialing", args, code, stderr, want)
		}
	}
}

func TestLedgerThatIsNotADatabase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "notes.txt")
	content := []byte("these are my notes, not a ledger\n")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"check", "--ledger", "sqlite:" + path},
		{"episodes", "--pipeline", "weekly-video", "--ledger", "sqlite:" + path},
	} {
		code, _, stderr := run(t, cmd...)
		if code != exitError || !strings.Contains(stderr, "not a SQLite database") {
			t.Errorf("%v: exit %d, stderr %q", cmd, code, stderr)
		}
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, content) {
		t.Fatalf("the file was changed: %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("opening left %d files in the directory, want only the original", len(entries))
	}
}

// Invariant 16: the runs and schedules the starter makes carry the
// ledger's identity. A ledger that exists but cannot be read is an error
// before Temporal is contacted (a run without the identity would be taken
// by a worker of any ledger); a ledger not created yet is not.
func TestRunAndScheduleRefuseALedgerTheyCannotRead(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notes, []byte("these are my notes, not a ledger\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"run", "--pipeline", "weekly-video", "--nominal-time", "2026-08-03T02:00:00Z"},
		{"schedule", "create", "--pipeline", "weekly-video"},
	} {
		t.Setenv("ALLOT_LEDGER", "sqlite:"+notes)
		code, _, stderr := run(t, cmd...)
		if code != exitError || !strings.Contains(stderr, "not a SQLite database") || strings.Contains(stderr, "connect to Temporal") {
			t.Errorf("%v on an unreadable ledger: exit %d, stderr %q; want the ledger's error before dialing", cmd, code, stderr)
		}
		t.Setenv("ALLOT_LEDGER", "sqlite:"+filepath.Join(dir, "not-yet.db"))
		if code, _, stderr := run(t, cmd...); code != exitError || !strings.Contains(stderr, "connect to Temporal") {
			t.Errorf("%v on a ledger not created yet: exit %d, stderr %q; want it to go on and dial", cmd, code, stderr)
		}
	}
}

func TestCheckAndEpisodesOnMissingLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.db")
	code, _, stderr := run(t, "check", "--ledger", "sqlite:"+path)
	if code != exitError || stderr == "" {
		t.Fatalf("check on a missing ledger: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("check created the ledger file: %v", err)
	}
}

func TestJSONErrorCarriesType(t *testing.T) {
	code, stdout, _ := run(t, "check", "--json", "--ledger", "sqlite:"+filepath.Join(t.TempDir(), "none.db"))
	var v map[string]string
	if code != exitError || json.Unmarshal([]byte(stdout), &v) != nil || v["error"] == "" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
}

func TestCheckReportsViolationsWithExit3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "allot.db")
	ctx := context.Background()
	led, err := ledger.Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k0", "k1"} {
		if _, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: "weekly-video", Key: key, Period: "2026-W32", NominalTime: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	led.Close()
	if code, stdout, _ := run(t, "check", "--ledger", "sqlite:"+path); code != exitOK || !strings.Contains(stdout, "invariants hold") {
		t.Fatalf("clean ledger: exit %d, %q", code, stdout)
	}
	// Imported data: the key's unique index is gone and a key is bound twice,
	// leaving a gap in the sequences as well.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`DROP INDEX episodes_pipeline_key_uniq`,
		`INSERT INTO episodes (pipeline, episode_id, period, sequence, allocation_key, nominal_time, created_at, status)
		 SELECT pipeline, '2026-W32-5', period, 5, allocation_key, nominal_time, created_at, status FROM episodes WHERE allocation_key = 'k0'`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	code, stdout, _ := run(t, "check", "--json", "--ledger", "sqlite:"+path)
	var res struct {
		OK         bool `json:"ok"`
		Violations []struct {
			Invariant int `json:"invariant"`
		} `json:"violations"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("check --json printed %q: %v", stdout, err)
	}
	seen := map[int]bool{}
	for _, v := range res.Violations {
		seen[v.Invariant] = true
	}
	if code != exitViolations || res.OK || !seen[1] || !seen[2] {
		t.Fatalf("tampered ledger: exit %d, result %s", code, stdout)
	}
}

// TestRunRefusesReservedKeys: --key under the pipeline's episode/ (an
// Episode's workflow ID) or legacy/ (an imported run's key) is refused as an
// invalid allocation key, naming the fix, before Temporal or the ledger is
// contacted.
func TestRunRefusesReservedKeys(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	t.Setenv("ALLOT_LEDGER", "sqlite:"+filepath.Join(t.TempDir(), "not-yet.db"))
	for _, key := range []string{"episode/2026-W49-0", "legacy/a1", "weekly-video/episode/2026-W49-0", "weekly-video/legacy/a1"} {
		code, stdout, stderr := run(t, "run", "--pipeline", "weekly-video", "--key", key, "--nominal-time", "2026-08-03T02:00:00Z", "--json")
		var v map[string]string
		if code != exitError || json.Unmarshal([]byte(stdout), &v) != nil || v["type"] != "InvalidAllocationKey" ||
			!strings.Contains(v["error"], "leave --key out") || strings.Contains(stdout+stderr, "connect to Temporal") {
			t.Errorf("run --key %s: exit %d, stdout %q, stderr %q; want InvalidAllocationKey naming the fix, before dialing", key, code, stdout, stderr)
		}
	}
	// Other keys go on to dial.
	if code, _, stderr := run(t, "run", "--pipeline", "weekly-video", "--key", "episodes/x", "--nominal-time", "2026-08-03T02:00:00Z"); code != exitError || !strings.Contains(stderr, "connect to Temporal") {
		t.Errorf("run --key episodes/x: exit %d, stderr %q; want it to dial", code, stderr)
	}
}
