package paidvendor

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// ActivityAdapter is an activity adapter written in Go over a Client: the
// activities a vendor's worker registers on the vendor's task queue (a
// [[vendor]] with adapter = "activity"), each making one call of the
// vendor. It holds its own credentials (in Client) and reports failures
// as application errors of the ActivityErr* types; any other failure of
// Submit means "outcome unknown" (docs/design.md, "Vendors and adapters").
type ActivityAdapter struct {
	Client Client
}

// ActivityNames are the activity types an adapter registers under (the
// [[vendor]]'s activities); an empty name is not registered.
type ActivityNames struct{ Submit, Lookup, Status, Fetch string }

// ActivityRegistry is where activities are registered: a worker, or a
// test environment.
type ActivityRegistry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers the adapter's activities under names; an empty name
// is not registered (a vendor without a look-up).
func (a *ActivityAdapter) Register(r ActivityRegistry, names ActivityNames) {
	RegisterActivities(r, names, a.Submit, a.Lookup, a.Status, a.Fetch)
}

// RegisterActivities registers the four activity functions under names,
// leaving out those whose name is empty.
func RegisterActivities(r ActivityRegistry, names ActivityNames, submit, lookup, status, fetch any) {
	for _, x := range []struct {
		name string
		fn   any
	}{{names.Submit, submit}, {names.Lookup, lookup}, {names.Status, status}, {names.Fetch, fetch}} {
		if x.name != "" {
			r.RegisterActivityWithOptions(x.fn, activity.RegisterOptions{Name: x.name})
		}
	}
}

// Submit asks the vendor to start one task.
func (a *ActivityAdapter) Submit(ctx context.Context, req ActivitySubmitRequest) (ActivityTask, error) {
	t, err := a.Client.Submit(ctx, SubmitRequest(req))
	if err != nil {
		return ActivityTask{}, activityError("submit", err)
	}
	return ActivityTaskOf(t), nil
}

// Lookup asks the vendor what it holds under a key.
func (a *ActivityAdapter) Lookup(ctx context.Context, req ActivityLookupRequest) (ActivityTask, error) {
	t, err := a.Client.LookupByIdempotencyKey(ctx, req.IdempotencyKey)
	if err != nil {
		return ActivityTask{}, activityError("lookup", err)
	}
	return ActivityTaskOf(t), nil
}

// Status reports a task by its reference.
func (a *ActivityAdapter) Status(ctx context.Context, req ActivityTaskRequest) (ActivityTask, error) {
	t, err := a.Client.Task(ctx, req.ID)
	if err != nil {
		return ActivityTask{}, activityError("status", err)
	}
	return ActivityTaskOf(t), nil
}

// Fetch returns a succeeded task's result bytes.
func (a *ActivityAdapter) Fetch(ctx context.Context, req ActivityTaskRequest) (ActivityFetchResult, error) {
	body, err := a.Client.Result(ctx, req.ID)
	if err != nil {
		return ActivityFetchResult{}, activityError("fetch", err)
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil {
		return ActivityFetchResult{}, fmt.Errorf("fetch %s: %w", req.ID, err)
	}
	return ActivityFetchResult{Data: data}, nil
}

// activityError reports a client error as the activity adapter's contract
// names it.
func activityError(op string, err error) error {
	var he *HTTPError
	switch {
	case errors.Is(err, ErrUnauthorized):
		return temporal.NewNonRetryableApplicationError(op+": "+err.Error(), ActivityErrUnauthorized, nil)
	case errors.Is(err, ErrLookupUnsupported):
		return temporal.NewNonRetryableApplicationError(op+": "+err.Error(), ActivityErrLookupUnsupported, nil)
	case errors.Is(err, ErrNotFound):
		return temporal.NewNonRetryableApplicationError(op+": "+err.Error(), ActivityErrNotFound, nil)
	case op == "submit" && (errors.Is(err, ErrInvalidRequest) ||
		errors.As(err, &he) && he.StatusCode >= 400 && he.StatusCode < 500 && he.StatusCode != 408 && he.StatusCode != 409 && he.StatusCode != 429):
		return temporal.NewNonRetryableApplicationError(op+": "+err.Error(), ActivityErrRefused, nil)
	}
	// No answer, or one that says nothing definite: the outcome is unknown.
	return fmt.Errorf("%s: %w", op, err)
}
