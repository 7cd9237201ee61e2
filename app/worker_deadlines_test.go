package app_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/app"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/internal/metrics"
	"allot/pipeline"
)

const deadlineGaugePipelines = `
[[pipeline]]
name = "weekly"
deadline = "4d9h"
  [[pipeline.step]]
  name = "plan"
  kind = "local"

[[pipeline]]
name = "daily"
period = "day"
  [[pipeline.step]]
  name = "plan"
  kind = "local"
`

// The worker's deadline gauges read the ledger's records: a pipeline that
// declares a deadline shows 0 late before any record and 1 after its
// period is judged late; one without a deadline is not exported.
func TestLedgerGaugesExportTheDeadlineRecords(t *testing.T) {
	set, err := pipeline.Parse([]byte(deadlineGaugePipelines), "deadline gauges")
	if err != nil {
		t.Fatal(err)
	}
	l := ledgertest.New(t)
	m := metrics.New(app.LedgerGauges(l.Led, set), nil)
	defer m.Close()
	scrape := func() string {
		t.Helper()
		rec := httptest.NewRecorder()
		m.HTTPHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 {
			t.Fatalf("scrape: %d %s", rec.Code, rec.Body.String())
		}
		return rec.Body.String()
	}
	body := scrape()
	if !strings.Contains(body, `allot_deadline_late_open{pipeline="weekly"} 0`) || !strings.Contains(body, `allot_deadline_periods{kind="warning",pipeline="weekly"} 0`) ||
		strings.Contains(body, `allot_deadline_late_open{pipeline="daily"}`) {
		t.Fatalf("before any record, want weekly at 0 and no daily:\n%s", body)
	}
	if strings.Contains(body, "allot_deadline_on_time_ratio") {
		t.Fatalf("an on-time ratio before any period was judged:\n%s", body)
	}
	due := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	if _, _, _, err := l.Led.JudgePeriod(context.Background(), ledger.PeriodJudgement{Pipeline: "weekly", Period: "2026-W48", Kind: allot.DeadlineLate,
		DueAt: due, Needed: 1, Cause: allot.CauseNoRun, Command: allot.RunCommand("weekly", time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC)), At: due}); err != nil {
		t.Fatal(err)
	}
	body = scrape()
	for _, want := range []string{
		`allot_deadline_late_open{pipeline="weekly"} 1`,
		`allot_deadline_periods{kind="late",pipeline="weekly"} 1`,
		`allot_deadline_on_time_ratio{pipeline="weekly"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("after a late period, metrics lack %q:\n%s", want, body)
		}
	}
}
