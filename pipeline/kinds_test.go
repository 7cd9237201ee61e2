package pipeline

import (
	"strings"
	"testing"
	"time"
)

const kindsFile = `
[[vendor]]
name        = "videogen"
url         = "http://127.0.0.1:8787"
api_key_env = "VIDEOGEN_API_KEY"

[[vendor]]
name       = "covers"
adapter    = "activity"
task_queue = "covers-python"
  [vendor.activities]
  submit = "SubmitCover"
  lookup = "LookupCover"
  status = "CoverStatus"
  fetch  = "FetchCover"

[[vendor]]
name    = "downstream"
adapter = "go"

[[pipeline]]
name = "media"
  [[pipeline.step]]
  name   = "video"
  kind   = "paid"
  vendor = "videogen"
  [[pipeline.step]]
  name   = "cover"
  kind   = "paid"
  vendor = "covers"
  [[pipeline.step]]
  name = "thumbs"
  kind = "go"
  func = "thumbnails"
  [[pipeline.step]]
  name    = "settle"
  kind    = "exec"
  command = ["./bin/settle", "--date", "{period}"]
  outputs = ["settlement.csv"]
  timeout = "5m"
  [[pipeline.step]]
  name       = "score"
  kind       = "activity"
  activity   = "ScoreEpisode"
  task_queue = "python"
  heartbeat  = "30s"
    [pipeline.step.retry]
    maximum_attempts = 3
  [[pipeline.step]]
  name   = "notify"
  kind   = "effect"
  vendor = "downstream"
`

func TestStepKindsAndVendorsParse(t *testing.T) {
	set, err := Parse([]byte(kindsFile), "test")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := set.Get("media")
	thumbs, _ := p.Step("thumbs")
	settle, _ := p.Step("settle")
	score, _ := p.Step("score")
	if thumbs.Action != "thumbnails" || settle.TimeoutDuration() != 5*time.Minute || settle.RetryExitCodeList()[0] != DefaultRetryExitCode ||
		score.Retry == nil || score.Retry.MaximumAttempts != 3 || !Effect.Remote() || Exec.Remote() {
		t.Fatalf("steps %+v %+v %+v", thumbs, settle, score)
	}
	if v, ok := set.Vendor("covers"); !ok || v.Adapter != AdapterActivity || v.CallTimeout() != DefaultVendorTimeout {
		t.Fatalf("vendor covers = %+v, %v", v, ok)
	}
	if v, _ := set.Vendor("videogen"); v.Adapter != AdapterHTTP {
		t.Fatalf("the default adapter is %q", v.Adapter)
	}
	// The plan pins the step's settings, not func (folded into action).
	if plan := p.Plan(); !strings.Contains(plan, `"command":["./bin/settle","--date","{period}"]`) || strings.Contains(plan, `"func"`) {
		t.Fatalf("plan %s", plan)
	}
}

// A paid step in batch mode: its limits default, and the plan pins them.
func TestBatchStepParses(t *testing.T) {
	set, err := Parse([]byte(`
[[pipeline]]
name = "evals"
  [[pipeline.step]]
  name  = "score"
  kind  = "paid"
  batch = true
  [[pipeline.step]]
  name            = "grade"
  kind            = "paid"
  batch           = true
  batch_max_items = 500
  batch_max_wait  = "20m"
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := set.Get("evals")
	score, _ := p.Step("score")
	grade, _ := p.Step("grade")
	if !score.Batch || score.BatchMaxItemsOrDefault() != DefaultBatchMaxItems || score.BatchMaxWaitDuration() != DefaultBatchMaxWait ||
		grade.BatchMaxItemsOrDefault() != 500 || grade.BatchMaxWaitDuration() != 20*time.Minute {
		t.Fatalf("batch steps %+v %+v", score, grade)
	}
	if plan := p.Plan(); !strings.Contains(plan, `"batch":true,"batch_max_items":500,"batch_max_wait":"20m"`) {
		t.Fatalf("the plan does not pin the batch settings: %s", plan)
	}
}

// A vendor's batch_poll_every sets how often its collector asks about a
// running batch; the default vendor takes it from its [[vendor]] block.
func TestVendorBatchPollEvery(t *testing.T) {
	set, err := Parse([]byte(`
[[vendor]]
name             = "default"
batch_poll_every = "30s"

[[vendor]]
name             = "fast"
url              = "http://vendor.example"
api_key_env      = "FAST_KEY"
batch_poll_every = "2s"
batch_list_lag   = "10s"

[[vendor]]
name        = "plain"
url         = "http://vendor.example"
api_key_env = "PLAIN_KEY"

[[pipeline]]
name = "evals"
  [[pipeline.step]]
  name   = "score"
  kind   = "paid"
  vendor = "fast"
  batch  = true
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	for vendor, want := range map[string]time.Duration{"": 30 * time.Second, DefaultVendor: 30 * time.Second, "fast": 2 * time.Second, "plain": DefaultBatchPollEvery} {
		if got := set.Batching(vendor).PollEvery(); got != want {
			t.Errorf("vendor %q polls its batches every %s, want %s", vendor, got, want)
		}
	}
	if got, plain := set.Batching("fast").ListLag(), set.Batching("plain").ListLag(); got != 10*time.Second || plain != DefaultBatchListLag {
		t.Errorf("batch_list_lag: fast %s (want 10s), plain %s (want %s)", got, plain, DefaultBatchListLag)
	}
	if got := set.WithAutoApprove().Batching(DefaultVendor).PollEvery(); got != 30*time.Second {
		t.Errorf("WithAutoApprove lost the default vendor's batch_poll_every: %s", got)
	}
}

func TestStepAndVendorMistakesAreNamed(t *testing.T) {
	step := func(body string) string {
		return "[[pipeline]]\nname = \"p\"\n  [[pipeline.step]]\n  name = \"s\"\n" + body
	}
	for name, c := range map[string]struct{ file, want string }{
		"unknown kind":            {step(`  kind = "cron"`), `kind "cron" is unknown`},
		"exec without command":    {step(`  kind = "exec"`), "needs command"},
		"misplaced field":         {step("  kind = \"local\"\n  command = [\"x\"]"), "a local step takes no command"},
		"output outside the dir":  {step("  kind = \"exec\"\n  command = [\"x\"]\n  outputs = [\"../x\"]"), "inside the episode's directory"},
		"activity without queue":  {step("  kind = \"activity\"\n  activity = \"A\""), "task_queue"},
		"bad retry exit code":     {step("  kind = \"exec\"\n  command = [\"x\"]\n  retry_exit_codes = [300]"), "not an exit code"},
		"unknown vendor":          {step("  kind = \"paid\"\n  vendor = \"nope\""), `names vendor "nope", which is not defined`},
		"vendor key in the file":  {"[[vendor]]\nname = \"v\"\nurl = \"http://x\"\napi_key = \"sk\"\n" + step(`  kind = "local"`+"\n  action = \"plan\""), "never goes in the pipeline file"},
		"http vendor without key": {"[[vendor]]\nname = \"v\"\nurl = \"http://x\"\n" + step("  kind = \"local\"\n  action = \"plan\""), "api_key_env"},
		"reserved vendor name":    {"[[vendor]]\nname = \"default\"\nadapter = \"go\"\n" + step("  kind = \"local\"\n  action = \"plan\""), "reserved"},
		"activity adapter for paid needs status": {"[[vendor]]\nname = \"v\"\nadapter = \"activity\"\ntask_queue = \"q\"\n[vendor.activities]\nsubmit = \"S\"\n" +
			step("  kind = \"paid\"\n  vendor = \"v\""), "activities.status"},
		"batch settings without batch mode": {step("  kind = \"paid\"\n  batch_max_items = 10"), "add batch = true"},
		"batch of an effect step":           {step("  kind = \"effect\"\n  batch = true"), "effect step takes no batch"},
		"too many batch items":              {step("  kind = \"paid\"\n  batch = true\n  batch_max_items = 60000"), "batch_max_items 60000 is outside 1..50000"},
		"bad batch wait":                    {step("  kind = \"paid\"\n  batch = true\n  batch_max_wait = \"soon\""), "batch_max_wait"},
		"batch on an activity adapter": {"[[vendor]]\nname = \"v\"\nadapter = \"activity\"\ntask_queue = \"q\"\n[vendor.activities]\nsubmit = \"S\"\nstatus = \"T\"\nfetch = \"F\"\n" +
			step("  kind = \"paid\"\n  vendor = \"v\"\n  batch = true"), "takes no batches"},
		"batch poll too often":                   {"[[vendor]]\nname = \"v\"\nurl = \"http://x\"\napi_key_env = \"K\"\nbatch_poll_every = \"100ms\"\n" + step("  kind = \"local\"\n  action = \"plan\""), `batch_poll_every = "100ms": give 1s to 1h0m0s`},
		"batch list lag too long":                {"[[vendor]]\nname = \"v\"\nurl = \"http://x\"\napi_key_env = \"K\"\nbatch_list_lag = \"2h\"\n" + step("  kind = \"local\"\n  action = \"plan\""), `batch_list_lag = "2h": give 1s to 1h0m0s`},
		"negative batch queue":                   {"[[vendor]]\nname = \"v\"\nurl = \"http://x\"\napi_key_env = \"K\"\nbatch_max_queued_items = -1\n" + step("  kind = \"local\"\n  action = \"plan\""), "batch_max_queued_items = -1: give the most items"},
		"batches larger than the vendor's queue": {"[[vendor]]\nname = \"default\"\nbatch_max_queued_items = 500\n" + step("  kind = \"paid\"\n  batch = true"), "closes batches at 1000 items, but vendor \"default\" holds at most 500"},
		"batch poll on an activity adapter": {"[[vendor]]\nname = \"v\"\nadapter = \"activity\"\ntask_queue = \"q\"\nbatch_poll_every = \"1m\"\n[vendor.activities]\nsubmit = \"S\"\n" +
			step("  kind = \"local\"\n  action = \"plan\""), "an activity adapter takes no batches: remove batch_poll_every, batch_list_lag and batch_max_queued_items"},
		"bad period offset": {"[[pipeline]]\nname = \"p\"\nperiod_offset = \"yesterday\"\n  [[pipeline.step]]\n  name = \"s\"\n  kind = \"local\"\n  action = \"plan\"", "period_offset"},
	} {
		if _, err := Parse([]byte(c.file), "test"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", name, err, c.want)
		}
	}
}

// period_offset "-1d" names the business date a 00:05 settlement run is
// for, across DST changes and the year boundary; a fixed -24h would not.
func TestPeriodOffsetInCalendarDays(t *testing.T) {
	set, err := Parse([]byte(`
[[pipeline]]
name          = "settle"
period        = "day"
time_zone     = "Europe/Berlin"
period_offset = "-1d"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
[[pipeline]]
name          = "settle-24h"
period        = "day"
time_zone     = "Europe/Berlin"
period_offset = "-24h"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	days, _ := set.Get("settle")
	hours, _ := set.Get("settle-24h")
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for _, c := range []struct {
		run       time.Time
		want      string
		hoursWant string
	}{
		// Spring forward (2026-03-29): the day has 23 hours.
		{time.Date(2026, 3, 30, 0, 5, 0, 0, berlin), "2026-03-29", "2026-03-28"},
		// Fall back (2026-10-25): the day has 25 hours.
		{time.Date(2026, 10, 26, 0, 5, 0, 0, berlin), "2026-10-25", "2026-10-25"},
		// New year.
		{time.Date(2027, 1, 1, 0, 5, 0, 0, berlin), "2026-12-31", "2026-12-31"},
	} {
		if got := days.PeriodOf(c.run); got != c.want {
			t.Errorf("-1d: run %s settles %s, want %s", c.run, got, c.want)
		}
		if got := hours.PeriodOf(c.run); got != c.hoursWant {
			t.Errorf("-24h: run %s gives %s, want %s", c.run, got, c.hoursWant)
		}
	}
}

func TestNominalTimeWindow(t *testing.T) {
	set, err := Parse([]byte("[[pipeline]]\nname = \"p\"\nnominal_time_max_ahead = \"24h\"\n  [[pipeline.step]]\n  name = \"plan\"\n  kind = \"local\"\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := set.Get("p")
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, bad := range []time.Time{{}, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC), now.Add(25 * time.Hour), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)} {
		if err := p.CheckNominalTime(bad, now); err == nil {
			t.Errorf("nominal time %s was accepted", bad)
		}
	}
	if err := p.CheckNominalTime(now.Add(23*time.Hour), now); err != nil {
		t.Errorf("a time inside the window: %v", err)
	}
}
