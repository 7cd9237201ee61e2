package chaos

import (
	"fmt"
	"strings"
	"time"
)

// The chaos run's pipelines. Each exercises something else:
//
//   - chaos-video: ISO weeks in UTC, two paid steps on the default vendor,
//     an approval that passes by itself, no cap;
//   - chaos-review: ISO weeks in America/New_York, one paid step, an
//     approval the driver gives (as an operator would), at most 3 per week;
//   - chaos-daily: days in Pacific/Auckland (13 hours ahead of UTC at the
//     new year, so UTC's 31 December is already 2027 there), one paid step
//     on the activity-adapter vendor (ActivityVendor: activities on its
//     own task queue, served by the activityvendor process, which forwards
//     each to a vendorsim), at most 2 per day;
//   - chaos-strict: one paid step on a second vendor that cannot be asked by
//     idempotency key (vendorsim --no-lookup) and loses responses: an
//     unknown outcome parks the episode until a person runs its remedy;
//   - chaos-batch: one paid step in batch mode on a third vendor
//     (BatchVendor), whose batches lose their create's response, expire
//     or are cancelled half way: items from many episodes go in one
//     vendor batch, each billed once at half price, the unfinished ones
//     sent again in the next batch under the same key.
//
// Budgets (invariant 20) cover two pipelines and one vendor, each sized
// below what the load asks of it, so that every kind of period runs out:
// chaos-video's ISO weeks (4 tasks of the ~6 a week asks), chaos-daily's
// months in Auckland (6 tasks of the ~10 a month asks: its refusals park
// episodes of the activity-adapter vendor), and the default vendor's ISO
// weeks in New York (5 tasks of the ~7 a week asks of it). Every covered
// step's max_cost is the simulator's price, 250 USD cents.
//
// The default vendor takes at most DefaultMaxInFlight requests at once
// from all workers, and its breaker trips after 3 consecutive failures.
const (
	PipelineVideo  = "chaos-video"
	PipelineReview = "chaos-review"
	PipelineDaily  = "chaos-daily"
	PipelineStrict = "chaos-strict"
	// PipelineCatchUp runs on a real schedule every CatchUpInterval during
	// the load, with catch_up = "latest": all workers are down across
	// several of its times once (evWorkersOutage).
	PipelineCatchUp = "chaos-catchup"
	// PipelineDeadline declares a deadline due DeadlineAfter after the
	// run writes its pipelines file, warned DeadlineWarnBefore before it,
	// and nothing ever runs it: the run plants one late period (and its
	// warning), which the watchers must record exactly once whatever the
	// worker kills (checkDeadlines).
	PipelineDeadline = "chaos-deadline"
	// PipelineBatch's paid step runs in batch mode on BatchVendor.
	PipelineBatch = "chaos-batch"
)

// BatchVendor is the [[vendor]] of chaos-batch's batches; the workers and
// the starter read its key from BatchVendorKeyEnv.
const (
	BatchVendor       = "batch"
	BatchVendorKeyEnv = "CHAOS_BATCH_VENDOR_KEY"
)

// The batch vendor's course: a batch takes BatchDuration to do all its
// items; chaos-batch closes a batch at BatchMaxItems items or after
// BatchMaxWait, its collector asks every BatchPollEvery, and after a
// create with no answer (the vendor killed mid-request) it only reads the
// list for BatchListLag (the simulator lists a batch at once); its
// unfinished batches hold at most BatchMaxQueued items, so a batch closed
// while another runs may wait for room. A batch's
// create loses its response, the batch expires half way or the vendor
// cancels it half way, each with its probability.
const (
	BatchDuration   = 3 * time.Second
	BatchMaxItems   = 4
	BatchMaxWait    = 2 * time.Second
	BatchPollEvery  = time.Second
	BatchListLag    = 5 * time.Second
	BatchMaxQueued  = 6
	batchLoseCreate = 0.3
	batchExpire     = 0.25
	batchCancel     = 0.25
)

// DeadlineAfter and DeadlineWarnBefore place chaos-deadline's deadline.
const (
	DeadlineAfter      = time.Minute
	DeadlineWarnBefore = 10 * time.Second
)

// deadlineOffset is the deadline of a day period in UTC that falls at due:
// its offset from the day's midnight, in whole seconds (at least one).
func deadlineOffset(due time.Time) string {
	return dueOffset(due).String()
}

func dueOffset(due time.Time) time.Duration {
	due = due.UTC()
	midnight := time.Date(due.Year(), due.Month(), due.Day(), 0, 0, 0, 0, time.UTC)
	return max(due.Sub(midnight).Truncate(time.Second), time.Second)
}

// deadlineWarnBefore is chaos-deadline's warn_before for a deadline due at
// due: DeadlineWarnBefore, or less just after midnight, where a warning
// cannot come before the period begins (the pipeline file refuses one).
func deadlineWarnBefore(due time.Time) time.Duration {
	return min(DeadlineWarnBefore, dueOffset(due))
}

// CatchUpInterval and CatchUpGrace are chaos-catchup's schedule interval
// and catch_up_grace.
const (
	CatchUpInterval = 4 * time.Second
	CatchUpGrace    = time.Second
)

// DefaultMaxInFlight is the default vendor's max_in_flight in the chaos
// run; the vendor's own count of requests at once is checked against it.
const DefaultMaxInFlight = 2

// defaultTripAfter is the default vendor's trip_after in the chaos run.
const defaultTripAfter = 3

// ActivityVendor is the [[vendor]] with adapter = "activity": its
// activities (submit, lookup, status, fetch) run on ActivityVendorQueue.
const (
	ActivityVendor      = "activity"
	ActivityVendorQueue = "chaos-activity-vendor"
)

// StrictVendorKeyEnv names the variable the workers and the starter read
// the strict vendor's key from.
const StrictVendorKeyEnv = "CHAOS_STRICT_VENDOR_KEY"

// cronSpec is a schedule that fires on some weekdays at one local time; the
// same value gives the cron line and the times it fires at.
type cronSpec struct {
	Days         []time.Weekday // empty: every day
	Hour, Minute int
	Zone         string
}

func (c cronSpec) cron() string {
	days := "*"
	if len(c.Days) > 0 {
		var names []string
		for _, d := range c.Days {
			names = append(names, strings.ToUpper(d.String()[:3]))
		}
		days = strings.Join(names, ",")
	}
	return fmt.Sprintf("%d %d * * %s", c.Minute, c.Hour, days)
}

// times lists when the schedule fires in [from, to), in UTC.
func (c cronSpec) times(from, to time.Time) []time.Time {
	loc, err := time.LoadLocation(c.Zone)
	if err != nil {
		panic(err)
	}
	var out []time.Time
	start := from.In(loc)
	for d := time.Date(start.Year(), start.Month(), start.Day()-1, 0, 0, 0, 0, loc); d.Before(to); d = d.AddDate(0, 0, 1) {
		if len(c.Days) > 0 && !containsDay(c.Days, d.Weekday()) {
			continue
		}
		t := time.Date(d.Year(), d.Month(), d.Day(), c.Hour, c.Minute, 0, 0, loc)
		if !t.Before(from) && t.Before(to) {
			out = append(out, t.UTC())
		}
	}
	return out
}

func containsDay(days []time.Weekday, d time.Weekday) bool {
	for _, x := range days {
		if x == d {
			return true
		}
	}
	return false
}

// schedules are the scheduled pipelines' specs for a scale.
func schedules(sc Scale) map[string]cronSpec {
	return map[string]cronSpec{
		PipelineVideo:  {Days: sc.VideoDays, Hour: 2, Minute: 0, Zone: "UTC"},
		PipelineReview: {Days: []time.Weekday{time.Tuesday, time.Friday}, Hour: 9, Minute: 30, Zone: "America/New_York"},
		PipelineDaily:  {Days: sc.DailyDays, Hour: 6, Minute: 0, Zone: "Pacific/Auckland"},
	}
}

// The budgets of a chaos run.
const (
	BudgetVideo  = "chaos-video-weekly"
	BudgetDaily  = "chaos-daily-monthly"
	BudgetVendor = "default-vendor-weekly"
)

// pipelinesTOML is the pipelines file of a chaos run.
func pipelinesTOML(sc Scale, strictURL, batchURL string, deadlineDue time.Time) string {
	s := schedules(sc)
	return fmt.Sprintf(`# Written by the chaos run (internal/chaos); see chaos/README.md.

[[vendor]]
name          = "default"
max_in_flight = %d
trip_after    = %d
cool_down     = "5s"

[[vendor]]
name        = "strict"
adapter     = "http"
url         = %q
api_key_env = %q

[[vendor]]
name             = %q
adapter          = "http"
url              = %q
api_key_env      = %q
batch_poll_every = %q
batch_list_lag   = %q
batch_max_queued_items = %d

[[vendor]]
name       = %q
adapter    = "activity"
task_queue = %q
timeout    = "10s"
activities = { submit = "submit", lookup = "lookup", status = "status", fetch = "fetch" }

[[budget]]
name      = %q
pipeline  = %q
period    = "iso-week"
time_zone = "UTC"
limit     = { amount = 1000, currency = "USD" }
alerts    = [0.5, 0.8]

[[budget]]
name      = %q
pipeline  = %q
period    = "month"
time_zone = "Pacific/Auckland"
limit     = { amount = 1500, currency = "USD" }

[[budget]]
name      = %q
vendor    = "default"
period    = "iso-week"
time_zone = "America/New_York"
limit     = { amount = 1250, currency = "USD" }

[[pipeline]]
name         = %q
period       = "iso-week"
time_zone    = "UTC"
auto_approve = true
  [pipeline.schedule]
  cron              = %q
  overlap           = "allow_all"
  catchup_window    = "24h"
  max_backfill      = "2160h"
  max_backfill_runs = 1000
  [[pipeline.step]]
  name     = "video"
  kind     = "paid"
  params   = { resolution = "1080p" }
  max_cost = { amount = 250, currency = "USD" }
  [[pipeline.step]]
  name     = "cover"
  kind     = "paid"
  max_cost = { amount = 250, currency = "USD" }
  [[pipeline.step]]
  name = "assemble"
  kind = "local"
  [[pipeline.step]]
  name = "approve"
  kind = "approval"
  [[pipeline.step]]
  name = "publish"
  kind = "local"

[[pipeline]]
name                    = %q
period                  = "iso-week"
time_zone               = "America/New_York"
max_episodes_per_period = 3
  [pipeline.schedule]
  cron              = %q
  overlap           = "allow_all"
  catchup_window    = "24h"
  max_backfill      = "2160h"
  max_backfill_runs = 1000
  [[pipeline.step]]
  name     = "draft"
  kind     = "paid"
  max_cost = { amount = 250, currency = "USD" }
  [[pipeline.step]]
  name = "approve"
  kind = "approval"
  [[pipeline.step]]
  name = "publish"
  kind = "local"

[[pipeline]]
name                    = %q
period                  = "day"
time_zone               = "Pacific/Auckland"
max_episodes_per_period = 2
  [pipeline.schedule]
  cron              = %q
  overlap           = "allow_all"
  catchup_window    = "24h"
  max_backfill      = "2160h"
  max_backfill_runs = 1000
  [[pipeline.step]]
  name = "plan"
  kind = "local"
  [[pipeline.step]]
  name     = "settle"
  kind     = "paid"
  vendor   = %q
  params   = { ledger = "nz" }
  max_cost = { amount = 250, currency = "USD" }
  [[pipeline.step]]
  name = "publish"
  kind = "local"

[[pipeline]]
name      = %q
period    = "iso-week"
time_zone = "Europe/Berlin"
  [[pipeline.step]]
  name   = "render"
  kind   = "paid"
  vendor = "strict"
  [[pipeline.step]]
  name = "publish"
  kind = "local"

[[pipeline]]
name   = %q
period = "day"
  [pipeline.schedule]
  interval       = %q
  catchup_window = "10s"
  catch_up       = "latest"
  catch_up_grace = %q
  [[pipeline.step]]
  name = "plan"
  kind = "local"

[[pipeline]]
name        = %q
period      = "day"
deadline    = %q
warn_before = %q
  [[pipeline.step]]
  name = "plan"
  kind = "local"

[[pipeline]]
name      = %q
period    = "iso-week"
time_zone = "UTC"
  [[pipeline.step]]
  name            = "score"
  kind            = "paid"
  vendor          = %q
  batch           = true
  batch_max_items = %d
  batch_max_wait  = %q
  [[pipeline.step]]
  name = "publish"
  kind = "local"
`, DefaultMaxInFlight, defaultTripAfter, strictURL, StrictVendorKeyEnv,
		BatchVendor, batchURL, BatchVendorKeyEnv, BatchPollEvery.String(), BatchListLag.String(), BatchMaxQueued,
		ActivityVendor, ActivityVendorQueue,
		BudgetVideo, PipelineVideo, BudgetDaily, PipelineDaily, BudgetVendor,
		PipelineVideo, s[PipelineVideo].cron(),
		PipelineReview, s[PipelineReview].cron(),
		PipelineDaily, s[PipelineDaily].cron(), ActivityVendor,
		PipelineStrict,
		PipelineCatchUp, CatchUpInterval.String(), CatchUpGrace.String(),
		PipelineDeadline, deadlineOffset(deadlineDue), deadlineWarnBefore(deadlineDue).String(),
		PipelineBatch, BatchVendor, BatchMaxItems, BatchMaxWait.String())
}

// measurePipelinesTOML is the one pipeline the kill measurement runs: only
// what allot understood at commit 63ca1f9 already, so old and new workers
// run the same steps.
const measurePipeline = "measure-paid"

const measurePipelinesTOML = `# Written by the chaos run's kill measurement (internal/chaos).
[[pipeline]]
name         = "measure-paid"
auto_approve = true
  [[pipeline.step]]
  name = "video"
  kind = "paid"
  [[pipeline.step]]
  name = "cover"
  kind = "paid"
  [[pipeline.step]]
  name = "assemble"
  kind = "local"
  [[pipeline.step]]
  name = "approve"
  kind = "approval"
  [[pipeline.step]]
  name = "publish"
  kind = "local"
`
