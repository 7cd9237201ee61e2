package main

import (
	"bytes"
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
	"allot/pipeline"
	"allot/workflows"
)

const vendorPipelines = `
[[vendor]]
name          = "videogen"
url           = "https://api.videogen.example"
api_key_env   = "VIDEOGEN_API_KEY"
max_in_flight = 4
rate          = 2.0
burst         = 4
trip_after    = 5

[[pipeline]]
name = "weekly"
  [[pipeline.step]]
  name   = "video"
  kind   = "paid"
  vendor = "videogen"
`

func vendorEnv(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	pipes := pipelinetest.Write(t, dir, vendorPipelines)
	t.Setenv("ALLOT_PIPELINES", pipes)
	t.Setenv("ALLOT_LEDGER", "sqlite:"+filepath.Join(dir, "allot.db"))
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1") // nothing here talks to Temporal
	return dir
}

func listVendors(t *testing.T) map[string]report.VendorView {
	t.Helper()
	code, stdout, stderr := run(t, "vendor", "list", "--json")
	if code != exitOK {
		t.Fatalf("vendor list: exit %d: %s", code, stderr)
	}
	var vs []report.VendorView
	if err := json.Unmarshal([]byte(stdout), &vs); err != nil {
		t.Fatal(err)
	}
	out := map[string]report.VendorView{}
	for _, v := range vs {
		out[v.Name] = v
	}
	return out
}

// `starter vendor pause NAME --reason TEXT`, `resume NAME` and `list`: the
// state is in the ledger; the command pause prints runs as printed; refused
// commands change nothing.
func TestVendorPauseResumeList(t *testing.T) {
	vendorEnv(t)
	// Before the ledger exists every vendor is active, and no worker has
	// recorded the limits it enforces.
	vs := listVendors(t)
	if len(vs) != 2 || vs["default"].Status != "active" || vs["videogen"].LimitsKnown || vs["videogen"].Limits.MaxInFlight != 0 || vs["videogen"].Tokens != nil {
		t.Fatalf("before anything: %+v", vs)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"vendor", "pause", "videogen"}, exitUsage, "--reason is required"},
		{[]string{"vendor", "pause", "--reason", "x"}, exitUsage, "name the vendor first"},
		{[]string{"vendor", "pause", "videogne", "--reason", "typo"}, exitError, `InvalidInput: vendor "videogne" is not in the pipeline file: name one of default, videogen`},
		{[]string{"vendor", "resume", "nope"}, exitError, "InvalidInput"},
		{[]string{"vendor", "stop", "videogen"}, exitUsage, "vendor takes a subcommand"},
	} {
		code, _, stderr := run(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, stderr, c.code, c.want)
		}
	}
	if vs := listVendors(t); vs["videogen"].Status != "active" || len(vs) != 2 {
		t.Fatalf("a refused command changed something: %+v", vs)
	}
	// Pausing writes the ledger, which only the worker creates.
	if code, _, stderr := run(t, "vendor", "pause", "videogen", "--reason", "x"); code != exitError || !strings.Contains(stderr, "go run ./worker --ledger") {
		t.Fatalf("pause without a ledger: exit %d: %s", code, stderr)
	}
	created, err := ledger.Open(t.Context(), os.Getenv("ALLOT_LEDGER"))
	if err != nil {
		t.Fatal(err)
	}
	recordWorkerLimits(t, created)
	created.Close()
	if vs := listVendors(t); !vs["videogen"].LimitsKnown || vs["videogen"].Limits.MaxInFlight != 4 || vs["videogen"].Tokens == nil || *vs["videogen"].Tokens != 4 {
		t.Fatalf("after a worker recorded its limits: %+v", vs)
	}

	code, stdout, stderr := run(t, "vendor", "pause", "videogen", "--reason", "bills twice", "--by", "alice", "--polls")
	if code != exitOK {
		t.Fatalf("pause: exit %d: %s", code, stderr)
	}
	v := listVendors(t)["videogen"]
	if v.Status != "paused" || v.Reason != "bills twice" || v.PausedBy != "alice" || !v.PausePolls || v.Since.IsZero() {
		t.Fatalf("paused: %+v", v)
	}
	var text bytes.Buffer
	c2, out, _ := run(t, "vendor", "list")
	text.WriteString(out)
	if c2 != exitOK || !regexp.MustCompile(`videogen\s+paused\s+\S+\s+0/4\s+4\.0/4\s+0/5\s+bills twice \(by alice\)`).MatchString(text.String()) {
		t.Fatalf("vendor list:\n%s", text.String())
	}
	// The command pause prints for going on, run as printed.
	m := regexp.MustCompile(`starter vendor resume \S+`).FindString(stdout)
	words, err := workflows.SplitCommand(m)
	if err != nil || len(words) != 4 || words[0] != "starter" {
		t.Fatalf("pause printed %q", stdout)
	}
	if code, _, stderr := run(t, words[1:]...); code != exitOK {
		t.Fatalf("%s: exit %d: %s", m, code, stderr)
	}
	if v := listVendors(t)["videogen"]; v.Status != "active" || v.Reason != "" {
		t.Fatalf("resumed: %+v", v)
	}
	// A tripped breaker shows why, and resume closes it.
	led, err := ledger.Open(t.Context(), os.Getenv("ALLOT_LEDGER"))
	if err != nil {
		t.Fatal(err)
	}
	lim := ledger.VendorLimits{TripAfter: 1, CoolDown: time.Minute}
	if _, err := led.AcquireVendor(t.Context(), ledger.VendorRequest{Vendor: "videogen", Holder: "h", Kind: ledger.VendorSend, Limits: lim, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := led.ReleaseVendor(t.Context(), ledger.VendorRelease{Vendor: "videogen", Holder: "h", Outcome: ledger.VendorFailed, Error: "503 Service Unavailable", Limits: lim}); err != nil {
		t.Fatal(err)
	}
	led.Close()
	if v := listVendors(t)["videogen"]; v.Status != "tripped" || v.Reason != "tripped: 503 Service Unavailable" || v.Failures != 1 {
		t.Fatalf("tripped: %+v", v)
	}
	if code, _, stderr := run(t, "vendor", "resume", "videogen"); code != exitOK {
		t.Fatalf("resume: %d %s", code, stderr)
	}
	if v := listVendors(t)["videogen"]; v.Status != "active" || v.Failures != 0 {
		t.Fatalf("resumed a tripped vendor: %+v", v)
	}
}

// recordWorkerLimits records the limits of vendorPipelines as a starting
// worker does (app.Run).
func recordWorkerLimits(t *testing.T, led *ledger.Ledger) {
	t.Helper()
	set, err := pipeline.Load(os.Getenv("ALLOT_PIPELINES"))
	if err != nil {
		t.Fatal(err)
	}
	if err := led.RecordLimitsOf(t.Context(), set, "worker-1@host"); err != nil {
		t.Fatal(err)
	}
}

// `vendor list` shows the limits the workers recorded, not the starter's
// ALLOT_VENDOR_* (which the workers never see), and says when no worker
// has recorded any.
func TestVendorListShowsTheWorkersLimitsNotTheStartersEnv(t *testing.T) {
	vendorEnv(t)
	t.Setenv("ALLOT_VENDOR_URL", "http://127.0.0.1:1")
	t.Setenv("ALLOT_VENDOR_RATE", "2")
	created, err := ledger.Open(t.Context(), os.Getenv("ALLOT_LEDGER"))
	if err != nil {
		t.Fatal(err)
	}
	created.Close()
	code, out, stderr := run(t, "vendor", "list")
	if code != exitOK || regexp.MustCompile(`default\s+active\s+\S+\s+\S+\s+\d\.\d/`).MatchString(out) ||
		!strings.Contains(out, "no worker has recorded the limits it enforces for default, videogen yet") || !strings.Contains(out, "go run ./worker --ledger") {
		t.Fatalf("vendor list before any worker, with the starter's ALLOT_VENDOR_RATE=2: exit %d %s\n%s", code, stderr, out)
	}
	if v := listVendors(t)["default"]; v.LimitsKnown || v.Limits.Rate != 0 || v.Tokens != nil {
		t.Fatalf("the starter's environment shown as the default vendor's limits: %+v", v)
	}
}

// Pausing a paused vendor keeps the first reason; the later request shows
// in `vendor list` and both in `vendor list --history`.
func TestVendorPauseTwiceKeepsTheFirstReason(t *testing.T) {
	vendorEnv(t)
	created, err := ledger.Open(t.Context(), os.Getenv("ALLOT_LEDGER"))
	if err != nil {
		t.Fatal(err)
	}
	created.Close()
	for _, c := range [][]string{
		{"vendor", "pause", "videogen", "--reason", "bills twice since 09:10", "--by", "alice"},
		{"vendor", "pause", "videogen", "--reason", "still billing twice", "--by", "bob"},
	} {
		if code, _, stderr := run(t, c...); code != exitOK {
			t.Fatalf("%v: exit %d: %s", c, code, stderr)
		}
	}
	v := listVendors(t)["videogen"]
	if v.Reason != "bills twice since 09:10" || v.PausedBy != "alice" || v.LaterPauses != 1 || v.LatestPause == nil || v.LatestPause.By != "bob" {
		t.Fatalf("paused twice: %+v", v)
	}
	_, out, _ := run(t, "vendor", "list")
	if !strings.Contains(out, "bills twice since 09:10 (by alice); 1 later pause request(s), the latest by bob at ") {
		t.Fatalf("vendor list:\n%s", out)
	}
	if code, _, stderr := run(t, "vendor", "resume", "videogen", "--by", "carol"); code != exitOK {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	code, out, stderr := run(t, "vendor", "list", "--history")
	if code != exitOK || !regexp.MustCompile(`(?s)videogen\s+pause\s+\S+\s+alice\s+bills twice since 09:10.*videogen\s+pause\s+\S+\s+bob\s+still billing twice.*videogen\s+resume\s+\S+\s+carol`).MatchString(out) {
		t.Fatalf("vendor list --history: exit %d %s\n%s", code, stderr, out)
	}
}

// `episode show` prints a step waiting for its vendor, and why.
func TestShowPrintsAStepWaitingForItsVendor(t *testing.T) {
	since := time.Date(2026, 8, 3, 2, 0, 5, 0, time.UTC)
	res := report.ShowResult{
		Episode: report.ViewEpisode(ledger.Episode{Pipeline: "weekly", ID: "2026-W32-0", Period: "2026-W32", Status: ledger.EpisodeAllocated,
			Outcome: string(allot.OutcomeWaitingVendor), OutcomeReason: allot.ReasonVendorPaused}),
		Workflow: &report.WorkflowStatus{
			WorkflowID: "weekly/episode/2026-W32-0", Status: "WORKFLOW_EXECUTION_STATUS_RUNNING",
			State: &workflows.EpisodeState{Stage: allot.StageWaitingVendor, Waiting: &workflows.WaitingVendor{
				Step: "video", Vendor: "videogen", Reason: allot.ReasonVendorPaused, Message: "vendor videogen is paused by alice: bills twice", Since: since,
			}},
		},
	}
	res.VendorNow = &report.VendorNow{Vendor: "videogen", Status: "active", Message: "active: the wait ends at the step's next attempt", At: since.Add(9 * time.Minute)}
	var b bytes.Buffer
	printShow(&b, res)
	out := b.String()
	for _, want := range []string{
		"status\twaiting_vendor",
		"video waits for vendor videogen since 2026-08-03T02:00:05Z, vendor_paused: vendor videogen is paused by alice: bills twice",
		// The recorded wait is followed by the vendor's state now.
		"\tvendor videogen now (2026-08-03T02:09:05Z): active: the wait ends at the step's next attempt",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("episode show lacks %q:\n%s", want, out)
		}
	}
}

// An ALLOT_ variable with a typo is not ignored without a word: the
// starter warns, naming the variable it was probably meant to be.
func TestStarterWarnsAboutUnknownAllotVariables(t *testing.T) {
	vendorEnv(t)
	t.Setenv("ALLOT_VENDOR_RATEE", "2")
	code, _, stderr := run(t, "vendor", "list")
	if code != exitOK || !strings.Contains(stderr, "variable=ALLOT_VENDOR_RATEE closest=ALLOT_VENDOR_RATE") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// `episode show` prints a step waiting for its batch, the batches that
// carried its task, what became of it in each, and what happens next.
func TestShowPrintsAStepWaitingForItsBatch(t *testing.T) {
	since := time.Date(2026, 8, 3, 2, 0, 5, 0, time.UTC)
	res := report.ShowResult{
		Episode: report.ViewEpisode(ledger.Episode{Pipeline: "evals", ID: "2026-W32-0", Period: "2026-W32", Status: ledger.EpisodeAllocated,
			Outcome: string(allot.OutcomeWaitingBatch), OutcomeReason: allot.ReasonBatchRunning}),
		Workflow: &report.WorkflowStatus{
			WorkflowID: "evals/episode/2026-W32-0", Status: "WORKFLOW_EXECUTION_STATUS_RUNNING",
			State: &workflows.EpisodeState{Stage: allot.StageWaitingBatch, Batch: &workflows.WaitingBatch{
				Step: "score", Reason: allot.ReasonBatchRunning, BatchKey: "k2", VendorBatchID: "vb_2", State: allot.BatchCreated, Status: "in_progress", Items: 40, Since: since,
			}},
		},
		Batches: []report.ShowBatch{
			{Step: "score", Key: "k1", VendorBatchID: "vb_1", State: allot.BatchEnded, Status: "expired", Items: 40, Settled: 40, Outcome: allot.BatchItemNotProcessed,
				Next: "the vendor did not run it (expired): it went into the next batch under its same key"},
			{Step: "score", Key: "k2", VendorBatchID: "vb_2", State: allot.BatchCreated, Status: "in_progress", Items: 40,
				Next: "the collector asks the vendor about the batch on a timer; when it ends, this task's result and cost are recorded"},
		},
	}
	var b bytes.Buffer
	printShow(&b, res)
	out := b.String()
	for _, want := range []string{
		"status\twaiting_batch",
		"score waits for a vendor batch since 2026-08-03T02:00:05Z, batch_running: batch vb_2, in_progress, 40 items",
		"batch\tscore revision 0: vendor batch vb_1 (key k1) ended expired, 40 of 40 items settled, this task not_processed\n\tthe vendor did not run it (expired)",
		"batch\tscore revision 0: vendor batch vb_2 (key k2) created in_progress, 0 of 40 items settled\n\tthe collector asks the vendor",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("episode show lacks %q:\n%s", want, out)
		}
	}
}

// Issue 38 §4: resuming a vendor that is not paused (nor tripped) is
// refused at once, exit 1 with what to look at, and records nothing: it
// used to say "active" as if it had done something.
func TestVendorResumeOfAnActiveVendorIsRefused(t *testing.T) {
	vendorEnv(t)
	created, err := ledger.Open(t.Context(), os.Getenv("ALLOT_LEDGER"))
	if err != nil {
		t.Fatal(err)
	}
	created.Close()
	code, stdout, stderr := run(t, "vendor", "resume", "videogen", "--by", "carol", "--reason", "back")
	if code != exitError || !strings.Contains(stderr, "InvalidInput: vendor videogen is not paused and its breaker is not tripped: there is nothing to resume, and nothing was recorded; `starter vendor list` shows") || stdout != "" {
		t.Fatalf("resume of an active vendor: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, out, _ := run(t, "vendor", "list", "--history"); strings.Contains(out, "resume") {
		t.Fatalf("a refused resume was recorded:\n%s", out)
	}
	words, err := workflows.SplitCommand(printedCommand.FindStringSubmatch(stderr)[1])
	if err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run(t, words[1:]...); code != exitOK || !regexp.MustCompile(`videogen\s+active`).MatchString(out) {
		t.Fatalf("the printed command: exit %d %s\n%s", code, stderr, out)
	}
	// Paused, it resumes; twice, the second is refused.
	if code, _, stderr := run(t, "vendor", "pause", "videogen", "--reason", "bills twice"); code != exitOK {
		t.Fatalf("pause: %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "vendor", "resume", "videogen"); code != exitOK {
		t.Fatalf("resume of a paused vendor: %d %s", code, stderr)
	}
	if code, _, _ := run(t, "vendor", "resume", "videogen"); code != exitError {
		t.Fatalf("a second resume: exit %d, want %d", code, exitError)
	}
}
