package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/pipelinetest"
	"allot/internal/report"
	"allot/workflows"
)

const promisePipelines = `
[[vendor]]
name        = "videogen"
url         = "https://api.videogen.example"
api_key_env = "VIDEOGEN_API_KEY"

[[vendor]]
name       = "covers"
adapter    = "activity"
task_queue = "covers"
  [vendor.activities]
  submit = "S"
  status = "T"
  fetch  = "F"

[[vendor]]
name    = "llm"
adapter = "go"

[[pipeline]]
name = "weekly"
  [[pipeline.step]]
  name   = "video"
  kind   = "paid"
  vendor = "videogen"
`

// `starter vendor show NAME` says in plain words what allot can promise
// with a vendor (issue 40 §3): from the file for an http or activity
// vendor and the default one, from what a worker recorded for a Go
// adapter; before any worker it says so and prints the command that
// starts one; an unknown name is refused.
func TestVendorShowSaysWhatAllotCanPromise(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("ALLOT_PIPELINES", pipelinetest.Write(t, dir, promisePipelines))
	t.Setenv("ALLOT_LEDGER", "sqlite:"+filepath.Join(dir, "allot.db"))
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1") // nothing here talks to Temporal
	show := func(name string) string {
		t.Helper()
		code, stdout, stderr := run(t, "vendor", "show", name)
		if code != exitOK {
			t.Fatalf("vendor show %s: exit %d: %s", name, code, stderr)
		}
		return stdout
	}
	for name, want := range map[string]string{
		"videogen": "a lost response is looked up by allot's idempotency key",
		"default":  "the bill is reconciled line by line",
		"covers":   "a lost response parks the episode for a person: this vendor cannot be asked whether it ran the request",
	} {
		if out := show(name); !strings.Contains(out, "what allot can promise with it:") || !strings.Contains(out, want) {
			t.Errorf("vendor show %s does not say %q:\n%s", name, want, out)
		}
	}

	// A Go adapter before any worker: no ledger yet, and then one no
	// worker recorded it in.
	out := show("llm")
	if !strings.Contains(out, "no worker has recorded what its adapter declares yet") {
		t.Fatalf("a Go adapter before any worker:\n%s", out)
	}
	m := regexp.MustCompile(`\((go run [^)]*)\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no command to start a worker in:\n%s", out)
	}
	if words, err := workflows.SplitCommand(m[1]); err != nil || len(words) < 3 || words[2] != "./worker" {
		t.Fatalf("the printed command %q: %v %v", m[1], words, err)
	}
	led, err := ledger.Open(t.Context(), os.Getenv("ALLOT_LEDGER"))
	if err != nil {
		t.Fatal(err)
	}
	declared := allot.VendorCapabilities{Lookup: allot.LookupNone, Cost: allot.CostFromUsage, Bill: allot.BillNone}
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	if err := led.RecordVendorCapabilities(t.Context(), "worker-1@host", map[string]allot.VendorCapabilities{"llm": declared}, at); err != nil {
		t.Fatal(err)
	}
	led.Close()
	out = show("llm")
	for _, want := range []string{"as declared to worker worker-1@host at 2026-12-07T09:00:00Z", "this vendor cannot be asked whether it ran the request", "computed by the adapter from the usage"} {
		if !strings.Contains(out, want) {
			t.Errorf("vendor show llm does not say %q:\n%s", want, out)
		}
	}
	code, stdout, _ := run(t, "vendor", "show", "llm", "--json")
	var p report.VendorPromises
	if code != exitOK || json.Unmarshal([]byte(stdout), &p) != nil || p.Capabilities == nil || *p.Capabilities != declared || len(p.Promises) != 6 {
		t.Fatalf("vendor show --json: exit %d, %+v", code, p)
	}

	code, stdout, stderr := run(t, "vendor", "show", "videogem")
	if code != exitError || stdout != "" || !strings.Contains(stderr, `vendor "videogem" is not in the pipeline file`) {
		t.Fatalf("an unknown vendor: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, stderr := run(t, "vendor", "show"); code == exitOK || !strings.Contains(stderr, "name the vendor first: starter vendor show NAME") {
		t.Fatalf("no name: exit %d, %s", code, stderr)
	}
}
