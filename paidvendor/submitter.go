package paidvendor

import (
	"context"

	"allot"
)

// Submitter is what an effect step's adapter does (publish, notify): act
// once per idempotency key, and, if it can, say by key what it did. A paid
// vendor's Client is a Submitter whose tasks also run and give a result.
//
// LookupByIdempotencyKey returns ErrNotFound when there is nothing under
// the key, and ErrLookupUnsupported when the adapter cannot tell: then an
// unknown outcome parks the episode instead of acting again.
type Submitter interface {
	Submit(ctx context.Context, req SubmitRequest) (Task, error)
	LookupByIdempotencyKey(ctx context.Context, key string) (Task, error)
}

// Factory builds a vendor's adapter for an API key ("" when the vendor
// names no key source). A custom worker registers one per Go adapter.
type Factory func(apiKey string) (Submitter, error)

// Quoter is optional for a Go adapter: the price of a task before it is
// sent, for the request the send would carry. When a budget covers the
// step, the quote is what it reserves (refused if above the step's
// max_cost); without a Quoter the reservation is the step's max_cost. A
// quote is asked only before a task's intent is written, never again for a
// task that may have been sent. ErrUnauthorized parks the episode as for a
// submit; any other error is retried.
type Quoter interface {
	Quote(ctx context.Context, req SubmitRequest) (Cost, error)
}

// Describer is optional for a Go adapter: what its vendor can do
// (allot.VendorCapabilities), which allot acts on and `starter vendor
// show` prints. An adapter that declares nothing is assumed to promise
// the least (Capabilities).
type Describer interface {
	Capabilities() allot.VendorCapabilities
}

// HTTPCapabilities are those of a vendor that speaks allot's vendor API
// (package vendorapi): it keeps the idempotency key, looks tasks up by it
// (a vendor that answers 501 parks the episode instead), takes batches,
// states each task's cost and bills a line per task. A task is not
// cancelled: the API's cancel is a batch's.
var HTTPCapabilities = allot.VendorCapabilities{
	IdempotencyKey: true,
	Lookup:         allot.LookupByKey,
	Batch:          true,
	Cost:           allot.CostOnTask,
	Bill:           allot.BillPerTask,
}

// Capabilities are what s declares (Describer). Where it declares
// nothing, what its methods show is filled in (a BillReader reads a bill
// a line per task; a BatchClient takes batches), and the rest stays
// undeclared. A declaration its methods cannot keep is refused: a bill
// without a BillReader, batches without a BatchClient.
func Capabilities(s Submitter) (allot.VendorCapabilities, error) {
	_, bills := s.(BillReader)
	_, batches := s.(BatchClient)
	d, ok := s.(Describer)
	if !ok {
		c := allot.VendorCapabilities{Batch: batches, Bill: allot.BillNone}
		if bills {
			c.Bill = allot.BillPerTask
		}
		return c, nil
	}
	c := d.Capabilities()
	if err := c.Check(); err != nil {
		return allot.VendorCapabilities{}, err
	}
	if c.Bill == allot.BillUndeclared {
		c.Bill = allot.BillNone
		if bills {
			c.Bill = allot.BillPerTask
		}
	}
	switch {
	case c.Bill == allot.BillPerTask && !bills:
		return allot.VendorCapabilities{}, allot.Errorf(allot.VendorNotConfigured, "the adapter declares a bill a line per task but does not read it: implement paidvendor.BillReader, or declare bill %q", allot.BillNone)
	case c.Bill == allot.BillNone && bills:
		return allot.VendorCapabilities{}, allot.Errorf(allot.VendorNotConfigured, "the adapter declares no bill but implements paidvendor.BillReader, which allot reconciles: declare bill %q", allot.BillPerTask)
	case c.Batch && !batches:
		return allot.VendorCapabilities{}, allot.Errorf(allot.VendorNotConfigured, "the adapter declares batches but does not take them: implement paidvendor.BatchClient, or declare batch false")
	}
	return c, nil
}
