package operator

// The parts of the operator commands that both the CLI and the operator
// page run (docs/design.md, "The operator page"): one code path, so the
// page refuses exactly what the CLI refuses, with the same message.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/catchup"
	"allot/internal/ledger"
	"allot/pipeline"
	"allot/workflows"
)

// ResolveChoice is how an operator resolves a parked paid task: exactly
// one of adopting a reference, resubmitting, retrying or abandoning.
type ResolveChoice struct {
	Adopt    string
	Resubmit bool
	Retry    bool
	Abandon  bool
}

// Apply sets the resolve of req (whose Step and Reason are the
// command's), or refuses a request that names no step, more or fewer than
// one choice, or an abandon without a reason (InvalidInput).
func (c ResolveChoice) Apply(req *workflows.DecisionRequest) error {
	if req.Step == "" {
		return allot.Errorf(allot.InvalidInput, "--step is required")
	}
	chosen := 0
	for _, b := range []bool{c.Adopt != "", c.Resubmit, c.Retry, c.Abandon} {
		if b {
			chosen++
		}
	}
	if chosen != 1 {
		return allot.Errorf(allot.InvalidInput, "give exactly one of --adopt REF, --resubmit, --retry or --abandon --reason TEXT")
	}
	switch {
	case c.Adopt != "":
		req.Resolve, req.RemoteRef = allot.ActionAdopt, c.Adopt
	case c.Resubmit:
		req.Resolve = allot.ActionResubmit
	case c.Retry:
		req.Resolve = allot.ActionRetry
	default:
		if strings.TrimSpace(req.Reason) == "" {
			return allot.Errorf(allot.InvalidInput, "--abandon needs --reason TEXT")
		}
		req.Resolve = allot.ActionAbandon
	}
	return nil
}

// ParseLimit reads a new limit: a positive integer of minor units of the
// budget's currency. Major units ("12.50", "12.50 USD") are refused with
// the conversion, so that no amount is guessed (docs/budgets.md). An
// unknown budget reads as 0, for RaiseBudget to name.
func ParseLimit(set *pipeline.Set, budgetName, v string) (int64, error) {
	currency := ""
	for _, b := range set.Budgets() {
		if b.Name == budgetName {
			currency = b.Limit.Currency
		}
	}
	if currency == "" {
		return 0, nil
	}
	bad := func(format string, args ...any) error {
		return allot.Errorf(allot.InvalidInput, format, args...)
	}
	money := func(minor int64) allot.Money { return allot.Money{Amount: minor, Currency: currency} }
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err == nil {
		if n <= 0 {
			return 0, bad("--limit %s must be positive: give the new limit in minor units of %s, e.g. --limit %d for %s", v, currency, 100000, money(100000))
		}
		return n, nil
	}
	amount, cur, _ := strings.Cut(strings.TrimSpace(v), " ")
	if cur = strings.TrimSpace(cur); cur != "" && cur != currency {
		return 0, bad("--limit %q: budget %s is in %s, not %s, and --limit takes minor units of %s (an integer)", v, budgetName, currency, cur, currency)
	}
	if minor, ok := minorUnits(amount, allot.CurrencyDigits(currency)); ok {
		return 0, bad("--limit takes minor units of %s: %s is --limit %d", currency, money(minor), minor)
	}
	return 0, bad("--limit %q is not an amount: give an integer of minor units of %s, e.g. --limit 1250 for %s", v, currency, money(1250))
}

// ParseLimitAmount reads a new limit for a budget as a person types it
// into a form: an amount in the budget's currency, in major units
// ("150", "150.00", "1,500.00", with or without the currency's code).
// It is ParseLimit for the page, whose errors speak of the form, not of
// CLI flags; an unknown budget is 0 for RaiseBudget to refuse by name.
func ParseLimitAmount(set *pipeline.Set, budgetName, v string) (int64, error) {
	b, ok := set.Budget(budgetName)
	if !ok {
		return 0, nil
	}
	currency := b.Limit.Currency
	digits := allot.CurrencyDigits(currency)
	example := allot.Money{Amount: 15000, Currency: currency}
	if digits == 0 {
		example.Amount = 150
	}
	amount, code, _ := strings.Cut(strings.TrimSpace(v), " ")
	if code = strings.TrimSpace(code); code != "" && !strings.EqualFold(code, currency) {
		return 0, allot.Errorf(allot.InvalidInput, "the new limit %q is in %s, but budget %s is in %s: type an amount in %s, such as %s", v, code, budgetName, currency, currency, example)
	}
	whole, _, _ := strings.Cut(amount, ".")
	minor, ok := minorUnits(strings.ReplaceAll(amount, ",", ""), digits)
	if !ok || !thousandsGrouped(whole) {
		return 0, allot.Errorf(allot.InvalidInput, "the new limit %q is not an amount in %s: type a positive amount with at most %d decimals, such as %s", v, currency, digits, example)
	}
	return minor, nil
}

// thousandsGrouped reports whether the commas of a whole number, if any,
// group its digits by thousands ("1,500,000"), as Money prints them.
func thousandsGrouped(whole string) bool {
	groups := strings.Split(whole, ",")
	for i, g := range groups {
		if g == "" || len(g) > 3 || (i > 0 && len(g) != 3) {
			return false
		}
	}
	return true
}

// minorUnits converts a decimal amount in major units ("12.5") to minor
// units exactly, or reports false (more decimals than the currency has,
// not a number, out of range).
func minorUnits(amount string, digits int) (int64, bool) {
	whole, frac, _ := strings.Cut(amount, ".")
	if whole == "" || len(frac) > digits || strings.HasPrefix(whole, "-") || strings.HasPrefix(whole, "+") {
		return 0, false
	}
	frac += strings.Repeat("0", digits-len(frac))
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	return n, err == nil && n > 0
}

// NudgeParked signals the episodes parked on a raised period to ask their
// budgets at once; one that cannot be reached (or no client) asks on its
// own timer, and is said NotNudged.
func NudgeParked(ctx context.Context, cl client.Client, res *RaiseResult) {
	for _, id := range res.Nudge {
		if cl == nil || cl.SignalWorkflow(ctx, id, "", workflows.BudgetRaisedSignal, nil) != nil {
			res.NotNudged = append(res.NotNudged, id)
			continue
		}
		res.Nudged = append(res.Nudged, id)
	}
}

// CatchUpAfterUnpause settles the times a schedule skipped while paused,
// under its catch_up policy, on led opened to write. The schedule stays
// unpaused whatever happens here; the error says how to settle them later.
func CatchUpAfterUnpause(ctx context.Context, s *Schedules, led *ledger.Ledger, pipelineName string) (catchup.SweepResult, error) {
	// Every time up to now: a time the Schedule starts from now on has
	// its workflow, and a missed one within its grace runs.
	pausedUntil := s.clock()
	sw := &catchup.Sweeper{Client: s.Client, Pipelines: s.Pipelines, Ledger: led, TaskQueue: s.TaskQueue, LedgerID: s.LedgerID}
	res, err := sw.Sweep(ctx, catchup.SweepInput{Pipeline: pipelineName, Until: pausedUntil})
	if err != nil {
		return res, fmt.Errorf("the schedule of %s is unpaused, but the times it missed while paused are not settled yet: %w; settle them with `%s`",
			pipelineName, err, allot.CatchUpCommand(pipelineName, pausedUntil.Truncate(time.Second)))
	}
	return res, nil
}
