// Package pipelinetest writes the pipeline files tests run on: the shapes
// several packages' tests share, each from a few options with sane
// defaults, so that their TOML is written once. It imports nothing of
// allot's, so any package's tests may use it (internal/allottest links the
// worker, which the activities' own tests cannot import).
package pipelinetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Budgeted is one pipeline under one budget: its first step is "video",
// paid, at most MaxCost; Then are the steps after it.
type Budgeted struct {
	Pipeline string    // "weekly"
	Budget   string    // "video-weekly"
	Period   string    // the budget's: "iso-week"
	Limit    int64     // the budget's, minor units: 1000
	Currency string    // of the limit and every max_cost: "USD"
	Alerts   []float64 // the budget's alert thresholds: none
	MaxCost  int64     // video's, minor units: 250
	// HoldScheduled is the budget's hold_scheduled: false.
	HoldScheduled bool
	// Cron is the pipeline's schedule: none.
	Cron string
	Then []Step
}

// Step is a step after a Budgeted pipeline's video.
type Step struct {
	Name    string
	Kind    string // "local", "paid", ...
	Action  string // a paid step's vendor action: the vendor's default
	MaxCost int64  // minor units; 0 none
}

// TOML is the pipeline file.
func (b Budgeted) TOML() string {
	b.Pipeline = or(b.Pipeline, "weekly")
	b.Budget = or(b.Budget, "video-weekly")
	b.Period = or(b.Period, "iso-week")
	b.Currency = or(b.Currency, "USD")
	if b.Limit == 0 {
		b.Limit = 1000
	}
	if b.MaxCost == 0 {
		b.MaxCost = 250
	}
	var s strings.Builder
	fmt.Fprintf(&s, "[[budget]]\nname     = %q\npipeline = %q\nperiod   = %q\nlimit    = %s\n", b.Budget, b.Pipeline, b.Period, money(b.Limit, b.Currency))
	if len(b.Alerts) > 0 {
		as := make([]string, len(b.Alerts))
		for i, a := range b.Alerts {
			as[i] = strconv.FormatFloat(a, 'g', -1, 64)
		}
		fmt.Fprintf(&s, "alerts   = [%s]\n", strings.Join(as, ", "))
	}
	if b.HoldScheduled {
		fmt.Fprintf(&s, "hold_scheduled = true\n")
	}
	fmt.Fprintf(&s, "\n[[pipeline]]\nname = %q\n", b.Pipeline)
	if b.Cron != "" {
		fmt.Fprintf(&s, "  [pipeline.schedule]\n  cron = %q\n", b.Cron)
	}
	steps := append([]Step{{Name: "video", Kind: "paid", MaxCost: b.MaxCost}}, b.Then...)
	for _, st := range steps {
		fmt.Fprintf(&s, "  [[pipeline.step]]\n  name     = %q\n  kind     = %q\n", st.Name, st.Kind)
		if st.Action != "" {
			fmt.Fprintf(&s, "  action   = %q\n", st.Action)
		}
		if st.MaxCost != 0 {
			fmt.Fprintf(&s, "  max_cost = %s\n", money(st.MaxCost, b.Currency))
		}
	}
	return s.String()
}

func money(amount int64, currency string) string {
	return fmt.Sprintf("{ amount = %d, currency = %q }", amount, currency)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Write writes a pipeline file to dir/pipelines.toml and returns its path,
// for ALLOT_PIPELINES or a Config's Pipelines.
func Write(t testing.TB, dir, toml string) string {
	t.Helper()
	path := filepath.Join(dir, "pipelines.toml")
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
