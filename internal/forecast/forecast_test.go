package forecast

import (
	"context"
	"fmt"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/pipeline"
)

// weekly runs every day at 09:00 UTC; one episode reserves 500 USD cents
// (its two covered steps at 250) in the weekly budget.
const file = `
[[budget]]
name      = "weekly-usd"
pipeline  = "weekly"
period    = "iso-week"
time_zone = "UTC"
limit     = { amount = 3000, currency = "USD" }

[[budget]]
name      = "vendor-monthly"
vendor    = "default"
period    = "month"
time_zone = "UTC"
limit     = { amount = 100000, currency = "USD" }

[[budget]]
name      = "quoted-daily"
vendor    = "quoter"
period    = "day"
time_zone = "UTC"
limit     = { amount = 100000, currency = "USD" }

[[vendor]]
name       = "quoter"
adapter    = "activity"
task_queue = "quoter"
activities = { submit = "submit", lookup = "lookup", status = "status", fetch = "fetch", quote = "quote" }

[[pipeline]]
name   = "weekly"
period = "iso-week"
%s
  [pipeline.schedule]
  cron = "0 9 * * *"
  [[pipeline.step]]
  name     = "video"
  kind     = "paid"
  max_cost = { amount = 250, currency = "USD" }
  [[pipeline.step]]
  name     = "cover"
  kind     = "paid"
  max_cost = { amount = 250, currency = "USD" }

[[pipeline]]
name   = "daily"
period = "day"
  [pipeline.schedule]
  cron = "0 6 * * *"
  [[pipeline.step]]
  name   = "render"
  kind   = "paid"
  vendor = "quoter"
`

// monday is the start of 2026-W32.
var monday = time.Date(2026, 8, 3, 0, 0, 0, 0, time.UTC)

func setOf(t *testing.T, extra string) *pipeline.Set {
	t.Helper()
	set, err := pipeline.Parse([]byte(fmt.Sprintf(file, extra)), "test")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func weeklyOf(t *testing.T, in Input, now time.Time) Period {
	t.Helper()
	in.Now = now
	b, _ := in.Pipelines.Budget("weekly-usd")
	p, err := Of(context.Background(), in, b, b.PeriodOf(now))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// On a fresh pipeline at the start of a period, the forecast is the
// period's scheduled times x what one run reserves; later in the period,
// only the times still to come count.
func TestForecastIsTheScheduledTimesTimesOneRun(t *testing.T) {
	in := Input{Ledger: ledgertest.New(t).Led, Pipelines: setOf(t, "")}
	p := weeklyOf(t, in, monday)
	if p.Forecast != 7*500 || p.Upcoming != 7*500 || p.Settled != 0 || p.Reserved != 0 || len(p.Pipelines) != 1 {
		t.Fatalf("forecast at the start of the week = %+v; want 7 x 500", p)
	}
	if r := p.Pipelines[0]; r.Pipeline != "weekly" || r.Times != 7 || r.Runs != 7 || r.PerRun != 500 || r.Pending != 0 {
		t.Fatalf("weekly's share = %+v", r)
	}
	if !p.Over || p.Limit != 3000 {
		t.Fatalf("3500 forecast against a limit of 3000 is over: %+v", p)
	}
	// Thursday 10:00: Friday, Saturday and Sunday at 09:00 are left.
	if p := weeklyOf(t, in, monday.Add(3*24*time.Hour+10*time.Hour)); p.Forecast != 3*500 || p.Pipelines[0].Times != 3 || p.Over {
		t.Fatalf("forecast on Thursday 10:00 = %+v; want 3 x 500, not over", p)
	}
}

// The cap lets only so many runs start; episodes allocated without a
// reservation count as pending; a paused Schedule starts nothing and a
// pipeline without one starts nothing; a quote-priced step makes the
// forecast unbounded.
func TestForecastAppliesCapPauseAndPending(t *testing.T) {
	l := ledgertest.New(t)
	in := Input{Ledger: l.Led, Pipelines: setOf(t, "max_episodes_per_period = 3")}
	l.Allocate("weekly", monday.Add(time.Hour))
	l.Allocate("weekly", monday.Add(2*time.Hour))
	p := weeklyOf(t, in, monday.Add(3*time.Hour))
	if r := p.Pipelines[0]; r.Times != 7 || r.Runs != 1 || r.Pending != 2 || p.Upcoming != 3*500 {
		t.Fatalf("two episodes of a cap of 3 = %+v (%+v); want 1 run to come and 2 pending", r, p)
	}
	in.Schedule = func(context.Context, string) (Schedule, error) {
		return Schedule{Found: true, Paused: true}, nil
	}
	if p := weeklyOf(t, in, monday.Add(3*time.Hour)); !p.Pipelines[0].Paused || p.Pipelines[0].Runs != 0 || p.Upcoming != 2*500 {
		t.Fatalf("a paused schedule = %+v; want only the pending 2", p)
	}
	in.Schedule = func(context.Context, string) (Schedule, error) { return Schedule{}, nil }
	if p := weeklyOf(t, in, monday.Add(3*time.Hour)); !p.Pipelines[0].NoSchedule || p.Upcoming != 2*500 {
		t.Fatalf("no schedule = %+v", p)
	}
	// The vendor-wide budget covers weekly across August from Monday 3rd
	// 00:00: its cap of 3 per ISO week (2 held in W32).
	in.Schedule = nil
	b, _ := in.Pipelines.Budget("vendor-monthly")
	in.Now = monday
	vp, err := Of(context.Background(), in, b, "2026-08")
	if err != nil {
		t.Fatal(err)
	}
	if len(vp.Pipelines) != 1 || vp.Unbounded {
		t.Fatalf("vendor budget = %+v; want weekly only, bounded", vp)
	}
	if w := vp.Pipelines[0]; w.Times != 29 || w.Runs != 1+3+3+3+1 {
		t.Fatalf("weekly in August = %+v; want 29 times, runs capped per week (W32: 1, W33-35: 3, W36 has Monday the 31st: 1)", w)
	}
	// daily's render is priced by its vendor's quote only: unbounded.
	b, _ = in.Pipelines.Budget("quoted-daily")
	qp, err := Of(context.Background(), in, b, "2026-08-03")
	if err != nil {
		t.Fatal(err)
	}
	if !qp.Unbounded || len(qp.Pipelines) != 1 || qp.Pipelines[0].Quoted[0] != "render" || qp.Pipelines[0].Times != 1 {
		t.Fatalf("quoted budget = %+v; want daily, unbounded by render", qp)
	}
}

// When nothing changes, the forecast made at the start of the period is
// what the period settles: as the runs come, are reserved and are
// charged, every forecast made on the way is the same.
func TestForecastHoldsAsThePeriodRuns(t *testing.T) {
	l := ledgertest.New(t)
	in := Input{Ledger: l.Led, Pipelines: setOf(t, "")}
	start := weeklyOf(t, in, monday)
	ctx := context.Background()
	for day := range 7 {
		nominal := monday.Add(time.Duration(day)*24*time.Hour + 9*time.Hour)
		ep := l.Allocate("weekly", nominal)
		if p := weeklyOf(t, in, nominal.Add(time.Minute)); p.Forecast != start.Forecast {
			t.Fatalf("day %d, allocated: forecast %d (%+v); want %d", day, p.Forecast, p, start.Forecast)
		}
		for _, step := range []string{"video", "cover"} {
			ref := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: ep.ID, Step: step}
			if _, err := l.Led.WriteIntentReserving(ctx, ref, allot.IdempotencyKey("weekly", ep.ID, step, 0), "op-test", []allot.Reservation{
				{Budget: "weekly-usd", Period: "2026-W32", Currency: "USD", Limit: 1 << 40, Amount: 250},
				{Budget: "vendor-monthly", Period: "2026-08", Currency: "USD", Limit: 1 << 40, Amount: 250},
			}); err != nil {
				t.Fatal(err)
			}
		}
		if p := weeklyOf(t, in, nominal.Add(2*time.Minute)); p.Forecast != start.Forecast || p.Reserved == 0 {
			t.Fatalf("day %d, reserved: forecast %d (%+v); want %d", day, p.Forecast, p, start.Forecast)
		}
		for _, step := range []string{"video", "cover"} {
			if _, err := l.Led.RecordSubmission(ctx, ledger.Submission{PaidTaskRef: ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: ep.ID, Step: step},
				RemoteRef: fmt.Sprintf("vt_%d_%s", day, step), Amount: 250, Currency: "USD"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	end := weeklyOf(t, in, monday.Add(7*24*time.Hour-time.Second))
	if end.Settled != start.Forecast || end.Upcoming != 0 || end.Reserved != 0 {
		t.Fatalf("the period settled %d (%+v); the forecast at its start was %d", end.Settled, end, start.Forecast)
	}
}

// Budgets forecasts each budget's current period.
func TestBudgetsForecastsTheCurrentPeriods(t *testing.T) {
	in := Input{Ledger: ledgertest.New(t).Led, Pipelines: setOf(t, ""), Now: monday}
	ps, err := Budgets(context.Background(), in)
	if err != nil || len(ps) != 3 || ps[0].Period != "2026-W32" || ps[1].Period != "2026-08" || ps[2].Period != "2026-08-03" {
		t.Fatalf("Budgets = %+v, %v", ps, err)
	}
}

// The limit admits the runs to come in the order they come, each at what
// it reserves at most, while it fits in what is left; the rest would park
// until a raise: at the start of the week 6 of weekly's 7 runs fit in
// 3000 (7 x 500), and after two episodes reserved 1000 and are pending,
// the 2 pending and 2 more fit.
func TestForecastSplitsWhatTheLimitAdmits(t *testing.T) {
	l := ledgertest.New(t)
	in := Input{Ledger: l.Led, Pipelines: setOf(t, "")}
	p := weeklyOf(t, in, monday)
	if p.Admitted != 6 || p.AdmittedAmount != 3000 || p.Refused != 1 || p.RefusedAmount != 500 {
		t.Fatalf("7 runs of 500 against 3000 = %+v; want 6 admitted (3000) and 1 refused (500)", p)
	}
	if p.AdmittedAmount+p.RefusedAmount != p.Upcoming {
		t.Fatalf("admitted %d + refused %d is not upcoming %d", p.AdmittedAmount, p.RefusedAmount, p.Upcoming)
	}
	reserve := func(ep ledger.Episode, amount int64) {
		ref := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: ep.ID, Step: "video"}
		if _, err := l.Led.WriteIntentReserving(context.Background(), ref, allot.IdempotencyKey("weekly", ep.ID, "video", 0), "op-test", []allot.Reservation{
			{Budget: "weekly-usd", Period: "2026-W32", Currency: "USD", Limit: 1 << 40, Amount: amount},
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range []time.Duration{1, 2} {
		reserve(l.Allocate("weekly", monday.Add(h*time.Hour)), 500)
		l.Allocate("weekly", monday.Add(h*time.Hour+time.Minute))
	}
	p = weeklyOf(t, in, monday.Add(3*time.Hour))
	if p.Reserved != 1000 || p.Pipelines[0].Pending != 2 || p.Admitted != 4 || p.Refused != 5 || p.RefusedAmount != 2500 {
		t.Fatalf("1000 reserved, 2 pending and 7 times = %+v; want 4 admitted (2000 of room) and 5 refused", p)
	}
	// Over the limit already (reserved under a limit raised since, say):
	// nothing more fits.
	reserve(l.Allocate("weekly", monday.Add(4*time.Hour)), 2500)
	if p := weeklyOf(t, in, monday.Add(5*time.Hour)); p.Reserved != 3500 || p.Admitted != 0 || p.Refused != 2+7 {
		t.Fatalf("3500 reserved against 3000 = %+v; want the 2 pending and 7 times refused", p)
	}
}

// Runs of pipelines that share a budget are admitted in time order, each
// at its own price: the one that comes first takes the room.
func TestForecastAdmitsInTimeOrderAcrossPipelines(t *testing.T) {
	shared := func(bigCron string) *pipeline.Set {
		set, err := pipeline.Parse([]byte(`
[[budget]]
name      = "shared"
vendor    = "default"
period    = "day"
time_zone = "UTC"
limit     = { amount = 600, currency = "USD" }

[[pipeline]]
name   = "big"
period = "day"
  [pipeline.schedule]
  cron = "`+bigCron+`"
  [[pipeline.step]]
  name     = "render"
  kind     = "paid"
  max_cost = { amount = 500, currency = "USD" }

[[pipeline]]
name   = "small"
period = "day"
  [pipeline.schedule]
  cron = "0 8 * * *"
  [[pipeline.step]]
  name     = "render"
  kind     = "paid"
  max_cost = { amount = 200, currency = "USD" }
`), "test")
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	for _, tc := range []struct {
		bigCron           string
		admitted, refused int64
	}{
		{"0 9 * * *", 200, 500}, // small at 08:00 first: big no longer fits
		{"0 7 * * *", 500, 200}, // big at 07:00 first: small no longer fits
	} {
		in := Input{Ledger: ledgertest.New(t).Led, Pipelines: shared(tc.bigCron), Now: monday}
		b, _ := in.Pipelines.Budget("shared")
		p, err := Of(context.Background(), in, b, "2026-08-03")
		if err != nil {
			t.Fatal(err)
		}
		if p.Admitted != 1 || p.Refused != 1 || p.AdmittedAmount != tc.admitted || p.RefusedAmount != tc.refused {
			t.Errorf("big at %q: %+v; want %d admitted and %d refused", tc.bigCron, p, tc.admitted, tc.refused)
		}
	}
}
