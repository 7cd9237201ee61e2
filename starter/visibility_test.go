package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/report"
	"allot/workflows"
)

// Under --json every failure prints a JSON error object on stdout, usage
// errors included (they used to print only to stderr).
func TestJSONErrorObjectForEveryFailure(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	path := filepath.Join(t.TempDir(), "allot.db")
	led, err := ledger.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	led.Close()
	cases := []struct {
		args     []string
		code     int
		errType  string
		contains string
	}{
		{[]string{"run", "--json"}, exitUsage, errTypeUsage, "--pipeline is required"},
		{[]string{"run", "--bogus", "--json"}, exitUsage, errTypeUsage, "bogus"},
		{[]string{"frobnicate", "--json"}, exitUsage, errTypeUsage, "unknown command"},
		{[]string{"schedule", "--json"}, exitUsage, errTypeUsage, "subcommand"},
		{[]string{"schedule", "create", "--json", "--pipeline", "weekly-video", "--cron", "0 2 * * MON", "--interval", "1h"}, exitUsage, errTypeUsage, "conflict"},
		{[]string{"runs", "--json=true", "--pipeline", "weekly-video", "--status", "sleeping"}, exitUsage, errTypeUsage, "not an execution status"},
		{[]string{"episodes", "--json", "--pipeline", "nosuch", "--ledger", "sqlite:" + path}, exitError, allot.PipelineNotFound, "weekly-video"},
	}
	for _, c := range cases {
		code, stdout, stderr := run(t, c.args...)
		var v map[string]string
		if code != c.code || json.Unmarshal([]byte(stdout), &v) != nil || v["type"] != c.errType || !strings.Contains(v["error"], c.contains) {
			t.Errorf("%v: exit %d, stdout %q (stderr %q); want exit %d and a JSON error of type %q mentioning %q", c.args, code, stdout, stderr, c.code, c.errType, c.contains)
		}
	}
	// Without --json, stdout stays empty.
	if code, stdout, _ := run(t, "run"); code != exitUsage || stdout != "" {
		t.Fatalf("run without --json: exit %d, stdout %q", code, stdout)
	}
}

func TestWantsJSON(t *testing.T) {
	for args, want := range map[string]bool{
		"--json": true, "-json": true, "--json=true": true, "--json=false": false, "--jsonx": false, "-- --json": false, "--pipeline json": false,
	} {
		if got := wantsJSON(strings.Fields(args)); got != want {
			t.Errorf("wantsJSON(%q) = %v", args, got)
		}
	}
}

// A misspelt --pipeline exits non-zero naming the known pipelines (the
// file's and the ledger's); one that exists only in the ledger still works.
func TestUnknownPipelineExitsNamingTheKnownOnes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "allot.db")
	ctx := context.Background()
	led, err := ledger.Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	nominal := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	if _, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: "retired", Key: allot.AllocationKey("retired", nominal), Period: "2026-W32", NominalTime: nominal}); err != nil {
		t.Fatal(err)
	}
	led.Close()
	for _, cmd := range []string{"episodes", "stats", "costs", "check"} {
		code, stdout, stderr := run(t, cmd, "--pipeline", "nosuch", "--ledger", "sqlite:"+path)
		if code != exitError || !strings.Contains(stderr, "daily-report, retired, weekly-video") || stdout != "" {
			t.Errorf("%s --pipeline nosuch: exit %d, stderr %q; want exit 1 naming daily-report, retired, weekly-video", cmd, code, stderr)
		}
		code, _, stderr = run(t, cmd, "--pipeline", "retired", "--ledger", "sqlite:"+path)
		if code != exitOK {
			t.Errorf("%s --pipeline retired (only in the ledger): exit %d, %s", cmd, code, stderr)
		}
	}
}

// The status column of `episodes` is the outcome: waiting for approval and
// rejected episodes used to show "allocated".
func TestEpisodesStatusColumnMatchesTheOutcome(t *testing.T) {
	path := filepath.Join(t.TempDir(), "allot.db")
	ctx := context.Background()
	led, err := ledger.Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	nominal := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	for i, outcome := range []allot.Outcome{allot.OutcomeWaitingApproval, allot.OutcomeRejected, ""} {
		t0 := nominal.Add(time.Duration(i) * time.Hour)
		res, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: "weekly-video", Key: allot.AllocationKey("weekly-video", t0), Period: "2026-W32", NominalTime: t0})
		if err != nil {
			t.Fatal(err)
		}
		if outcome != "" {
			if err := led.RecordEpisodeOutcome(ctx, "weekly-video", res.Episode.ID, outcome, "", time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	led.Close()
	code, stdout, stderr := run(t, "episodes", "--pipeline", "weekly-video", "--ledger", "sqlite:"+path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := map[string]string{"2026-W32-0": "waiting_approval", "2026-W32-1": "rejected", "2026-W32-2": "allocated"}
	for _, line := range strings.Split(stdout, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		if f[3] != want[f[0]] {
			t.Errorf("episode %s: status column %q, want %q\n%s", f[0], f[3], want[f[0]], stdout)
		}
		delete(want, f[0])
	}
	if len(want) != 0 {
		t.Fatalf("episodes missing from the list: %v\n%s", want, stdout)
	}
}

// `episode show` prints a retrying step: the workflow's retrying state and
// the pending activity's attempt count and last failure.
func TestShowPrintsARetryingStep(t *testing.T) {
	since := time.Date(2026, 8, 3, 2, 0, 5, 0, time.UTC)
	res := report.ShowResult{
		Episode: report.ViewEpisode(ledger.Episode{Pipeline: "weekly-paid", ID: "2026-W32-0", Period: "2026-W32", Status: ledger.EpisodeAllocated, Outcome: string(allot.OutcomeRetrying), OutcomeReason: "error"}),
		Workflow: &report.WorkflowStatus{
			WorkflowID: "weekly-paid/episode/2026-W32-0", Status: "WORKFLOW_EXECUTION_STATUS_RUNNING",
			State: &workflows.EpisodeState{Stage: allot.StageRetrying, Retrying: &workflows.Retrying{
				Step: "video", Activity: "SubmitPaidTask", ErrorType: "error", Error: "dial tcp 127.0.0.1:8787: connect: connection refused", Attempts: 4, Since: since,
			}},
			PendingActivities: []report.PendingActivity{{ActivityType: "SubmitPaidTask", State: "scheduled", Attempt: 3,
				LastFailure: "dial tcp 127.0.0.1:8787: connect: connection refused", NextAttempt: since.Add(time.Minute)}},
		},
	}
	var b bytes.Buffer
	printShow(&b, res)
	out := b.String()
	for _, want := range []string{
		"status\tretrying",
		"SubmitPaidTask of video retrying: 4 attempts since 2026-08-03T02:00:05Z",
		"pending\tSubmitPaidTask scheduled, attempt 3; last failure: dial tcp 127.0.0.1:8787: connect: connection refused; next attempt 2026-08-03T02:01:05Z",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("episode show lacks %q:\n%s", want, out)
		}
	}
}
