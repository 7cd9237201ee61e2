package main

import (
	"allot"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"allot/ledger"
	"allot/operator"
	"allot/pipeline"
	"allot/workflows"
)

// budgetCommand dispatches `starter budget <subcommand>`: the money
// budgets of the pipeline file, their periods in the ledger, and raises.
func budgetCommand(ctx context.Context, c *cli, args []string) error {
	subs := map[string]func(context.Context, *cli, []string) error{
		"list":  budgetList,
		"show":  budgetShow,
		"raise": budgetRaise,
	}
	return dispatch(ctx, c, "budget", subs, args)
}

// budgetName takes the budget named before the flags (`budget show NAME
// --period P`), or none.
func budgetName(args []string) (string, []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}

func printBudgetPeriods(w io.Writer, name string, ps []operator.BudgetPeriodView) {
	for _, p := range ps {
		limit := money(p.Limit, p.Currency)
		if p.Raised {
			limit += " (raised)"
		}
		parked := "-"
		if len(p.Parked) > 0 {
			parked = strings.Join(p.Parked, ", ")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, p.Period, limit, money(p.Settled, p.Currency), money(p.Reserved, p.Currency), money(p.Free, p.Currency), parked)
	}
}

func budgetList(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("budget list", false)
	var in operator.BudgetsInput
	in.Budget, args = budgetName(args)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	var err error
	if in.Pipelines, err = c.cfg.LoadPipelines(); err != nil {
		return err
	}
	res, err := readLedger(ctx, c, func(led *ledger.Ledger) (operator.BudgetsResult, error) {
		return operator.Budgets(ctx, led, in)
	})
	if err != nil {
		return err
	}
	c.print(res, func(w io.Writer) {
		if len(res.Budgets) == 0 {
			fmt.Fprintln(w, "no budgets: add [[budget]] tables to the pipeline file (docs/budgets.md)")
			return
		}
		fmt.Fprintln(w, "BUDGET\tPERIOD\tLIMIT\tSETTLED\tRESERVED\tFREE\tPARKED")
		for _, b := range res.Budgets {
			printBudgetPeriods(w, b.Name, b.Periods)
		}
	})
	return nil
}

func budgetShow(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("budget show", false)
	var in operator.BudgetShowInput
	in.Budget, args = budgetName(args)
	fs.StringVar(&in.Period, "period", "", "the budget's period: 2026-08-07, 2026-W32 or 2026-08 by its kind (required)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if in.Budget == "" || in.Period == "" {
		return usageError{errors.New("name the budget and its period: starter budget show BUDGET --period P")}
	}
	var err error
	if in.Pipelines, err = c.cfg.LoadPipelines(); err != nil {
		return err
	}
	res, err := readLedger(ctx, c, func(led *ledger.Ledger) (operator.BudgetShowResult, error) {
		return operator.BudgetShow(ctx, led, in)
	})
	if err != nil {
		return err
	}
	c.print(res, func(w io.Writer) {
		fmt.Fprintln(w, "BUDGET\tPERIOD\tLIMIT\tSETTLED\tRESERVED\tFREE\tPARKED")
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
	})
	return nil
}

func budgetRaise(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("budget raise", true)
	in := operator.RaiseInput{By: os.Getenv("USER"), RequestID: uuid.NewString()}
	in.Budget, args = budgetName(args)
	fs.StringVar(&in.Period, "period", "", "the one period to raise: 2026-08-07, 2026-W32 or 2026-08 by the budget's kind (required); other periods keep their limits")
	fs.Int64Var(&in.Limit, "limit", 0, "the period's new limit in minor units of the budget's currency, e.g. 100000 for 1000.00 USD (required)")
	fs.StringVar(&in.Reason, "reason", "", "why (required); the ledger keeps it with who raised it")
	fs.StringVar(&in.By, "by", in.By, "who raises it (default $USER)")
	fs.StringVar(&in.RequestID, "request-id", in.RequestID, "the raise's idempotency key: the same request again records nothing more")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if in.Budget == "" || in.Period == "" || in.Limit == 0 || in.Reason == "" {
		return usageError{errors.New("starter budget raise BUDGET --period P --limit X --reason TEXT: the budget, --period, --limit and --reason are required")}
	}
	var err error
	if in.Pipelines, err = c.cfg.LoadPipelines(); err != nil {
		return err
	}
	led, err := c.openLedgerToWrite(ctx)
	if err != nil {
		return err
	}
	defer led.Close()
	res, err := operator.RaiseBudget(ctx, led, in)
	if err != nil {
		return err
	}
	// The episodes parked on the period ask their budgets at once; one
	// that cannot be reached asks on its own timer.
	if len(res.Nudge) > 0 {
		cl, err := c.dial(ctx)
		if err != nil {
			res.NotNudged = append(res.NotNudged, res.Nudge...)
		} else {
			defer cl.Close()
			for _, id := range res.Nudge {
				if err := cl.SignalWorkflow(ctx, id, "", workflows.BudgetRaisedSignal, nil); err != nil {
					res.NotNudged = append(res.NotNudged, id)
					continue
				}
				res.Nudged = append(res.Nudged, id)
			}
		}
	}
	c.print(res, func(w io.Writer) {
		what := "raised"
		if !res.Applied {
			what = "already recorded (request " + res.Raise.RequestID + ")"
		}
		fmt.Fprintf(w, "%s\tbudget %s period %s to %s, by %s: %s\n", what, res.Raise.Budget, res.Raise.Period, money(res.Raise.Limit, res.Raise.Currency), res.Raise.By, res.Raise.Reason)
		fmt.Fprintln(w, "BUDGET\tPERIOD\tLIMIT\tSETTLED\tRESERVED\tFREE\tPARKED")
		printBudgetPeriods(w, res.Raise.Budget, []operator.BudgetPeriodView{res.Period})
		for _, id := range res.Nudged {
			fmt.Fprintf(w, "nudged\t%s (it asks its budgets now)\n", id)
		}
		for _, id := range res.NotNudged {
			fmt.Fprintf(w, "not nudged\t%s: Temporal could not be reached; it asks its budgets on its own timer, or run its resolve --retry\n", id)
		}
	})
	return nil
}

// printForecasts writes the budget forecast of runs, one line a period.
func printForecasts(w io.Writer, fs []operator.BudgetForecast) {
	for _, f := range fs {
		fmt.Fprintf(w, "budget\t%s\n", f)
	}
}

// runForecast is what a run would reserve in the budgets that cover its
// pipeline's paid steps, in its nominal time's periods, against what each
// has free: nothing when its key already has an episode. Without a
// readable ledger, free is the configured limit.
func (c *cli) runForecast(ctx context.Context, set *pipeline.Set, in operator.RunInput) ([]operator.BudgetForecast, error) {
	if len(set.Budgets()) == 0 {
		return nil, nil
	}
	nominal := in.NominalTime
	if nominal.IsZero() {
		nominal = time.Now()
	}
	key := in.Key
	if key == "" {
		key = allot.AllocationKey(in.Pipeline, nominal.UTC().Truncate(time.Second))
	}
	type forecast struct {
		fs       []operator.BudgetForecast
		existing bool
	}
	res, err := readLedger(ctx, c, func(led *ledger.Ledger) (forecast, error) {
		if _, err := led.EpisodeByKey(ctx, in.Pipeline, key); err == nil || errors.Is(err, ledger.ErrKeyAmbiguous) {
			return forecast{existing: true}, nil
		}
		fs, err := operator.ForecastBudgets(ctx, led, set, in.Pipeline, []time.Time{nominal})
		return forecast{fs: fs}, err
	})
	switch {
	case err == nil && res.existing:
		return nil, nil
	case err == nil:
		return res.fs, nil
	}
	// Without a readable ledger the forecast takes the limits.
	return operator.ForecastBudgets(ctx, nil, set, in.Pipeline, []time.Time{nominal})
}

// printBudgetSpend writes the spend against each budget (stats, costs).
func printBudgetSpend(w io.Writer, ps []operator.BudgetPeriodView) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintln(w, "\nBUDGET\tPERIOD\tLIMIT\tSETTLED\tRESERVED\tFREE\tPARKED")
	for _, p := range ps {
		printBudgetPeriods(w, p.Budget, []operator.BudgetPeriodView{p})
	}
}
