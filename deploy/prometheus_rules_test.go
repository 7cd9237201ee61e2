package deploy

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"allot/activities"
	"allot/internal/metrics"
)

// The alert rules operators load into Prometheus (docs/operating.md, "Alert
// rules") and their promtool unit tests.
const (
	rulesDir      = "prometheus"
	rulesFile     = "allot-alerts.yml"
	rulesTestFile = "allot-alerts_test.yml"
)

// alertRules is the part of Prometheus's rule file format these rules use;
// KnownFields makes a misspelt key fail.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// ruleTests is the part of promtool's unit test format that says which
// alerts a case expects.
type ruleTests struct {
	Tests []struct {
		AlertRuleTest []struct {
			AlertName string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readAlertRules(t *testing.T) alertRules {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rulesDir, rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var rs alertRules
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&rs); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	if len(rs.Groups) != 1 || rs.Groups[0].Name != "allot" || len(rs.Groups[0].Rules) == 0 {
		t.Fatalf("%s: want one group \"allot\" with rules, got %+v", rulesFile, rs.Groups)
	}
	return rs
}

// promtool checks the rules and runs their unit tests. Without promtool the
// test skips, except in CI (.ci/run installs Debian's prometheus package).
func TestPrometheusRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("promtool not found in CI: apt-get install prometheus (Debian's package provides /usr/bin/promtool)")
		}
		t.Skip("promtool not found (apt-get install prometheus)")
	}
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, promtool, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every rule says how severe it is and what to run, and its unit tests have
// a case that fires it and one that keeps it quiet.
func TestEveryAlertRuleIsAnnotatedAndTestedBothWays(t *testing.T) {
	rs := readAlertRules(t)
	b, err := os.ReadFile(filepath.Join(rulesDir, rulesTestFile))
	if err != nil {
		t.Fatal(err)
	}
	var ts ruleTests
	if err := yaml.Unmarshal(b, &ts); err != nil {
		t.Fatalf("%s: %v", rulesTestFile, err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range ts.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	severities := map[string]bool{"page": true, "warning": true, "info": true}
	for _, r := range rs.Groups[0].Rules {
		if r.Alert == "" {
			t.Errorf("%s: rule %q is not an alert: this file holds alerting rules only", rulesFile, r.Expr)
			continue
		}
		if !severities[r.Labels["severity"]] {
			t.Errorf("%s: %s has severity %q: give it page, warning or info", rulesFile, r.Alert, r.Labels["severity"])
		}
		if r.Annotations["summary"] == "" || !strings.Contains(r.Annotations["description"], "`starter ") {
			t.Errorf("%s: %s needs a summary and a description that names the starter command to run", rulesFile, r.Alert)
		}
		if !fires[r.Alert] || !quiet[r.Alert] {
			t.Errorf("%s: %s has a case that fires it: %v, one that keeps it quiet: %v; add the missing one", rulesTestFile, r.Alert, fires[r.Alert], quiet[r.Alert])
		}
	}
}

// metricName finds the metric names in a PromQL expression: allot's, and
// the Temporal SDK's its workers export.
var metricName = regexp.MustCompile(`\b(allot|temporal)_[a-zA-Z0-9_]+`)

// A rule on a metric the worker does not export never fires: each name an
// expression uses must be in a scrape of the worker's registry, built with
// a row for every ledger gauge.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	rs := readAlertRules(t)
	read := time.Date(2026, 12, 3, 21, 0, 0, 0, time.UTC)
	m := metrics.New(metrics.Gauges{
		Pipelines:           []string{"weekly-video"},
		NeedingAttention:    func(context.Context) (map[string]int, error) { return map[string]int{"weekly-video": 1}, nil },
		WaitingPausedVendor: func(context.Context) (map[string]int, error) { return map[string]int{"weekly-video": 1}, nil },
		Stalled:             func(context.Context) (map[string]int, error) { return map[string]int{"weekly-video": 1}, nil },
		Budgets: func(context.Context) ([]metrics.Budget, error) {
			return []metrics.Budget{{Budget: "video-weekly", Period: "2026-W49", Currency: "USD", Limit: 75000, Settled: 100, Reserved: 10}}, nil
		},
		Vendors: func(context.Context) ([]metrics.VendorGauge, error) {
			return []metrics.VendorGauge{{Vendor: "video-gen", State: "paused"}}, nil
		},
		Drift: func(context.Context) ([]metrics.DriftGauge, error) {
			return []metrics.DriftGauge{{Vendor: "video-gen", Class: "refunded", Currency: "USD", Count: 1, Amount: 700}}, nil
		},
		Bills: func(context.Context) ([]metrics.BillGauge, error) {
			return []metrics.BillGauge{{Vendor: "video-gen", Reconciled: true, LastRead: read}}, nil
		},
		Deadlines: func(context.Context) (metrics.Deadlines, error) {
			return metrics.Deadlines{Pipelines: []string{"weekly-video"}, Periods: []metrics.DeadlinePeriods{{Pipeline: "weekly-video", Kind: "on_time", Count: 1}}}, nil
		},
		Forecasts: func(context.Context) ([]metrics.Forecast, error) {
			return []metrics.Forecast{{Budget: "video-weekly", Period: "2026-W49", Currency: "USD", Forecast: 80000}}, nil
		},
	}, nil)
	defer m.Close()
	// The counters the activities count through the Temporal metrics
	// handler, and the SDK's own poller gauge (internal/devstack's test
	// scrapes a running worker for it), as they would be after a while.
	m.Handler().WithTags(map[string]string{"budget": "video-weekly", "period": "2026-W49", "threshold": "0.8"}).Counter(activities.MetricBudgetAlerts).Inc(1)
	m.Handler().WithTags(map[string]string{"task_queue": "allot", "poller_type": "workflow_task"}).Gauge("temporal_num_pollers").Update(2)
	rec := httptest.NewRecorder()
	m.HTTPHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body.String())
	}
	exported := map[string]bool{}
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			exported[f[2]] = true
		}
	}
	for _, r := range rs.Groups[0].Rules {
		names := metricName.FindAllString(r.Expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: %s uses none of the worker's metrics: %s", rulesFile, r.Alert, r.Expr)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s: %s uses %s, which the worker does not export (see internal/metrics): fix the name", rulesFile, r.Alert, n)
			}
		}
	}
}
