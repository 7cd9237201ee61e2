package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/operator"
	"allot/internal/pipelinetest"
	"allot/workflows"
)

// An explicit --nominal-time of the zero time is refused as an absurd
// time, before Temporal is dialed (issue 15); it used to be taken for
// "unset" and started a run for now.
func TestExplicitZeroNominalTimeIsRefused(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	t.Setenv("ALLOT_LEDGER", "sqlite:"+filepath.Join(t.TempDir(), "allot.db"))
	for _, zero := range []string{"0001-01-01T00:00:00Z", "0001-01-01T01:00:00+01:00"} {
		code, stdout, stderr := run(t, "run", "--pipeline", "weekly-video", "--nominal-time", zero, "--json")
		var refusal map[string]string
		if code != exitError || json.Unmarshal([]byte(stdout), &refusal) != nil || refusal["type"] != "InvalidInput" ||
			!strings.Contains(refusal["error"], "zero time") || strings.Contains(stderr, "connect to Temporal") {
			t.Errorf("--nominal-time %s: exit %d, %s %s; want InvalidInput before dialing", zero, code, stdout, stderr)
		}
	}
}

// input add of a reference with the same payload and no --ready-at is the
// no-op its help promises (issue 15): the ready time defaulted to now, so
// every re-add was a conflict. Another payload is still refused.
func TestInputAddAgainWithoutReadyAtIsANoOp(t *testing.T) {
	dir := t.TempDir()
	pipelines := pipelinetest.Write(t, dir, draftsPipelines)
	t.Setenv("ALLOT_PIPELINES", pipelines)
	t.Setenv("ALLOT_LEDGER", "sqlite:"+filepath.Join(dir, "allot.db"))
	createLedger(t, "sqlite:"+filepath.Join(dir, "allot.db")) // as the worker does
	add := []string{"input", "add", "--pipeline", "drafts", "--ref", "draft-118", "--payload", `{"title": "Launch notes"}`, "--json"}
	var first, again struct {
		Added bool `json:"added"`
		Input struct {
			ReadyAt string `json:"ready_at"`
		} `json:"input"`
	}
	if code, stdout, stderr := run(t, add...); code != exitOK || json.Unmarshal([]byte(stdout), &first) != nil || !first.Added {
		t.Fatalf("first add: exit %d, %s %s", code, stdout, stderr)
	}
	code, stdout, stderr := run(t, add...)
	if code != exitOK || json.Unmarshal([]byte(stdout), &again) != nil || again.Added || again.Input.ReadyAt != first.Input.ReadyAt {
		t.Fatalf("the same add again: exit %d, %s %s; want the input already there, unchanged", code, stdout, stderr)
	}
	if code, stdout, _ := run(t, "input", "add", "--pipeline", "drafts", "--ref", "draft-118", "--payload", `{"title": "Other"}`, "--json"); code != exitError || !strings.Contains(stdout, "InputConflict") {
		t.Fatalf("another payload under the reference: exit %d, %s; want InputConflict", code, stdout)
	}
}

// Issue 38 §5: a second `run --wait` of the same key said "allocated
// (new_episode)", the first run's outcome, as if it had allocated again;
// it says the key was reused and nothing was paid. And "(from input)" was
// printed for a pipeline without inputs: the source is said in words.
func TestRunSaysAReusedKeyPaidNothing(t *testing.T) {
	nominal := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	result := &workflows.ScheduledRunResult{WorkflowID: "weekly-video/scheduled-2026-12-01T09:00:00Z", EpisodeID: "2026-W49-3", Period: "2026-W49", Sequence: 3,
		Outcome: allot.OutcomeAllocated, Reason: allot.ReasonNewEpisode, NominalTime: nominal, NominalTimeSource: allot.NominalFromInput}
	print := func(action string) string {
		var b bytes.Buffer
		printRun(&b, followedRun{RunResult: operator.RunResult{Action: action, WorkflowID: result.WorkflowID, RunID: "r1", Result: result}})
		return b.String()
	}
	first, again := print(operator.RunStarted), print(operator.RunExisting)
	if !strings.Contains(first, "outcome\tallocated (new_episode)\n") || !strings.Contains(first, "episode\t2026-W49-3") {
		t.Errorf("the first run:\n%s", first)
	}
	if !strings.Contains(again, "outcome\treused: the key's run had finished, so nothing was started and nothing paid (that run: allocated, new_episode)") ||
		strings.Contains(again, "allocated (new_episode)") || !strings.Contains(again, "episode\t2026-W49-3") {
		t.Errorf("the same key again:\n%s", again)
	}
	for _, out := range []string{first, again} {
		if strings.Contains(out, "from input") || !strings.Contains(out, "nominal time\t2026-12-01T09:00:00Z (given when the run was started: --nominal-time, else the time of the request)") {
			t.Errorf("the nominal time's source:\n%s", out)
		}
	}
	// --print-episode prints the ID alone, or says what the run did.
	if id, err := runEpisode(operator.RunResult{Result: result}); err != nil || id != "2026-W49-3" {
		t.Errorf("runEpisode = %q, %v", id, err)
	}
	skipped := *result
	skipped.EpisodeID, skipped.Outcome, skipped.Reason = "", allot.OutcomeSkipped, allot.ReasonCapReached
	if _, err := runEpisode(operator.RunResult{WorkflowID: "k", Result: &skipped}); err == nil || !strings.Contains(err.Error(), "owns no episode: it was skipped (cap_reached)") {
		t.Errorf("runEpisode of a skipped run: %v", err)
	}
	if code, _, stderr := run(t, "run", "--pipeline", "weekly-video", "--print-episode", "--json"); code != exitUsage || !strings.Contains(stderr, "give one of them") {
		t.Errorf("--print-episode --json: exit %d, %s", code, stderr)
	}
}
