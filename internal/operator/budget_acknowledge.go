package operator

import (
	"context"
	"errors"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/report"
	"allot/pipeline"
)

// AcknowledgeInput names a budget period whose charges outside its records
// a person acknowledges, and why (docs/design.md, "Budgets").
type AcknowledgeInput struct {
	Pipelines *pipeline.Set
	Budget    string
	Period    string
	Reason    string
	By        string
	// At is when (zero: now).
	At time.Time
}

// AcknowledgeResult is what was acknowledged now, and the period's spend
// outside its records after.
type AcknowledgeResult struct {
	Budget       string              `json:"budget"`
	Period       string              `json:"period"`
	Acknowledged []ledger.ChargeAck  `json:"acknowledged"`
	Outside      report.OutsideSpend `json:"outside"`
}

// AcknowledgeOutside records, with a name and a reason, every charge of the
// budget's period that its records leave out and that neither an import
// nor an earlier acknowledgement explains: check then stops flagging them
// (charge_unreserved), and the page and `budget show` count them as
// acknowledged. The charges stand; the budget's figures do not change. A
// period with nothing to acknowledge is refused, and nothing is written.
func AcknowledgeOutside(ctx context.Context, led *ledger.Ledger, in AcknowledgeInput) (AcknowledgeResult, error) {
	b, err := report.BudgetNamed(in.Pipelines, in.Budget)
	if err != nil {
		return AcknowledgeResult{}, err
	}
	bad := func(format string, args ...any) error { return allot.Errorf(allot.InvalidInput, format, args...) }
	switch {
	case b.CheckPeriod(in.Period) != nil:
		return AcknowledgeResult{}, bad("%v", b.CheckPeriod(in.Period))
	case strings.TrimSpace(in.Reason) == "":
		return AcknowledgeResult{}, bad("an acknowledgement needs a reason, which the ledger keeps with who gave it: %s", allot.BudgetAcknowledgeCommand(b.Name, in.Period, "spent before the budget covered the step"))
	case allot.CheckText("--reason", in.Reason) != nil:
		return AcknowledgeResult{}, bad("%v", allot.CheckText("--reason", in.Reason))
	}
	by, err := allot.Actor(in.By)
	if err != nil {
		return AcknowledgeResult{}, bad("%v", err)
	}
	outside, err := report.OutsideRecords(ctx, led, in.Pipelines, b, in.Period)
	if err != nil {
		return AcknowledgeResult{}, err
	}
	var acks []ledger.ChargeAck
	for _, c := range outside.Charges {
		if c.Imported || c.Ack != nil {
			continue
		}
		acks = append(acks, ledger.ChargeAck{Budget: b.Name, Period: in.Period, PaidTaskRef: c.PaidTaskRef, Amount: c.Amount, Currency: c.Currency, By: by, Reason: in.Reason})
	}
	if len(acks) == 0 {
		return AcknowledgeResult{}, bad("budget %s period %s has no charge outside its records left to acknowledge: nothing was recorded; `%s` shows its spend", b.Name, in.Period, allot.BudgetShowCommand(b.Name, in.Period))
	}
	recorded, err := led.AcknowledgeCharges(ctx, acks, in.At)
	if errors.Is(err, ledger.ErrInvalidInput) {
		return AcknowledgeResult{}, bad("%v", err)
	}
	if err != nil {
		return AcknowledgeResult{}, err
	}
	after, err := report.OutsideRecords(ctx, led, in.Pipelines, b, in.Period)
	if err != nil {
		return AcknowledgeResult{}, err
	}
	return AcknowledgeResult{Budget: b.Name, Period: in.Period, Acknowledged: recorded, Outside: after}, nil
}
