package protocoltest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"allot/paidvendor"
)

// Adapter is an activity adapter (a [[vendor]] with adapter = "activity"):
// the activities a vendor's worker, in any language, registers on the
// vendor's task queue. It holds its own credentials (in Client) and
// reports failures as application errors of the paidvendor.ActivityErr*
// types; any other failure of Submit means "outcome unknown".
type Adapter struct {
	Client paidvendor.Client
	// BeforeSubmit, when set, runs first in every Submit with its
	// 1-based call number; an error (or a panic) there is the adapter's
	// worker failing at that point.
	BeforeSubmit func(ctx context.Context, n int, req paidvendor.ActivitySubmitRequest) error

	submits atomic.Int32
}

// Names are the activity types an adapter registers under.
type Names struct{ Submit, Lookup, Status, Fetch string }

// Registry is where activities are registered: a worker, or a test
// environment.
type Registry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers the adapter's activities under names; an empty name
// is not registered (a vendor without a look-up).
func (a *Adapter) Register(r Registry, names Names) {
	for _, x := range []struct {
		name string
		fn   any
	}{{names.Submit, a.Submit}, {names.Lookup, a.Lookup}, {names.Status, a.Status}, {names.Fetch, a.Fetch}} {
		if x.name != "" {
			r.RegisterActivityWithOptions(x.fn, activity.RegisterOptions{Name: x.name})
		}
	}
}

// Submit asks the vendor to start one task.
func (a *Adapter) Submit(ctx context.Context, req paidvendor.ActivitySubmitRequest) (paidvendor.ActivityTask, error) {
	n := int(a.submits.Add(1))
	if a.BeforeSubmit != nil {
		if err := a.BeforeSubmit(ctx, n, req); err != nil {
			return paidvendor.ActivityTask{}, err
		}
	}
	t, err := a.Client.Submit(ctx, paidvendor.SubmitRequest(req))
	if err != nil {
		return paidvendor.ActivityTask{}, activityError("submit", err)
	}
	return paidvendor.ActivityTaskOf(t), nil
}

// Lookup asks the vendor what it holds under a key.
func (a *Adapter) Lookup(ctx context.Context, req paidvendor.ActivityLookupRequest) (paidvendor.ActivityTask, error) {
	t, err := a.Client.LookupByIdempotencyKey(ctx, req.IdempotencyKey)
	if err != nil {
		return paidvendor.ActivityTask{}, activityError("lookup", err)
	}
	return paidvendor.ActivityTaskOf(t), nil
}

// Status reports a task by its reference.
func (a *Adapter) Status(ctx context.Context, req paidvendor.ActivityTaskRequest) (paidvendor.ActivityTask, error) {
	t, err := a.Client.Task(ctx, req.ID)
	if err != nil {
		return paidvendor.ActivityTask{}, activityError("status", err)
	}
	return paidvendor.ActivityTaskOf(t), nil
}

// Fetch returns a succeeded task's result bytes.
func (a *Adapter) Fetch(ctx context.Context, req paidvendor.ActivityTaskRequest) (paidvendor.ActivityFetchResult, error) {
	body, err := a.Client.Result(ctx, req.ID)
	if err != nil {
		return paidvendor.ActivityFetchResult{}, activityError("fetch", err)
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil {
		return paidvendor.ActivityFetchResult{}, fmt.Errorf("fetch %s: %w", req.ID, err)
	}
	return paidvendor.ActivityFetchResult{Data: data}, nil
}

// activityError reports a client error as the activity adapter's contract
// names it.
func activityError(op string, err error) error {
	var he *paidvendor.HTTPError
	switch {
	case errors.Is(err, paidvendor.ErrUnauthorized):
		return temporal.NewNonRetryableApplicationError(op+": "+err.Error(), paidvendor.ActivityErrUnauthorized, nil)
	case errors.Is(err, paidvendor.ErrLookupUnsupported):
		return temporal.NewNonRetryableApplicationError(op+": "+err.Error(), paidvendor.ActivityErrLookupUnsupported, nil)
	case errors.Is(err, paidvendor.ErrNotFound):
		return temporal.NewNonRetryableApplicationError(op+": "+err.Error(), paidvendor.ActivityErrNotFound, nil)
	case op == "submit" && (errors.Is(err, paidvendor.ErrInvalidRequest) ||
		errors.As(err, &he) && he.StatusCode >= 400 && he.StatusCode < 500 && he.StatusCode != 408 && he.StatusCode != 409 && he.StatusCode != 429):
		return temporal.NewNonRetryableApplicationError(op+": "+err.Error(), paidvendor.ActivityErrRefused, nil)
	}
	// No answer, or one that says nothing definite: the outcome is unknown.
	return fmt.Errorf("%s: %w", op, err)
}
