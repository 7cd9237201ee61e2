package chaos

import (
	"context"
	"net/http/httptest"
	"testing"

	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
)

// TestPausedVendorCountsEveryRequest: what a pause's check compares is
// every request the vendor served, of any kind and over its restarts: a
// status poll or a look-up reaching a paused vendor counts as much as a
// submission.
func TestPausedVendorCountsEveryRequest(t *testing.T) {
	ctx := context.Background()
	const key = "chaos-test-key"
	sim := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: key})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	v := &vendorProc{url: srv.URL, key: key}
	c, err := paidvendor.NewHTTPClient(srv.URL, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Submit(ctx, paidvendor.SubmitRequest{IdempotencyKey: "123e4567-e89b-42d3-a456-426614174000", Kind: "render"})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.sample(ctx); err != nil {
		t.Fatal(err)
	}
	before := v.requestsSeen()
	// A generation ends (the run restarts the vendor): its count is kept.
	if _, err := c.Task(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	v.down(ctx)
	srv2 := httptest.NewServer(paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: key}))
	defer srv2.Close()
	v.url = srv2.URL
	c2, err := paidvendor.NewHTTPClient(srv2.URL, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.LookupByIdempotencyKey(ctx, "123e4567-e89b-42d3-a456-426614174001"); err == nil {
		t.Fatal("the fresh vendor found a task it never had")
	}
	if err := v.sample(ctx); err != nil {
		t.Fatal(err)
	}
	if got := v.requestsSeen() - before; got != 2 {
		t.Errorf("a status poll and a look-up across a restart counted as %d requests, want 2", got)
	}
	if _, subs := v.seen(); subs != 1 {
		t.Errorf("submissions: %d, want 1", subs)
	}
}
