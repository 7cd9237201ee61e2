package metrics

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

// Each budget period's forecast is exported with its currency, and says
// when a quote-priced step leaves it unbounded and how many runs to come
// its limit would refuse; a forecast that cannot be
// made fails the scrape rather than reading as 0.
func TestForecastGauges(t *testing.T) {
	m := New(Gauges{Forecasts: func(context.Context) ([]Forecast, error) {
		return []Forecast{
			{Budget: "video-weekly", Period: "2026-W32", Currency: "USD", Forecast: 3500, RefusedRuns: 1},
			{Budget: "quoted-daily", Period: "2026-08-03", Currency: "EUR", Forecast: 0, Unbounded: true},
		}, nil
	}}, nil)
	defer m.Close()
	body := scrape(t, m)
	for _, want := range []string{
		`allot_budget_forecast_minor_units{budget="video-weekly",currency="USD",period="2026-W32"} 3500`,
		`allot_budget_forecast_unbounded{budget="video-weekly",period="2026-W32"} 0`,
		`allot_budget_forecast_refused_runs{budget="video-weekly",period="2026-W32"} 1`,
		`allot_budget_forecast_refused_runs{budget="quoted-daily",period="2026-08-03"} 0`,
		`allot_budget_forecast_minor_units{budget="quoted-daily",currency="EUR",period="2026-08-03"} 0`,
		`allot_budget_forecast_unbounded{budget="quoted-daily",period="2026-08-03"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, grep(body, "allot_budget_forecast"))
		}
	}
	failing := New(Gauges{Forecasts: func(context.Context) ([]Forecast, error) { return nil, errors.New("schedule unreadable") }}, nil)
	defer failing.Close()
	rec := httptest.NewRecorder()
	failing.HTTPHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "schedule unreadable") {
		t.Fatalf("scrape with a failing forecast: %d %s", rec.Code, rec.Body.String())
	}
}
