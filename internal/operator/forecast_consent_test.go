package operator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/pipeline"
)

// quotedSet: two pipelines whose only paid step is priced by its vendor's
// quote, one with a max_cost (the most a quote may be), one without; a
// budget with 1.00 USD covers both.
const quotedSet = `
[[vendor]]
name       = "quoter"
adapter    = "activity"
task_queue = "quoter"
  [vendor.activities]
  submit = "Submit"
  status = "Status"
  fetch  = "Fetch"
  quote  = "Quote"

[[budget]]
name   = "small"
vendor = "quoter"
period = "month"
limit  = { amount = 100, currency = "USD" }

[[pipeline]]
name = "capped"
period = "day"
  [[pipeline.step]]
  name     = "render"
  kind     = "paid"
  vendor   = "quoter"
  max_cost = { amount = 5, currency = "USD" }

[[pipeline]]
name = "quoted"
period = "day"
  [[pipeline.step]]
  name   = "render"
  kind   = "paid"
  vendor = "quoter"
`

// A backfill of 100 runs of a quote-priced step against 1.00 USD free asks
// consent: at its max_cost (100 x 0.05 USD is over), and without one
// (the price is unknown, never 0); --yes gives it (docs/design.md,
// "Backfills").
func TestBackfillForecastOfQuotedStepsAsksConsent(t *testing.T) {
	set, err := pipeline.Parse([]byte(quotedSet), "forecast_consent_test")
	if err != nil {
		t.Fatal(err)
	}
	s := &Schedules{Pipelines: set}
	from := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	var nominal []time.Time
	for i := range 100 {
		nominal = append(nominal, from.Add(time.Duration(i)*time.Hour))
	}
	for name, want := range map[string]string{
		"capped": "OVER by 4.00 USD",
		"quoted": "UNKNOWN: step render has no max_cost",
	} {
		p, err := set.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		fs, err := s.backfillForecast(context.Background(), name, nominal, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		pl := &backfillPlan{p: p, out: BackfillResult{From: from, To: from.Add(100 * time.Hour), Runs: 100, MaxRuns: 1000, First: nominal[0], Last: nominal[99], Budgets: fs}}
		err = pl.consent(BackfillInput{Pipeline: name})
		if !errors.Is(err, ErrBackfillNeedsConsent) || !isType(err, allot.ConsentRequired) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--yes") {
			t.Errorf("%s: consent %v; want it asked, with %q", name, err, want)
		}
		if err := pl.consent(BackfillInput{Pipeline: name, Yes: true}); err != nil {
			t.Errorf("%s with --yes: %v", name, err)
		}
	}
}
