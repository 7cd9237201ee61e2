package operator

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/internal/pipelinetest"
	"allot/pipeline"
)

func isType(err error, errType string) bool {
	return allot.ErrorType(err) == errType
}

// A raise is refused at once, writing nothing, for anything malformed
// (free text over allot.MaxTextLen included); a valid one changes only its
// period, records who and why once per request, and names the parked
// episodes to nudge. Without --by, who is allot.Actor's ($USER here).
func TestRaiseBudgetChangesOnePeriodAndNamesTheParked(t *testing.T) {
	l, eps := budgetLedger(t)
	set := ledgertest.BudgetPipelines(t)
	ctx := context.Background()
	t.Setenv("USER", "maria")
	ok := RaiseInput{Pipelines: set, Budget: "video-weekly", Period: "2026-W32", Limit: 1000, Reason: "launch", RequestID: "req-1"}
	for name, in := range map[string]RaiseInput{
		"unknown budget":  func() RaiseInput { r := ok; r.Budget = "nope"; return r }(),
		"period of kind":  func() RaiseInput { r := ok; r.Period = "2026-08-03"; return r }(),
		"zero limit":      func() RaiseInput { r := ok; r.Limit = 0; return r }(),
		"huge limit":      func() RaiseInput { r := ok; r.Limit = allot.MaxBudgetLimit + 1; return r }(),
		"no reason":       func() RaiseInput { r := ok; r.Reason = " "; return r }(),
		"long reason":     func() RaiseInput { r := ok; r.Reason = strings.Repeat("r", allot.MaxTextLen+1); return r }(),
		"control in by":   func() RaiseInput { r := ok; r.By = "maria\x1b[2J"; return r }(),
		"below the spend": func() RaiseInput { r := ok; r.Limit = 600; return r }(),
	} {
		if _, err := RaiseBudget(ctx, l.led, in); !isType(err, allot.InvalidInput) {
			t.Errorf("%s: %v, want InvalidInput", name, err)
		}
	}
	if raises, _ := l.led.BudgetRaises(ctx, "video-weekly", ""); len(raises) != 0 {
		t.Fatalf("refused raises recorded %+v", raises)
	}
	res, err := RaiseBudget(ctx, l.led, ok)
	if err != nil || !res.Applied || res.Period.Limit != 1000 || res.Period.Free != 300 || !res.Period.Raised || res.Raise.By != "maria" {
		t.Fatalf("raise: %+v, %v", res, err)
	}
	if want := []string{allot.EpisodeWorkflowID("weekly", eps[3].ID)}; !slices.Equal(res.Nudge, want) {
		t.Fatalf("nudge %v, want %v", res.Nudge, want)
	}
	again, err := RaiseBudget(ctx, l.led, ok)
	if err != nil || again.Applied {
		t.Fatalf("the same request again: %+v, %v", again, err)
	}
	for period, limit := range map[string]int64{"2026-W32": 1000, "2026-W33": 750, "2026-W31": 750} {
		bp, err := l.led.BudgetPeriodOf(ctx, ledger.BudgetLimit{Budget: "video-weekly", Currency: "USD", Limit: 750}, period)
		if err != nil || bp.Limit != limit {
			t.Errorf("%s after raising 2026-W32: %+v, %v", period, bp, err)
		}
	}
}

// Consent counted in money: runs per budget period times what one reserves
// against what is free; a quoted step is flagged, not guessed.
func TestForecastBudgets(t *testing.T) {
	l, _ := budgetLedger(t)
	set := ledgertest.BudgetPipelines(t)
	nominals := []time.Time{mon.Add(5 * time.Hour), nextMon, nextMon.Add(time.Hour)}
	fs, err := ForecastBudgets(context.Background(), l.led, set, "weekly", nominals)
	if err != nil {
		t.Fatal(err)
	}
	want := []BudgetForecast{
		{Budget: "video-weekly", Period: "2026-W32", Currency: "USD", Runs: 1, PerRun: 250, Forecast: 250, Free: 50, FreeKnown: true, Over: true, Quoted: true, QuotedSteps: []string{"cover"}},
		{Budget: "video-weekly", Period: "2026-W33", Currency: "USD", Runs: 2, PerRun: 250, Forecast: 500, Free: 750, FreeKnown: true, Quoted: true, QuotedSteps: []string{"cover"}},
		{Budget: "default-monthly", Period: "2026-08", Currency: "USD", Runs: 3, PerRun: 250, Forecast: 750, Free: 100000 - 700, FreeKnown: true},
	}
	if !reflect.DeepEqual(fs, want) {
		t.Fatalf("forecast\n%+v\nwant\n%+v", fs, want)
	}
	// Over what is free, or unknown (the quoted cover step): both need
	// consent.
	over := OverBudget(fs)
	if len(over) != 2 || !strings.Contains(over[0].String(), "OVER by 2.00 USD") || !strings.Contains(over[1].String(), "UNKNOWN: step cover has no max_cost") {
		t.Fatalf("over %+v", over)
	}
	// Without a ledger: the limits.
	fs, err = ForecastBudgets(context.Background(), nil, set, "weekly", nominals[:1])
	if err != nil || len(fs) != 2 || fs[0].Free != 750 || fs[0].FreeKnown || fs[0].Over {
		t.Fatalf("without a ledger: %+v, %v", fs, err)
	}
	// A pipeline no budget covers: nothing.
	if fs, err := ForecastBudgets(context.Background(), l.led, set, "daily", nominals); err != nil || len(fs) != 0 {
		t.Fatalf("daily: %+v, %v", fs, err)
	}
}

// stats and costs show the spend against each budget of the pipeline;
// check reports an open intent that holds no reservation in a budget that
// covers it, and a period settled above its limit.

// Defect (issue 25): `resolve --retry` of a step parked BudgetExhausted,
// the budget still short, answered with a passing stage (waiting_vendor).
// The answer is the ledger's: the budget that still refuses, what it has,
// and the raise that admits the step; none once it is raised.
func TestRetryOfABudgetParkedStepSaysWhichBudgetStillRefuses(t *testing.T) {
	l, eps := budgetLedger(t)
	set := ledgertest.BudgetPipelines(t)
	ctx := context.Background()
	cmds := &EpisodeCommands{Client: idleClient(t), Pipelines: set, TaskQueue: "allot", Ledger: l.led}
	refused := []ledger.BudgetShortfall{{Budget: "video-weekly", Period: "2026-W32", Currency: "USD", Limit: 750, Settled: 200, Reserved: 500, Asked: 250}}
	short, raises, err := cmds.budgetAnswer(ctx, "weekly", eps[3].ID, "video", refused)
	if err != nil || len(short) != 1 || short[0].Budget != "video-weekly" || short[0].Needed()-short[0].Limit != 200 {
		t.Fatalf("still short %+v, %v", short, err)
	}
	if len(raises) != 1 || !strings.HasPrefix(raises[0], "starter budget raise video-weekly --period 2026-W32 --limit 950 --reason ") {
		t.Fatalf("raises %q", raises)
	}
	t.Setenv("USER", "maria")
	if _, err := RaiseBudget(ctx, l.led, RaiseInput{Pipelines: set, Budget: "video-weekly", Period: "2026-W32", Limit: 950, Reason: "one more", RequestID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if short, raises, err := cmds.budgetAnswer(ctx, "weekly", eps[3].ID, "video", refused); err != nil || len(short)+len(raises) != 0 {
		t.Fatalf("after the raise: %+v %q, %v", short, raises, err)
	}
}

// The page's limit is typed in major units of the budget's currency, as
// Money prints it, and read exactly; anything else is refused with the
// form's words (no CLI flag), and a currency without minor units takes
// whole amounts only.
func TestParseLimitAmount(t *testing.T) {
	for _, cur := range []string{"USD", "JPY"} {
		set, err := pipeline.Parse([]byte(pipelinetest.Budgeted{Currency: cur, Limit: 1000, MaxCost: 250}.TOML()), "budgeted")
		if err != nil {
			t.Fatal(err)
		}
		cases := map[string]int64{"12.50": 1250, "12.5": 1250, "1,000.00": 100000, "1,234,567.89 USD": 123456789, " 15 ": 1500, "15 usd": 1500}
		bad := []string{"", "0", "0.00", "-5", "+5", "12.505", "1,5,00", "1,5000", ",100", "12.50 EUR", "twelve", "1e3", "99999999999999999999"}
		if cur == "JPY" {
			cases = map[string]int64{"150": 150, "1,500 JPY": 1500}
			bad = append(bad, "150.5", "150.00")
		}
		for typed, want := range cases {
			if got, err := ParseLimitAmount(set, "video-weekly", typed); err != nil || got != want {
				t.Errorf("%s: %q = %d, %v; want %d", cur, typed, got, err, want)
			}
		}
		for _, typed := range bad {
			_, err := ParseLimitAmount(set, "video-weekly", typed)
			if !isType(err, allot.InvalidInput) || strings.Contains(allot.ErrorMessage(err), "--limit") || !strings.Contains(allot.ErrorMessage(err), cur) {
				t.Errorf("%s: %q = %v; want an InvalidInput that names %s and no flag", cur, typed, err, cur)
			}
		}
	}
}
