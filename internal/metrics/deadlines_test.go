package metrics

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

// Every pipeline that declares a deadline exports every kind and its late
// periods, 0 when it has none (so that its first warning is an increase);
// the on-time ratio is on_time / (on_time + late), absent where nothing
// was judged; a pipeline only the ledger's records name still shows.
func TestDeadlineGauges(t *testing.T) {
	m := New(Gauges{Deadlines: func(context.Context) (Deadlines, error) {
		return Deadlines{
			Pipelines: []string{"weekly-video", "daily-report"},
			Periods: []DeadlinePeriods{
				{Pipeline: "weekly-video", Kind: "on_time", Count: 3},
				{Pipeline: "weekly-video", Kind: "late", Count: 1},
				{Pipeline: "weekly-video", Kind: "completed_late", Count: 1},
				{Pipeline: "weekly-video", Kind: "warning", Count: 2},
				{Pipeline: "retired", Kind: "late", Count: 1},
			},
			LateOpen: map[string]int{"retired": 1},
		}, nil
	}}, nil)
	defer m.Close()
	body := scrape(t, m)
	for _, want := range []string{
		`allot_deadline_periods{kind="on_time",pipeline="weekly-video"} 3`,
		`allot_deadline_periods{kind="late",pipeline="weekly-video"} 1`,
		`allot_deadline_periods{kind="completed_late",pipeline="weekly-video"} 1`,
		`allot_deadline_periods{kind="warning",pipeline="weekly-video"} 2`,
		`allot_deadline_periods{kind="warning",pipeline="daily-report"} 0`,
		`allot_deadline_periods{kind="late",pipeline="daily-report"} 0`,
		`allot_deadline_periods{kind="late",pipeline="retired"} 1`,
		`allot_deadline_late_open{pipeline="weekly-video"} 0`,
		`allot_deadline_late_open{pipeline="daily-report"} 0`,
		`allot_deadline_late_open{pipeline="retired"} 1`,
		`allot_deadline_on_time_ratio{pipeline="weekly-video"} 0.75`,
		`allot_deadline_on_time_ratio{pipeline="retired"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, grep(body, "allot_deadline"))
		}
	}
	if strings.Contains(body, `allot_deadline_on_time_ratio{pipeline="daily-report"}`) {
		t.Errorf("an on-time ratio for a pipeline with no judged period:\n%s", grep(body, "allot_deadline"))
	}
}

// A deadline reader that fails fails the scrape: "cannot read" must not
// look like "never late".
func TestDeadlineReadErrorFailsTheScrape(t *testing.T) {
	m := New(Gauges{Deadlines: func(context.Context) (Deadlines, error) { return Deadlines{}, errors.New("ledger is down") }}, nil)
	defer m.Close()
	rec := httptest.NewRecorder()
	m.HTTPHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "ledger is down") {
		t.Fatalf("scrape with a failing deadline reader: %d %s", rec.Code, rec.Body.String())
	}
}
