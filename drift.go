package allot

import (
	"fmt"
	"strconv"
)

// DriftClass is why a line of a vendor's bill and the ledger disagree (a
// drift item; docs/design.md, "Reconciling the vendor's bill"). The ledger
// stores these strings and the metrics label with them: never rename one.
type DriftClass string

// Drift classes: each unexplained line of the bill, or cost of the ledger,
// is exactly one of these.
const (
	// DriftUnrecorded: the vendor charged for a task the ledger holds no
	// reference for: money spent without a record.
	DriftUnrecorded DriftClass = "charged_unrecorded"
	// DriftUncharged: the ledger books a cost the vendor has not charged
	// for after the vendor's grace period.
	DriftUncharged DriftClass = "recorded_uncharged"
	// DriftAmountDiffers: the charge and the ledger's cost differ by more
	// than the vendor's tolerance, or are in other currencies.
	DriftAmountDiffers DriftClass = "amount_differs"
	// DriftDoubleCharge: a second charge for one idempotency key.
	DriftDoubleCharge DriftClass = "double_charge"
	// DriftRefunded: the vendor refunded (part of) a charge.
	DriftRefunded DriftClass = "refunded"
)

// DriftClasses lists every class, in the order reports show them.
var DriftClasses = []DriftClass{DriftUnrecorded, DriftUncharged, DriftAmountDiffers, DriftDoubleCharge, DriftRefunded}

// Valid reports whether c is one of DriftClasses.
func (c DriftClass) Valid() bool {
	for _, k := range DriftClasses {
		if c == k {
			return true
		}
	}
	return false
}

// DriftListCommand lists the drift items that wait for an operator.
func DriftListCommand() string { return "starter drift list" }

// DriftAckCommand acknowledges one drift item with a reason: it stops
// alerting and stays in the ledger.
func DriftAckCommand(id int64, reason string) string {
	return "starter drift ack --id " + strconv.FormatInt(id, 10) + " --reason " + ShellQuote(reason)
}

// DriftLineOfCost is the line a recorded-but-uncharged drift item is kept
// under: the cost has no line of the bill, so its remote reference stands
// for one (once per cost).
func DriftLineOfCost(remoteRef string) string { return fmt.Sprintf("cost:%s", remoteRef) }
