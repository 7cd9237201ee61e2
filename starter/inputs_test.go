package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot/internal/ledger"
	"allot/internal/pipelinetest"
)

const draftsPipelines = `
[[pipeline]]
name   = "drafts"
period = "day"
  [pipeline.inputs]
  claim = "oldest_ready"
  [[pipeline.step]]
  name = "plan"
  kind = "local"

[[pipeline]]
name = "plain"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`

// starter input add is idempotent on the reference and refuses other data
// under it; list shows states and the claiming episode; withdraw works
// until a claim; a pipeline without [pipeline.inputs] takes none. Each
// refusal writes nothing.
func TestInputAddListWithdraw(t *testing.T) {
	dir := t.TempDir()
	pipelines := pipelinetest.Write(t, dir, draftsPipelines)
	url := "sqlite:" + filepath.Join(dir, "allot.db")
	led, err := ledger.Open(context.Background(), url) // created as the worker does
	if err != nil {
		t.Fatal(err)
	}
	led.Close()
	t.Setenv("ALLOT_PIPELINES", pipelines)
	t.Setenv("ALLOT_LEDGER", url)
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")

	payloadFile := filepath.Join(dir, "d2.json")
	if err := os.WriteFile(payloadFile, []byte(`{"title": "Two"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"input", "add", "--pipeline", "drafts", "--ref", "d-1", "--ready-at", "2026-08-03T08:00:00Z", "--payload", `{"title": "One"}`},
		{"input", "add", "--pipeline", "drafts", "--ref", "d-1", "--ready-at", "2026-08-03T08:00:00Z", "--payload", `{"title":"One"}`},
		{"input", "add", "--pipeline", "drafts", "--ref", "d-2", "--ready-at", "2026-08-03T07:00:00Z", "--payload-file", payloadFile},
		{"input", "add", "--pipeline", "drafts", "--ref", "d-3", "--ready-at", "2026-08-03T09:00:00Z"},
	} {
		if code, _, stderr := run(t, args...); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
	}
	code, stdout, _ := run(t, "input", "add", "--pipeline", "drafts", "--ref", "d-1", "--ready-at", "2026-08-03T08:00:00Z", "--payload", `{"title":"Changed"}`, "--json")
	var refusal map[string]string
	if code != exitError || json.Unmarshal([]byte(stdout), &refusal) != nil || refusal["type"] != "InputConflict" {
		t.Fatalf("a conflicting add: exit %d, %s", code, stdout)
	}
	for args, want := range map[string]string{
		"input add --pipeline plain --ref x":                                "does not consume inputs",
		"input add --pipeline drafts --ref x --payload {nope}":              "not JSON",
		"input add --pipeline drafts --ref x --ready-at tomorrow":           "not RFC3339",
		"input add --pipeline drafts":                                       "--ref are required",
		"input withdraw --pipeline drafts --ref nosuch":                     "has no input",
		"input list --pipeline drafts --state done":                         "unknown",
		"input add --pipeline drafts --ref x --payload {} --payload-file f": "not both",
	} {
		code, _, stderr := run(t, strings.Fields(args)...)
		if code == exitOK || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, %q; want a refusal mentioning %q", args, code, stderr, want)
		}
	}

	// A claim, as the allocation of a run at 08:30 makes it.
	led, err = ledger.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	res, err := led.Allocate(context.Background(), ledger.AllocateInput{Pipeline: "drafts", Key: "drafts/scheduled-2026-08-03T08:30:00Z", Period: "2026-08-03",
		NominalTime: time.Date(2026, 8, 3, 8, 30, 0, 0, time.UTC), ClaimInput: true})
	led.Close()
	if err != nil || res.Input == nil || res.Input.Ref != "d-2" {
		t.Fatalf("the claim took %+v, %v; want d-2, the oldest ready", res.Input, err)
	}
	if code, _, stderr := run(t, "input", "withdraw", "--pipeline", "drafts", "--ref", "d-2"); code != exitError || !strings.Contains(stderr, "InputClaimed") {
		t.Fatalf("withdraw of a claimed input: exit %d, %s", code, stderr)
	}
	if code, _, stderr := run(t, "input", "withdraw", "--pipeline", "drafts", "--ref", "d-3"); code != exitOK {
		t.Fatalf("withdraw: exit %d, %s", code, stderr)
	}

	code, stdout, _ = run(t, "input", "list", "--pipeline", "drafts", "--json")
	var list []ledger.Input
	if code != exitOK || json.Unmarshal([]byte(stdout), &list) != nil {
		t.Fatalf("list: exit %d, %s", code, stdout)
	}
	got := map[string]string{}
	for _, in := range list {
		got[in.Ref] = string(in.State) + "/" + in.EpisodeID
	}
	want := map[string]string{"d-2": "claimed/" + res.Episode.ID, "d-1": "ready/", "d-3": "withdrawn/"}
	if len(got) != len(want) || got["d-1"] != want["d-1"] || got["d-2"] != want["d-2"] || got["d-3"] != want["d-3"] {
		t.Fatalf("list %v, want %v", got, want)
	}
	var one bytes.Buffer
	if list[0].Ref != "d-2" || json.Compact(&one, list[1].Payload) != nil || one.String() != `{"title":"One"}` {
		t.Fatalf("list is not in claim order with payloads: %+v", list)
	}
	code, stdout, _ = run(t, "input", "list", "--pipeline", "drafts", "--state", "ready", "--json")
	if code != exitOK || !strings.Contains(stdout, `"d-1"`) || strings.Contains(stdout, `"d-2"`) {
		t.Fatalf("list --state ready: %s", stdout)
	}
}
