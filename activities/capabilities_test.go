package activities

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"allot"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
)

// askless is a vendor that declares it cannot be asked about a lost
// submit (OpenAI's responses, Anthropic's messages: docs/vendor-facts.md),
// in front of a simulator that could answer: a look-up that went anyway
// would be counted, and would find the task.
type askless struct {
	paidvendor.Client
	lookups *atomic.Int32
}

func (a askless) Capabilities() allot.VendorCapabilities {
	return allot.VendorCapabilities{Lookup: allot.LookupNone, Cost: allot.CostFromUsage, Bill: allot.BillNone}
}

func (a askless) LookupByIdempotencyKey(ctx context.Context, key string) (paidvendor.Task, error) {
	a.lookups.Add(1)
	return a.Client.LookupByIdempotencyKey(ctx, key)
}

// A vendor that declares it cannot be asked parks a lost submit for a
// person at once, in words that say so, and is never sent the look-up
// (docs/design.md, "What a vendor can promise"), nor waits for the
// vendor's gate for it.
func TestALostResponseAtAVendorThatCannotBeAskedParksWithoutAsking(t *testing.T) {
	f := newFixture(t, nil)
	sim, _, _ := withVendor(t, f)
	build := f.acts.NewVendor
	lookups := &atomic.Int32{}
	f.acts.NewVendor = func(key string) (paidvendor.Client, error) {
		c, err := build(key)
		return askless{Client: c, lookups: lookups}, err
	}
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	if err := sim.SetFaults(paidvendortest.SimFaults{LoseResponseAfterAccept: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask); err == nil {
		t.Fatal("a lost response was reported as success")
	}
	// Paused meanwhile: a look-up that is never sent takes no pass from
	// the vendor's gate, so the pause does not hold the park back.
	if _, err := f.led.PauseVendor(f.ctx, ledger.VendorPause{Vendor: pipeline.DefaultVendor, Reason: "invoice dispute", By: "ops"}); err != nil {
		t.Fatal(err)
	}
	_, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
	wantAppError(t, err, allot.OutcomeUnknown)
	if !strings.Contains(err.Error(), "vendor default cannot be asked whether it ran the request") {
		t.Fatalf("the park does not say the vendor cannot be asked: %v", err)
	}
	if n := lookups.Load(); n != 0 {
		t.Fatalf("%d look-ups went to a vendor that declares none", n)
	}
	if n := sim.ChargeCount(); n != 1 {
		t.Fatalf("charges = %d, want the one lost send", n)
	}
}

// WorkerCapabilities: the file's for http and activity vendors, a Go
// adapter's own declaration, the least where it declares nothing, and a
// refusal naming the vendor where it declares what its methods cannot keep.
func TestWorkerCapabilities(t *testing.T) {
	set, err := pipeline.Parse([]byte(`
[[vendor]]
name        = "api"
url         = "https://api.invalid"
api_key_env = "CAPABILITIES_TEST_KEY"

[[vendor]]
name       = "covers"
adapter    = "activity"
task_queue = "covers"
  [vendor.activities]
  submit = "S"
  status = "T"
  fetch  = "F"

[[vendor]]
name    = "llm"
adapter = "go"

[[vendor]]
name    = "plain"
adapter = "go"

[[pipeline]]
name = "weekly"
  [[pipeline.step]]
  name   = "video"
  kind   = "paid"
  vendor = "api"
`), "capabilities")
	if err != nil {
		t.Fatal(err)
	}
	lookups := &atomic.Int32{}
	adapters := map[string]paidvendor.Factory{
		"llm":   func(string) (paidvendor.Submitter, error) { return askless{lookups: lookups}, nil },
		"plain": func(string) (paidvendor.Submitter, error) { return keyedSubmitter{v: &keyedVendor{}}, nil },
	}
	vendors, err := NamedVendors(set, adapters)
	if err != nil {
		t.Fatal(err)
	}
	got, err := WorkerCapabilities(t.Context(), set, vendors, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]allot.VendorCapabilities{
		"api":    paidvendor.HTTPCapabilities,
		"covers": {Lookup: allot.LookupNone, Cost: allot.CostOnTask, Bill: allot.BillNone},
		"llm":    askless{}.Capabilities(),
		"plain":  {Bill: allot.BillNone},
	}
	if len(got) != len(want) {
		t.Fatalf("capabilities of %d vendors, want %d (no default vendor): %+v", len(got), len(want), got)
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("vendor %s: %+v, want %+v", name, got[name], w)
		}
	}
	if got, _ := WorkerCapabilities(t.Context(), set, vendors, &Vendor{}); got[pipeline.DefaultVendor] != paidvendor.HTTPCapabilities {
		t.Errorf("the default vendor: %+v", got[pipeline.DefaultVendor])
	}
	adapters["llm"] = func(string) (paidvendor.Submitter, error) { return batchless{}, nil }
	if vendors, err = NamedVendors(set, adapters); err != nil {
		t.Fatal(err)
	}
	_, err = WorkerCapabilities(t.Context(), set, vendors, nil)
	if allot.ErrorType(err) != allot.VendorNotConfigured || !strings.Contains(err.Error(), "vendor llm") || !strings.Contains(err.Error(), "paidvendor.BatchClient") {
		t.Fatalf("an adapter declaring batches it cannot take: %v", err)
	}
}

// batchless declares batches without taking them.
type batchless struct{ askless }

func (batchless) Capabilities() allot.VendorCapabilities {
	return allot.VendorCapabilities{Batch: true}
}
