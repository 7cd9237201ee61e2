package app_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"allot/app"
	"allot/internal/ledgertest"
	"allot/internal/metrics"
	"allot/pipeline"
)

const budgetGaugePipelines = `
[[pipeline]]
name = "weekly"
  [[pipeline.step]]
  name = "plan"
  kind = "local"

[[budget]]
name      = "video-weekly"
pipeline  = "weekly"
period    = "iso-week"
time_zone = "UTC"
limit     = { amount = 75000, currency = "USD" }
`

// The worker exports a budget's current period and the one before it; only
// the current one is marked current, so AllotBudgetExhausted stops once a
// spent period is over (deploy/prometheus/allot-alerts.yml).
func TestLedgerGaugesExportTheBudgetPeriods(t *testing.T) {
	set, err := pipeline.Parse([]byte(budgetGaugePipelines), "budget gauges")
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(app.LedgerGauges(ledgertest.New(t).Led, set), nil)
	defer m.Close()
	// A scrape across the turn of a week sees two current periods: read
	// the clock on both sides and scrape again if it moved.
	var body, current string
	for {
		current = set.Budgets()[0].PeriodOf(time.Now())
		rec := httptest.NewRecorder()
		m.HTTPHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 {
			t.Fatalf("scrape: %d %s", rec.Code, rec.Body.String())
		}
		body = rec.Body.String()
		if set.Budgets()[0].PeriodOf(time.Now()) == current {
			break
		}
	}
	var ones, zeros []string
	for line := range strings.Lines(body) {
		if !strings.HasPrefix(line, "allot_budget_period_current{") {
			continue
		}
		switch {
		case strings.HasSuffix(line, "} 1\n"):
			ones = append(ones, line)
		case strings.HasSuffix(line, "} 0\n"):
			zeros = append(zeros, line)
		}
	}
	want := `allot_budget_period_current{budget="video-weekly",currency="USD",period="` + current + `"} 1` + "\n"
	if len(ones) != 1 || ones[0] != want {
		t.Errorf("periods marked current: %q, want only %q:\n%s", ones, want, body)
	}
	if len(zeros) != 1 {
		t.Errorf("periods marked not current: %q, want the week before %s:\n%s", zeros, current, body)
	}
}
