package paidvendor

import "context"

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
