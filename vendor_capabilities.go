package allot

// What a vendor can promise (docs/design.md, "What a vendor can promise").
// allot's guarantees rest on a few facts about each vendor: whether it
// keeps an idempotency key, whether a submit whose answer was lost can be
// found again, when a task's cost is known and how its bill is cut. The
// vendors people pay differ on each (docs/vendor-facts.md), so an adapter
// declares them, allot acts on them, and `starter vendor show` says in
// plain words what follows.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// VendorCapabilities is what an adapter declares about its vendor. The
// zero value declares nothing, and allot then assumes the least of it.
type VendorCapabilities struct {
	// IdempotencyKey: the vendor answers a submit sent again under the
	// same key with the first task instead of running a second one.
	IdempotencyKey bool `json:"idempotency_key"`
	// Lookup is how a submit whose answer was lost is found again.
	Lookup LostLookup `json:"lookup"`
	// Cancel: a task the vendor has taken can be called off.
	Cancel bool `json:"cancel"`
	// Batch: the vendor takes many tasks in one batch, at a batch price.
	Batch bool `json:"batch"`
	// Cost is when a task's cost is known.
	Cost CostKnown `json:"cost"`
	// Bill is how the vendor's bill is cut.
	Bill BillGrain `json:"bill"`
}

// LostLookup is how a submit whose answer was lost is found again.
type LostLookup string

// How a lost submit is found again. LookupUndeclared is an adapter that
// does not say: allot asks its LookupByIdempotencyKey and parks the
// episode when it cannot tell.
const (
	LookupUndeclared LostLookup = ""
	LookupByKey      LostLookup = "key"  // the vendor looks tasks up by allot's idempotency key
	LookupByList     LostLookup = "list" // the vendor lists its recent tasks with allot's key in their metadata
	LookupNone       LostLookup = "none" // the vendor cannot be asked
)

// CostKnown is when a task's cost is known.
type CostKnown string

// When a task's cost is known.
const (
	CostUndeclared CostKnown = ""
	CostOnTask     CostKnown = "task"  // the vendor states each task's cost
	CostFromUsage  CostKnown = "usage" // the adapter computes it from the usage the vendor reports and its prices
)

// BillGrain is how the vendor's bill is cut, as allot can read it.
type BillGrain string

// How a vendor's bill is cut.
const (
	BillUndeclared BillGrain = ""
	BillPerTask    BillGrain = "task" // a line per task, with the task's reference
	BillNone       BillGrain = "none" // no bill allot reads
)

// Check refuses a value outside the named constants, naming the field and
// the values it takes.
func (c VendorCapabilities) Check() error {
	if err := oneOf("lookup", string(c.Lookup), string(LookupByKey), string(LookupByList), string(LookupNone)); err != nil {
		return err
	}
	if err := oneOf("cost", string(c.Cost), string(CostOnTask), string(CostFromUsage)); err != nil {
		return err
	}
	return oneOf("bill", string(c.Bill), string(BillPerTask), string(BillNone))
}

// oneOf refuses a capability's value that is neither empty (undeclared)
// nor one of words.
func oneOf(field, value string, words ...string) error {
	if value == "" || slices.Contains(words, value) {
		return nil
	}
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = strconv.Quote(w)
	}
	return Errorf(VendorNotConfigured, "vendor capabilities: %s %q: give %s or %s (or leave it out)", field, value, strings.Join(quoted[:len(quoted)-1], ", "), quoted[len(quoted)-1])
}

// CannotBeAsked reports whether a lost submit can never be found again at
// this vendor: allot then parks the episode without asking.
func (c VendorCapabilities) CannotBeAsked() bool { return c.Lookup == LookupNone }

// Promises are what allot can promise with a vendor of these
// capabilities, one plain sentence per fact, in the order an operator
// weighs them: paying twice first, then money, then the bill.
func (c VendorCapabilities) Promises() []string {
	var out []string
	switch c.Lookup {
	case LookupByKey:
		out = append(out, "a lost response is looked up by allot's idempotency key: the task is adopted if the vendor has it, and sent again only after the vendor says it has none")
	case LookupByList:
		out = append(out, "a lost response is found by listing the vendor's recent tasks for allot's key in their metadata: the task is adopted if listed, and sent again only when the adapter, past the list's lag, finds none")
	case LookupNone:
		out = append(out, "a lost response parks the episode for a person: this vendor cannot be asked whether it ran the request")
	default:
		out = append(out, "the adapter does not say how a lost response is found again: allot asks its look-up by idempotency key, and parks the episode for a person if it cannot tell")
	}
	switch {
	case c.IdempotencyKey:
		out = append(out, "a request sent again under the same idempotency key returns the first task: the vendor does not run it twice")
	case c.Lookup == LookupNone:
		out = append(out, "the vendor keeps no idempotency key: a request sent twice runs and bills twice, so only a person's resubmit sends one again")
	default:
		out = append(out, "the vendor keeps no idempotency key: a request sent twice runs and bills twice, so allot sends one again only after the look-up finds nothing")
	}
	if c.Cancel {
		out = append(out, "a task the vendor has taken can be cancelled")
	} else {
		out = append(out, "a task the vendor has taken cannot be called off: abandoning its step keeps its cost")
	}
	if c.Batch {
		out = append(out, "batch steps can send their items in the vendor's batches, at its batch price")
	} else {
		out = append(out, "no batches: every task is a call of its own")
	}
	switch c.Cost {
	case CostOnTask:
		out = append(out, "each task's cost is the vendor's own figure, booked when the task ends; until then its budget holds the reservation")
	case CostFromUsage:
		out = append(out, "each task's cost is computed by the adapter from the usage the vendor reports and its prices, booked when the task ends; until then its budget holds the reservation")
	default:
		out = append(out, "the adapter does not say how a task's cost is known: allot books the cost the task reports when it ends")
	}
	switch c.Bill {
	case BillPerTask:
		out = append(out, "the bill is reconciled line by line: a charge for no task, or for another amount, is drift")
	case BillNone:
		out = append(out, "allot reads no bill of this vendor: the ledger's costs are not checked against what it charges")
	default:
		out = append(out, "the adapter does not say how the bill is cut: it is reconciled only if the adapter reads it (paidvendor.BillReader)")
	}
	return out
}

// MarshalCapabilities is c as the JSON the ledger keeps.
func MarshalCapabilities(c VendorCapabilities) (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("vendor capabilities: %w", err)
	}
	return string(b), nil
}

// UnmarshalCapabilities reads capabilities the ledger kept, checked.
func UnmarshalCapabilities(s string) (VendorCapabilities, error) {
	var c VendorCapabilities
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return VendorCapabilities{}, Errorf(VendorNotConfigured, "vendor capabilities: %v", err)
	}
	return c, c.Check()
}
