package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"allot/internal/pipelinetest"
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
