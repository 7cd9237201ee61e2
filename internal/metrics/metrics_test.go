package metrics

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.HTTPHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

// Every known pipeline is exported, 0 when it has nothing to count, and a
// pipeline only the ledger knows still shows; the names are the real ones.
func TestLedgerGaugesExportEveryPipelineByItsRealName(t *testing.T) {
	m := New(Gauges{
		Pipelines: []string{"daily-report", "weekly-video"},
		NeedingAttention: func(context.Context) (map[string]int, error) {
			return map[string]int{"weekly-video": 2, "retired-pipeline": 1}, nil
		},
		Stalled:             func(context.Context) (map[string]int, error) { return map[string]int{"daily-report": 3}, nil },
		WaitingPausedVendor: func(context.Context) (map[string]int, error) { return map[string]int{"weekly-video": 4}, nil },
	}, nil)
	defer m.Close()
	body := scrape(t, m)
	for _, want := range []string{
		`allot_episodes_needing_attention{pipeline="weekly-video"} 2`,
		`allot_episodes_needing_attention{pipeline="daily-report"} 0`,
		`allot_episodes_needing_attention{pipeline="retired-pipeline"} 1`,
		`allot_episodes_stalled{pipeline="daily-report"} 3`,
		`allot_episodes_stalled{pipeline="weekly-video"} 0`,
		`allot_episodes_waiting_paused_vendor{pipeline="weekly-video"} 4`,
		`allot_episodes_waiting_paused_vendor{pipeline="daily-report"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, grep(body, "allot_"))
		}
	}
}

// Budget gauges carry the budget's and the period's real names.
func TestBudgetGaugesCarryRealLabelValues(t *testing.T) {
	m := New(Gauges{Budgets: func(context.Context) ([]Budget, error) {
		return []Budget{{Budget: "video-weekly", Period: "2026-W32", Currency: "USD", Limit: 75000, Settled: 50000, Reserved: 250, HeldForSchedule: 20000, Free: 4750, Current: true},
			{Budget: "video-weekly", Period: "2026-W31", Currency: "USD", Limit: 75000, Settled: 75000}}, nil
	}}, nil)
	defer m.Close()
	body := scrape(t, m)
	for _, want := range []string{
		`allot_budget_limit_minor_units{budget="video-weekly",currency="USD",period="2026-W32"} 75000`,
		`allot_budget_settled_minor_units{budget="video-weekly",currency="USD",period="2026-W32"} 50000`,
		`allot_budget_reserved_minor_units{budget="video-weekly",currency="USD",period="2026-W32"} 250`,
		`allot_budget_held_for_schedule_minor_units{budget="video-weekly",currency="USD",period="2026-W32"} 20000`,
		`allot_budget_free_minor_units{budget="video-weekly",currency="USD",period="2026-W32"} 4750`,
		`allot_budget_period_current{budget="video-weekly",currency="USD",period="2026-W32"} 1`,
		`allot_budget_period_current{budget="video-weekly",currency="USD",period="2026-W31"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, grep(body, "allot_"))
		}
	}
}

func TestLedgerGaugeReadErrorFailsTheScrapeNotTheWorker(t *testing.T) {
	m := New(Gauges{Pipelines: []string{"weekly-video"}, Stalled: func(context.Context) (map[string]int, error) {
		return nil, errors.New("ledger is down")
	}}, nil)
	defer m.Close()
	rec := httptest.NewRecorder()
	m.HTTPHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "ledger is down") {
		t.Fatalf("scrape with a failing gauge: %d %s", rec.Code, rec.Body.String())
	}
}

// Counters emitted through the Temporal handler keep their label values:
// the SDK's Prometheus sanitizer used to turn "weekly-video" into
// "weekly_video".
func TestCounterLabelValuesAreTheRealNames(t *testing.T) {
	m := New(Gauges{}, nil)
	defer m.Close()
	m.Handler().WithTags(map[string]string{"pipeline": "weekly-video", "reason": "cap_reached"}).Counter("allot_runs").Inc(1)
	want := `allot_runs_total{pipeline="weekly-video",reason="cap_reached"} 1`
	deadline := time.Now().Add(10 * time.Second)
	for {
		body := scrape(t, m)
		if strings.Contains(body, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack %q:\n%s", want, grep(body, "allot_"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func grep(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
