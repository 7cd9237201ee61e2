package operator

import (
	"context"
	"strings"

	"allot"
	"allot/internal/ledger"
)

// AckDriftInput is an operator's acknowledgement of a drift item
// (starter drift ack): it stops alerting and stays in the ledger.
type AckDriftInput struct {
	ID     int64
	Reason string
	By     string
}

// AckDrift records who acknowledged a drift item and why. A missing ID or
// reason is refused (InvalidInput) before the ledger is asked; an unknown
// ID is DriftNotFound and an item acknowledged already DriftAcknowledged.
// A refusal writes nothing.
func AckDrift(ctx context.Context, led *ledger.Ledger, in AckDriftInput) (ledger.DriftItem, error) {
	if in.ID <= 0 {
		return ledger.DriftItem{}, allot.Errorf(allot.InvalidInput, "name the drift item by its ID, which %s prints: %s", allot.DriftListCommand(), allot.DriftAckCommand(1, "why"))
	}
	if strings.TrimSpace(in.Reason) == "" {
		return ledger.DriftItem{}, allot.Errorf(allot.InvalidInput, "acknowledging drift item %d needs a reason, which the ledger keeps: %s", in.ID, allot.DriftAckCommand(in.ID, "why"))
	}
	if err := allot.CheckText("--reason", in.Reason); err != nil {
		return ledger.DriftItem{}, allot.Errorf(allot.InvalidInput, "%v", err)
	}
	return led.AckDrift(ctx, in.ID, in.By, in.Reason)
}
