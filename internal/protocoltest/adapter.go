package protocoltest

import (
	"context"
	"sync/atomic"

	"allot/paidvendor"
)

// Adapter is paidvendor.ActivityAdapter with a hook for tests: BeforeSubmit
// makes the adapter's worker fail at a chosen submission.
type Adapter struct {
	Client paidvendor.Client
	// BeforeSubmit, when set, runs first in every Submit with its
	// 1-based call number; an error (or a panic) there is the adapter's
	// worker failing at that point.
	BeforeSubmit func(ctx context.Context, n int, req paidvendor.ActivitySubmitRequest) error

	submits atomic.Int32
}

// Names are the activity types an adapter registers under.
type Names = paidvendor.ActivityNames

// Registry is where activities are registered: a worker, or a test
// environment.
type Registry = paidvendor.ActivityRegistry

func (a *Adapter) production() *paidvendor.ActivityAdapter {
	return &paidvendor.ActivityAdapter{Client: a.Client}
}

// Register registers the adapter's activities under names; an empty name
// is not registered (a vendor without a look-up).
func (a *Adapter) Register(r Registry, names Names) {
	paidvendor.RegisterActivities(r, names, a.Submit, a.Lookup, a.Status, a.Fetch)
}

// Submit asks the vendor to start one task, after BeforeSubmit.
func (a *Adapter) Submit(ctx context.Context, req paidvendor.ActivitySubmitRequest) (paidvendor.ActivityTask, error) {
	n := int(a.submits.Add(1))
	if a.BeforeSubmit != nil {
		if err := a.BeforeSubmit(ctx, n, req); err != nil {
			return paidvendor.ActivityTask{}, err
		}
	}
	return a.production().Submit(ctx, req)
}

// Lookup asks the vendor what it holds under a key.
func (a *Adapter) Lookup(ctx context.Context, req paidvendor.ActivityLookupRequest) (paidvendor.ActivityTask, error) {
	return a.production().Lookup(ctx, req)
}

// Status reports a task by its reference.
func (a *Adapter) Status(ctx context.Context, req paidvendor.ActivityTaskRequest) (paidvendor.ActivityTask, error) {
	return a.production().Status(ctx, req)
}

// Fetch returns a succeeded task's result bytes.
func (a *Adapter) Fetch(ctx context.Context, req paidvendor.ActivityTaskRequest) (paidvendor.ActivityFetchResult, error) {
	return a.production().Fetch(ctx, req)
}
