package pipeline

import (
	"fmt"
	"time"
)

// VendorBill is how allot reconciles a vendor's bill with the ledger
// (docs/design.md, "Reconciling the vendor's bill"): how long a cost the
// ledger books may wait for the vendor's charge (and a charge for its
// task's reference) before it is drift, and how far a charge may differ
// from the ledger's cost, in minor units, before it is.
type VendorBill struct {
	// BillGrace: default DefaultBillGrace.
	BillGrace string `toml:"bill_grace" json:"bill_grace,omitempty"`
	// BillTolerance: default 0 (exact).
	BillTolerance int64 `toml:"bill_tolerance" json:"bill_tolerance,omitempty"`
}

// DefaultBillGrace is how long a vendor that names no bill_grace has to
// charge what the ledger books: vendors that bill at acceptance show the
// charge within minutes, batch billers within the day.
const DefaultBillGrace = time.Hour

// maxBillTolerance keeps tolerances to amounts a person could mean
// (1,000,000.00 in a two-decimal currency).
const maxBillTolerance = 100_000_000

// Grace is how long a booked cost may go uncharged.
func (b VendorBill) Grace() time.Duration {
	if d, err := time.ParseDuration(b.BillGrace); err == nil && d > 0 {
		return d
	}
	return DefaultBillGrace
}

func (b VendorBill) check() error {
	if b.BillGrace != "" {
		if _, err := positive("bill_grace", b.BillGrace); err != nil {
			return err
		}
	}
	if b.BillTolerance < 0 || b.BillTolerance > maxBillTolerance {
		return fmt.Errorf("bill_tolerance = %d: give how many minor units (cents for USD) a charge may differ from the ledger's cost, 0 to %d (0 or none: exact)", b.BillTolerance, maxBillTolerance)
	}
	return nil
}

// Bill is the bill settings of the named vendor ("" and "default": the
// default vendor's, from its [[vendor]] name = "default"); an unknown name
// has the defaults.
func (s *Set) Bill(name string) VendorBill {
	if name == "" || name == DefaultVendor {
		return s.defaultBill
	}
	return s.vendors[name].VendorBill
}
