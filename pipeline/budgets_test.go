package pipeline

import (
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
)

// budgetFile is a valid file with budgets of every scope and period.
const budgetFile = `
[[vendor]]
name        = "videogen"
url         = "http://127.0.0.1:8787"
api_key_env = "VIDEOGEN_API_KEY"

[[vendor]]
name       = "covers"
adapter    = "activity"
task_queue = "covers"
  [vendor.activities]
  submit = "Submit"
  status = "Status"
  fetch  = "Fetch"
  quote  = "Quote"

[[budget]]
name      = "video-weekly"
pipeline  = "weekly-video"
period    = "iso-week"
time_zone = "UTC"
limit     = { amount = 75000, currency = "USD" }
alerts    = [0.5, 0.8]

[[budget]]
name      = "videogen-monthly"
vendor    = "videogen"
period    = "month"
time_zone = "Europe/Berlin"
limit     = { amount = 1000000, currency = "USD" }

[[budget]]
name     = "weekly-at-videogen"
pipeline = "weekly-video"
vendor   = "videogen"
period   = "day"
limit    = { amount = 500, currency = "USD" }

[[pipeline]]
name = "weekly-video"
  [[pipeline.step]]
  name     = "video"
  kind     = "paid"
  vendor   = "videogen"
  max_cost = { amount = 250, currency = "USD" }
  [[pipeline.step]]
  name   = "cover"
  kind   = "paid"
  vendor = "covers"
  [[pipeline.step]]
  name   = "notify"
  kind   = "effect"
  vendor = "videogen"
  [[pipeline.step]]
  name     = "publish"
  kind     = "effect"
  vendor   = "videogen"
  max_cost = { amount = 5, currency = "USD" }

[[pipeline]]
name = "other"
  [[pipeline.step]]
  name     = "render"
  kind     = "paid"
  vendor   = "videogen"
  max_cost = { amount = 100, currency = "USD" }
  [[pipeline.step]]
  name = "free"
  kind = "paid"
  max_cost = { amount = 1, currency = "EUR" }
`

func TestBudgetsParseAndCover(t *testing.T) {
	set, err := Parse([]byte(budgetFile), "test")
	if err != nil {
		t.Fatal(err)
	}
	if got := set.BudgetNames(); !slices.Equal(got, []string{"video-weekly", "videogen-monthly", "weekly-at-videogen"}) {
		t.Fatalf("budgets %v", got)
	}
	p, _ := set.Get("weekly-video")
	names := func(bs []Budget) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.Name)
		}
		return out
	}
	for step, want := range map[string][]string{
		"video":   {"video-weekly", "videogen-monthly", "weekly-at-videogen"},
		"cover":   {"video-weekly"}, // its activity adapter quotes: no max_cost needed
		"notify":  nil,              // an effect without max_cost reserves nothing
		"publish": {"video-weekly", "videogen-monthly", "weekly-at-videogen"},
	} {
		st, _ := p.Step(step)
		if got := names(set.BudgetsFor(p.Name, st)); !slices.Equal(got, want) {
			t.Errorf("step %s is covered by %v, want %v", step, got, want)
		}
	}
	other, _ := set.Get("other")
	render, _ := other.Step("render")
	if got := names(set.BudgetsFor("other", render)); !slices.Equal(got, []string{"videogen-monthly"}) {
		t.Errorf("other/render is covered by %v", got)
	}
	free, _ := other.Step("free")
	if got := set.BudgetsFor("other", free); len(got) != 0 {
		t.Errorf("a step of the default vendor is covered by %v", names(got))
	}

	// Periods come from the nominal time in the budget's zone.
	weekly, _ := set.Budget("video-weekly")
	monthly, _ := set.Budget("videogen-monthly")
	daily, _ := set.Budget("weekly-at-videogen")
	ts := mustTime(t, "2026-08-31T22:30:00Z") // already September in Berlin
	for _, c := range []struct {
		b    Budget
		want string
	}{{weekly, "2026-W36"}, {monthly, "2026-09"}, {daily, "2026-08-31"}} {
		if got := c.b.PeriodOf(ts); got != c.want {
			t.Errorf("%s: PeriodOf(%s) = %s, want %s", c.b.Name, ts, got, c.want)
		}
	}
	if got := weekly.AlertBasisPoints(); !slices.Equal(got, []int{5000, 8000}) {
		t.Errorf("alerts in basis points %v", got)
	}

	// max_cost is pinned with the plan; a plan pinned before it existed
	// takes the file's.
	pinned, err := p.WithPlan(p.Plan())
	if err != nil {
		t.Fatal(err)
	}
	video, _ := pinned.Step("video")
	if video.MaxCost == nil || *video.MaxCost != (allot.Money{Amount: 250, Currency: "USD"}) {
		t.Fatalf("the pinned plan lost max_cost: %+v", video.MaxCost)
	}
	old := video
	old.MaxCost = nil
	if got := set.MaxCostOf(p.Name, old); got == nil || got.Amount != 250 {
		t.Errorf("MaxCostOf a plan without max_cost = %v, want the file's", got)
	}
	if got := set.MaxCostOf("gone", old); got != nil {
		t.Errorf("MaxCostOf a pipeline the file lost = %v", got)
	}
}

func TestBudgetRefusals(t *testing.T) {
	const pipelines = `
[[vendor]]
name        = "videogen"
url         = "http://127.0.0.1:8787"
api_key_env = "VIDEOGEN_API_KEY"
[[pipeline]]
name = "weekly-video"
  [[pipeline.step]]
  name     = "video"
  kind     = "paid"
  vendor   = "videogen"
  max_cost = { amount = 250, currency = "USD" }
`
	budget := func(fields string) string {
		return pipelines + "\n[[budget]]\n" + fields + "\n"
	}
	const ok = `name = "b"
pipeline = "weekly-video"
period = "iso-week"
limit = { amount = 1000, currency = "USD" }`
	if _, err := Parse([]byte(budget(ok)), "test"); err != nil {
		t.Fatalf("the base budget is refused: %v", err)
	}
	for _, c := range []struct{ name, file, want string }{
		{"bad name", budget(strings.Replace(ok, `"b"`, `"B x"`, 1)), "budget name"},
		{"no scope", budget(strings.Replace(ok, `pipeline = "weekly-video"`, ``, 1)), "no scope"},
		{"unknown pipeline", budget(strings.Replace(ok, `"weekly-video"`, `"nope"`, 1)), `pipeline "nope"`},
		{"unknown vendor", budget(ok + "\nvendor = \"nope\""), `vendor "nope"`},
		{"no period", budget(strings.Replace(ok, `period = "iso-week"`, ``, 1)), "no period"},
		{"bad period", budget(strings.Replace(ok, `"iso-week"`, `"year"`, 1)), `period "year"`},
		{"bad zone", budget(ok + "\ntime_zone = \"Mars/Olympus\""), "time_zone"},
		{"host zone", budget(ok + "\ntime_zone = \"Local\""), "time_zone"},
		{"zero limit", budget(strings.Replace(ok, "1000", "0", 1)), "amount 0"},
		{"negative limit", budget(strings.Replace(ok, "1000", "-5", 1)), "amount -5"},
		{"huge limit", budget(strings.Replace(ok, "1000", "1000000000000000001", 1)), "amount 1000000000000000001"},
		{"huge max_cost", strings.Replace(pipelines, "amount = 250", "amount = 1000000000001", 1), "amount 1000000000001"},
		{"currency case", budget(strings.Replace(ok, `"USD"`, `"usd"`, 1)), `currency "usd"`},
		{"currency length", budget(strings.Replace(ok, `"USD"`, `"US"`, 1)), `currency "US"`},
		{"alert zero", budget(ok + "\nalerts = [0.0]"), "alert 0"},
		{"alert one", budget(ok + "\nalerts = [1.0]"), "alert 1"},
		{"alert order", budget(ok + "\nalerts = [0.8, 0.5]"), "ascending"},
		{"alert repeat", budget(ok + "\nalerts = [0.5, 0.5]"), "ascending"},
		{"alert too fine", budget(ok + "\nalerts = [0.123456]"), "hundredth"},
		{"twice", budget(ok) + "\n[[budget]]\n" + ok, "defined twice"},
		{"other currency", budget(strings.Replace(ok, `"USD"`, `"EUR"`, 1)), "never converted"},
		{"unknown key", budget(ok + "\nlimit_amount = 5"), "unknown key budget.limit_amount"},
		{"no price", strings.Replace(budget(ok), `max_cost = { amount = 250, currency = "USD" }`, ``, 1), "declares no price"},
		{"max_cost on exec", pipelines + `
  [[pipeline.step]]
  name = "x"
  kind = "exec"
  command = ["true"]
  max_cost = { amount = 1, currency = "USD" }`, "takes no max_cost"},
		{"max_cost zero", strings.Replace(pipelines, "250", "0", 1), "amount 0"},
		{"max_cost currency", strings.Replace(pipelines, `"USD"`, `"dollars"`, 1), `currency "dollars"`},
		{"max_cost not ISO 4217", strings.Replace(pipelines, `"USD"`, `"XYZ"`, 1), `currency "XYZ" is not an ISO 4217 code`},
		{"limit not ISO 4217", budget(strings.Replace(ok, `"USD"`, `"XYZ"`, 1)), `currency "XYZ" is not an ISO 4217 code`},
		// XAU is an ISO 4217 code, gold's: the refusal says why it is not
		// taken (issue 38 §4).
		{"no minor unit", budget(strings.Replace(ok, `"USD"`, `"XAU"`, 1)), `currency "XAU" is ISO 4217's code for gold (one troy ounce), which has no minor unit: allot keeps money as a whole number of a currency's minor units`},
		// A covered max_cost above the budget's limit could never be
		// admitted: its episodes would park for ever.
		{"max_cost above limit", budget(strings.Replace(ok, "amount = 1000", "amount = 249", 1)),
			`step "video" has max_cost 2.50 USD, above the limit of 2.49 USD of budget "b" that covers it`},
	} {
		_, err := Parse([]byte(c.file), "test")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %q", c.name, err, c.want)
		}
	}
}

func TestBudgetCheckPeriod(t *testing.T) {
	for _, c := range []struct {
		kind   PeriodKind
		period string
		ok     bool
	}{
		{Day, "2026-08-07", true}, {Day, "2026-02-30", false}, {Day, "2026-W32", false}, {Day, "2026-8-7", false},
		{ISOWeek, "2026-W32", true}, {ISOWeek, "2026-W53", true}, {ISOWeek, "2027-W53", false}, {ISOWeek, "2026-W00", false}, {ISOWeek, "2026-W5", false}, {ISOWeek, "2026-08", false},
		{Month, "2026-08", true}, {Month, "2026-13", false}, {Month, "2026-08-01", false},
	} {
		err := Budget{Name: "b", Period: c.kind}.CheckPeriod(c.period)
		if (err == nil) != c.ok {
			t.Errorf("%s period %q: %v, want ok %v", c.kind, c.period, err, c.ok)
		}
	}
}

// TestMaxCostWithinEveryCoveringBudget: a max_cost equal to the limit is
// admitted by an empty period; one minor unit more never is.
func TestMaxCostWithinEveryCoveringBudget(t *testing.T) {
	// video (2.50) and publish (0.05): an episode's max_costs, 2.55.
	file := strings.Replace(budgetFile, "limit    = { amount = 500,", "limit    = { amount = 255,", 1)
	if _, err := Parse([]byte(file), "test"); err != nil {
		t.Fatalf("an episode's max_costs equal to the limit are refused: %v", err)
	}
	file = strings.Replace(budgetFile, "limit    = { amount = 500,", "limit    = { amount = 249,", 1)
	_, err := Parse([]byte(file), "test")
	for _, want := range []string{`pipeline "weekly-video"`, `step "video"`, "2.50 USD", `budget "weekly-at-videogen"`, "2.49 USD", "lower the step's max_cost", "raise budget"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("max_cost above a covering limit: got %v, want an error naming %q", err, want)
		}
	}
}

// An episode's covered steps are reserved together: a budget whose limit is
// below their max_costs added could admit no episode, and the file is
// refused.
func TestEveryCoveredStepOfAnEpisodeFitsTogether(t *testing.T) {
	const file = `
[[budget]]
name     = "media-weekly"
pipeline = "media"
period   = "iso-week"
limit    = { amount = LIMIT, currency = "USD" }

[[pipeline]]
name = "media"
  [[pipeline.step]]
  name     = "video"
  kind     = "paid"
  max_cost = { amount = 250, currency = "USD" }
  [[pipeline.step]]
  name     = "cover"
  kind     = "paid"
  max_cost = { amount = 100, currency = "USD" }
`
	if _, err := Parse([]byte(strings.Replace(file, "LIMIT", "350", 1)), "test"); err != nil {
		t.Fatalf("a limit that fits one whole episode is refused: %v", err)
	}
	_, err := Parse([]byte(strings.Replace(file, "LIMIT", "349", 1)), "test")
	for _, want := range []string{`pipeline "media"`, "video, cover", "3.50 USD", "3.49 USD", `budget "media-weekly"`, "at least 3.50 USD"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("an episode above its budget: got %v, want an error naming %q", err, want)
		}
	}
}

// A budget period's bounds are its zone's midnights: every instant of the
// period falls in it, the end is the next period's start, and a period
// across a DST change or a year's 53rd ISO week counts right.
func TestBudgetPeriodBounds(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for _, c := range []struct {
		kind       PeriodKind
		period     string
		start, end time.Time
	}{
		{Day, "2026-03-29", time.Date(2026, 3, 29, 0, 0, 0, 0, berlin), time.Date(2026, 3, 30, 0, 0, 0, 0, berlin)},
		{ISOWeek, "2026-W53", time.Date(2026, 12, 28, 0, 0, 0, 0, berlin), time.Date(2027, 1, 4, 0, 0, 0, 0, berlin)},
		{Month, "2026-10", time.Date(2026, 10, 1, 0, 0, 0, 0, berlin), time.Date(2026, 11, 1, 0, 0, 0, 0, berlin)},
		{Month, "2026-12", time.Date(2026, 12, 1, 0, 0, 0, 0, berlin), time.Date(2027, 1, 1, 0, 0, 0, 0, berlin)},
	} {
		b := Budget{Name: "b", Period: c.kind, location: berlin}
		start, end, err := b.PeriodBounds(c.period)
		if err != nil || !start.Equal(c.start) || !end.Equal(c.end) {
			t.Fatalf("%s %s: [%s, %s), %v; want [%s, %s)", c.kind, c.period, start, end, err, c.start, c.end)
		}
		if b.PeriodOf(start) != c.period || b.PeriodOf(end.Add(-time.Nanosecond)) != c.period || b.PeriodOf(end) == c.period {
			t.Fatalf("%s %s: the bounds are not the period's", c.kind, c.period)
		}
	}
	if _, _, err := (Budget{Name: "b", Period: Month}).PeriodBounds("2026-W32"); err == nil {
		t.Fatal("a week's name as a month's period")
	}
}
