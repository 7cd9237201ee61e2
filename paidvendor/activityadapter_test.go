package paidvendor_test

import (
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
)

var adapterNames = paidvendor.ActivityNames{Submit: "submit", Lookup: "lookup", Status: "status", Fetch: "fetch"}

// TestActivityAdapterOverHTTP runs the Go activity adapter's four
// activities in Temporal's activity environment against the simulator: a
// task is submitted, found by its key, polled and fetched, and every
// definite refusal comes back as the contract's error type.
func TestActivityAdapterOverHTTP(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{})
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	(&paidvendor.ActivityAdapter{Client: tv.client}).Register(env, adapterNames)

	key := "123e4567-e89b-42d3-a456-426614174000"
	v, err := env.ExecuteActivity("submit", paidvendor.ActivitySubmitRequest{IdempotencyKey: key, Kind: "video"})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	var sent paidvendor.ActivityTask
	if err := v.Get(&sent); err != nil || sent.ID == "" || sent.Cost == nil || sent.Cost.Amount != paidvendortest.DefaultPrice.Amount {
		t.Fatalf("submit answered %+v (%v)", sent, err)
	}
	v, err = env.ExecuteActivity("lookup", paidvendor.ActivityLookupRequest{IdempotencyKey: key})
	var found paidvendor.ActivityTask
	if err != nil || v.Get(&found) != nil || found.ID != sent.ID {
		t.Fatalf("lookup of %s: %+v (%v), want task %s", key, found, err, sent.ID)
	}
	// The simulator finishes a task at once (TaskDuration 0).
	v, err = env.ExecuteActivity("status", paidvendor.ActivityTaskRequest{ID: sent.ID})
	var polled paidvendor.ActivityTask
	if err != nil || v.Get(&polled) != nil || polled.Status != paidvendor.StatusSucceeded {
		t.Fatalf("status of %s: %+v (%v), want succeeded", sent.ID, polled, err)
	}
	v, err = env.ExecuteActivity("fetch", paidvendor.ActivityTaskRequest{ID: sent.ID})
	var fetched paidvendor.ActivityFetchResult
	if err != nil || v.Get(&fetched) != nil || len(fetched.Data) == 0 {
		t.Fatalf("fetch of %s: %d bytes (%v)", sent.ID, len(fetched.Data), err)
	}
	if got := tv.requests.Load(); got != 4 {
		t.Errorf("the vendor saw %d requests for four activities, want one each", got)
	}

	_, err = env.ExecuteActivity("status", paidvendor.ActivityTaskRequest{ID: "vt_0123456789abcdef"})
	wantErrorType(t, "status of an unknown task", err, paidvendor.ActivityErrNotFound)
	_, err = env.ExecuteActivity("submit", paidvendor.ActivitySubmitRequest{IdempotencyKey: "not-a-uuid", Kind: "video"})
	wantErrorType(t, "submit with a bad key", err, paidvendor.ActivityErrRefused)

	wrong := &paidvendor.ActivityAdapter{Client: tv.newClient(t, "wrong-key")}
	env2 := suite.NewTestActivityEnvironment()
	wrong.Register(env2, adapterNames)
	_, err = env2.ExecuteActivity("lookup", paidvendor.ActivityLookupRequest{IdempotencyKey: key})
	wantErrorType(t, "lookup with a refused key", err, paidvendor.ActivityErrUnauthorized)
}

// TestActivityAdapterUnknownOutcome: a submission whose response is lost
// is no application error of the contract (its outcome is unknown: allot
// looks it up), and a vendor without a look-up says so.
func TestActivityAdapterUnknownOutcome(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{LoseResponseAfterAccept: 1, NoLookup: true})
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	(&paidvendor.ActivityAdapter{Client: tv.client}).Register(env, adapterNames)
	key := "123e4567-e89b-42d3-a456-426614174000"
	_, err := env.ExecuteActivity("submit", paidvendor.ActivitySubmitRequest{IdempotencyKey: key, Kind: "video"})
	var app *temporal.ApplicationError
	if err == nil || errors.As(err, &app) && app.Type() != "" && app.NonRetryable() {
		t.Fatalf("a lost response came back as %v, want an error that is not one of the contract's", err)
	}
	_, err = env.ExecuteActivity("lookup", paidvendor.ActivityLookupRequest{IdempotencyKey: key})
	wantErrorType(t, "lookup at a vendor without one", err, paidvendor.ActivityErrLookupUnsupported)
}

func wantErrorType(t *testing.T, what string, err error, want string) {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != want || !app.NonRetryable() {
		t.Errorf("%s: %v, want a non-retryable application error of type %s", what, err, want)
	}
}
