package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"

	"allot"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/pipeline"
)

// budgetCommand dispatches `starter budget <subcommand>`: the money
// budgets of the pipeline file, their periods in the ledger, and their
// limits. set-limit sets a period's limit, higher or lower; raise is its
// older name, kept because remedies and scripts use it.
func budgetCommand(ctx context.Context, c *cli, args []string) error {
	return dispatch(ctx, c, "budget", budgetSubcommands, args)
}

// budgetSubcommands are `starter budget`'s subcommands.
var budgetSubcommands = map[string]subcommand{
	"list":        budgetList,
	"show":        budgetShow,
	"set-limit":   budgetSetLimit,
	"raise":       budgetSetLimit,
	"acknowledge": budgetAcknowledge,
}

// budgetPeriodsHeader heads printBudgetPeriods' columns. HELD is what a
// budget holds for its scheduled runs still due (hold_scheduled); FREE is
// what is left after it, for manual runs, backfills and retries.
const budgetPeriodsHeader = "BUDGET\tPERIOD\tLIMIT\tSETTLED\tRESERVED\tHELD\tFREE\tPARKED"

func printBudgetPeriods(w io.Writer, name string, ps []report.BudgetPeriodView) {
	for _, p := range ps {
		limit := money(p.Limit, p.Currency)
		if p.Raised {
			limit += " (raised)"
		}
		parked := "-"
		if len(p.Parked) > 0 {
			parked = strings.Join(p.Parked, ", ")
		}
		held := "-"
		if p.HeldRuns > 0 {
			held = fmt.Sprintf("%s (%d scheduled runs)", money(p.HeldForSchedule, p.Currency), p.HeldRuns)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, p.Period, limit, money(p.Settled, p.Currency), money(p.Reserved, p.Currency), held, money(p.Free, p.Currency), parked)
	}
}

func budgetList(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("budget list", false)
	var in report.BudgetsInput
	var err error
	if in.Budget, err = c.parseNamed(fs, args); err != nil {
		return err
	}
	return ledgerCommand(ctx, c, viewLedger, func(set *pipeline.Set, led *ledger.Ledger) (report.BudgetsResult, error) {
		in.Pipelines = set
		return report.Budgets(ctx, led, in)
	}, printBudgets)
}

func printBudgets(w io.Writer, res report.BudgetsResult) {
	if len(res.Budgets) == 0 {
		fmt.Fprintln(w, "no budgets: add [[budget]] tables to the pipeline file (docs/budgets.md)")
		return
	}
	fmt.Fprintln(w, budgetPeriodsHeader)
	for _, b := range res.Budgets {
		printBudgetPeriods(w, b.Name, b.Periods)
	}
}

func budgetShow(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("budget show", false)
	var in report.BudgetShowInput
	fs.StringVar(&in.Period, "period", "", "the budget's period: 2026-08-07, 2026-W32 or 2026-08 by its kind (required)")
	var err error
	if in.Budget, err = c.parseNamed(fs, args); err != nil {
		return err
	}
	if in.Budget == "" || in.Period == "" {
		return usageError{errors.New("name the budget and its period: starter budget show BUDGET --period P")}
	}
	return ledgerCommand(ctx, c, viewLedger, func(set *pipeline.Set, led *ledger.Ledger) (report.BudgetShowResult, error) {
		in.Pipelines = set
		return report.BudgetShow(ctx, led, in)
	}, printBudgetShow)
}

func printBudgetShow(w io.Writer, res report.BudgetShowResult) {
	fmt.Fprintln(w, budgetPeriodsHeader)
	printBudgetPeriods(w, res.Budget.Name, res.Budget.Periods)
	fmt.Fprintln(w, "\nTASK\tSTEP\tREVISION\tSTATE\tRESERVED\tSETTLED")
	for _, e := range res.Tasks {
		settled := "-"
		if e.State == ledger.EntrySettled {
			settled = money(e.Settled, e.Currency)
		}
		fmt.Fprintf(w, "%s/%s\t%s\t%d\t%s\t%s\t%s\n", e.Pipeline, e.EpisodeID, e.Step, e.Revision, e.State, money(e.Reserved, e.Currency), settled)
	}
	for _, r := range res.Raises {
		fmt.Fprintf(w, "raised\t%s by %s at %s: %s\n", money(r.Limit, r.Currency), r.By, r.At.Format("2006-01-02T15:04:05Z07:00"), r.Reason)
	}
	for _, p := range res.Budget.Periods {
		printOutside(w, res.Budget.Name, p)
	}
}

// printOutside writes the spend a period's records leave out, each charge
// and why it is outside: imported, acknowledged (by whom, why) or open,
// with the command that acknowledges the open ones.
func printOutside(w io.Writer, budget string, p report.BudgetPeriodView) {
	o := p.Outside
	if o == nil || len(o.Charges) == 0 {
		return
	}
	fmt.Fprintf(w, "\noutside its records\t%s charged to tasks it covers without an entry in it: %s imported, %s acknowledged, %s open\n",
		money(o.Amount, p.Currency), money(o.Imported, p.Currency), money(o.Acknowledged, p.Currency), money(o.Open, p.Currency))
	fmt.Fprintln(w, "TASK\tSTEP\tREVISION\tCHARGED\tWHY OUTSIDE")
	for _, c := range o.Charges {
		why := "open: sent without a reservation in it (before it covered the step, or without an admission)"
		switch {
		case c.Imported:
			why = "imported: charged before allot ran the episode"
		case c.Ack != nil:
			why = fmt.Sprintf("acknowledged by %s at %s: %s", c.Ack.By, c.Ack.At.Format("2006-01-02T15:04:05Z07:00"), c.Ack.Reason)
		}
		fmt.Fprintf(w, "%s/%s\t%s\t%d\t%s\t%s\n", c.Pipeline, c.EpisodeID, c.Step, c.Revision, money(c.Amount, c.Currency), why)
	}
	if o.OpenCount > 0 {
		fmt.Fprintf(w, "check flags the %d open charge(s) until someone who knows why acknowledges them: %s\n", o.OpenCount, allot.BudgetAcknowledgeCommand(budget, p.Period, "spent before the budget covered the step"))
	}
}

// budgetAcknowledge is `budget acknowledge`: a person says why a
// period's charges outside its records were spent (docs/design.md,
// "Budgets"), and check stops flagging them.
func budgetAcknowledge(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("budget acknowledge", true)
	var in operator.AcknowledgeInput
	fs.StringVar(&in.Period, "period", "", "the budget's period: 2026-08-07, 2026-W32 or 2026-08 by its kind (required)")
	fs.StringVar(&in.Reason, "reason", "", "why these charges were spent outside the budget's records (required); the ledger keeps it with who gave it")
	fs.StringVar(&in.By, "by", "", "who acknowledges them (default $USER, else the operating system's user name)")
	var err error
	if in.Budget, err = c.parseNamed(fs, args); err != nil {
		return err
	}
	if in.Budget == "" || in.Period == "" || in.Reason == "" {
		return usageError{errors.New("starter budget acknowledge BUDGET --period P --reason TEXT: the budget, --period and --reason are required")}
	}
	return ledgerCommand(ctx, c, writeLedger, func(set *pipeline.Set, led *ledger.Ledger) (operator.AcknowledgeResult, error) {
		in.Pipelines = set
		return operator.AcknowledgeOutside(ctx, led, in)
	}, printAcknowledged)
}

func printAcknowledged(w io.Writer, res operator.AcknowledgeResult) {
	for _, a := range res.Acknowledged {
		fmt.Fprintf(w, "acknowledged\t%s/%s step %s revision %d, %s, in budget %s period %s by %s: %s\n",
			a.Pipeline, a.EpisodeID, a.Step, a.Revision, money(a.Amount, a.Currency), res.Budget, res.Period, a.By, a.Reason)
	}
	o := res.Outside
	fmt.Fprintf(w, "budget %s period %s: %d charge(s) outside its records left open\n", res.Budget, res.Period, o.OpenCount)
}

// budgetSetLimit is `budget set-limit` (and its older name `budget
// raise`): one period's new limit, higher or lower, said truthfully.
func budgetSetLimit(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("budget set-limit", true)
	in := operator.RaiseInput{RequestID: uuid.NewString()}
	var limit string
	fs.StringVar(&in.Period, "period", "", "the one period to set: 2026-08-07, 2026-W32 or 2026-08 by the budget's kind (required); other periods keep their limits")
	fs.StringVar(&limit, "limit", "", "the period's new limit in minor units of the budget's currency, e.g. 100000 for 1000.00 USD (required); higher or lower, not below what the period has settled and reserved")
	fs.StringVar(&in.Reason, "reason", "", "why (required); the ledger keeps it with who set it")
	fs.StringVar(&in.By, "by", "", "who sets it (default $USER, else the operating system's user name)")
	fs.StringVar(&in.RequestID, "request-id", in.RequestID, "the request's idempotency key: the same request again records nothing more; the same key with other arguments is refused")
	var err error
	if in.Budget, err = c.parseNamed(fs, args); err != nil {
		return err
	}
	if in.Budget == "" || in.Period == "" || limit == "" || in.Reason == "" {
		return usageError{errors.New("starter budget set-limit BUDGET --period P --limit X --reason TEXT: the budget, --period, --limit and --reason are required")}
	}
	if in.Pipelines, err = c.pipelines(); err != nil {
		return err
	}
	if in.Limit, err = operator.ParseLimit(in.Pipelines, in.Budget, limit); err != nil {
		return err
	}
	res, err := askLedger(ctx, c, writeLedger, func(_ *pipeline.Set, led *ledger.Ledger) (operator.RaiseResult, error) {
		return operator.RaiseBudget(ctx, led, in)
	})
	if err != nil {
		return err
	}
	c.nudgeParked(ctx, &res)
	return emit(c, res, nil, printLimitSet)
}

// nudgeParked signals the episodes parked on the period to ask their
// budgets at once; one that cannot be reached asks on its own timer.
func (c *cli) nudgeParked(ctx context.Context, res *operator.RaiseResult) {
	if len(res.Nudge) == 0 {
		return
	}
	cl, err := c.dial(ctx)
	if err != nil {
		operator.NudgeParked(ctx, nil, res)
		return
	}
	defer cl.Close()
	operator.NudgeParked(ctx, cl, res)
}

func printLimitSet(w io.Writer, res operator.RaiseResult) {
	switch res.Raise.Change {
	case ledger.LimitUnchanged:
		fmt.Fprintf(w, "unchanged\tbudget %s period %s is %s already; nothing was recorded\n", res.Raise.Budget, res.Raise.Period, money(res.Raise.Limit, res.Raise.Currency))
	case "":
		fmt.Fprintf(w, "already recorded (request %s)\tbudget %s period %s to %s, by %s: %s\n", res.Raise.RequestID, res.Raise.Budget, res.Raise.Period, money(res.Raise.Limit, res.Raise.Currency), res.Raise.By, res.Raise.Reason)
	default:
		fmt.Fprintf(w, "%s\tbudget %s period %s from %s to %s, by %s: %s\n", res.Raise.Change, res.Raise.Budget, res.Raise.Period, money(res.Raise.Previous, res.Raise.Currency), money(res.Raise.Limit, res.Raise.Currency), res.Raise.By, res.Raise.Reason)
	}
	fmt.Fprintln(w, budgetPeriodsHeader)
	printBudgetPeriods(w, res.Raise.Budget, []report.BudgetPeriodView{res.Period})
	for _, id := range res.Nudged {
		fmt.Fprintf(w, "nudged\t%s (it asks its budgets now)\n", id)
	}
	for _, id := range res.NotNudged {
		fmt.Fprintf(w, "not nudged\t%s: Temporal could not be reached; it asks its budgets on its own timer, or run its resolve --retry\n", id)
	}
}

// printForecasts writes the budget forecast of runs, one line a period.
func printForecasts(w io.Writer, fs []operator.BudgetForecast) {
	for _, f := range fs {
		fmt.Fprintf(w, "budget\t%s\n", f)
	}
}

// printBudgetSpend writes the spend against each budget (stats, costs).
func printBudgetSpend(w io.Writer, ps []report.BudgetPeriodView) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintln(w, "\n"+budgetPeriodsHeader)
	for _, p := range ps {
		printBudgetPeriods(w, p.Budget, []report.BudgetPeriodView{p})
	}
}
