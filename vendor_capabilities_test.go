package allot_test

import (
	"slices"
	"strings"
	"testing"

	"allot"
)

// Each capability changes what allot promises, in words an operator reads
// (`starter vendor show`); the issue's own sentence is the one for a
// vendor that cannot be asked.
func TestPromisesSayWhatEachCapabilityMeans(t *testing.T) {
	askless := allot.VendorCapabilities{Lookup: allot.LookupNone, Cost: allot.CostFromUsage, Bill: allot.BillNone}
	api := allot.VendorCapabilities{IdempotencyKey: true, Lookup: allot.LookupByKey, Batch: true, Cost: allot.CostOnTask, Bill: allot.BillPerTask}
	has := func(c allot.VendorCapabilities, want string) bool {
		return slices.ContainsFunc(c.Promises(), func(s string) bool { return strings.Contains(s, want) })
	}
	for _, tc := range []struct {
		c    allot.VendorCapabilities
		want string
	}{
		{askless, "a lost response parks the episode for a person: this vendor cannot be asked whether it ran the request"},
		{askless, "only a person's resubmit sends one again"},
		{askless, "computed by the adapter from the usage the vendor reports"},
		{askless, "allot reads no bill of this vendor"},
		{askless, "no batches"},
		{api, "looked up by allot's idempotency key"},
		{api, "returns the first task: the vendor does not run it twice"},
		{api, "the bill is reconciled line by line"},
		{api, "batch steps can send their items in the vendor's batches"},
		{api, "the vendor's own figure"},
		{allot.VendorCapabilities{}, "the adapter does not say how a lost response is found again"},
		{allot.VendorCapabilities{Lookup: allot.LookupByList}, "listing the vendor's recent tasks"},
		{allot.VendorCapabilities{Cancel: true}, "can be cancelled"},
	} {
		if !has(tc.c, tc.want) {
			t.Errorf("%+v: no promise says %q:\n%s", tc.c, tc.want, strings.Join(tc.c.Promises(), "\n"))
		}
	}
	if n := len(askless.Promises()); n != 6 {
		t.Errorf("%d promises, want one per capability (6)", n)
	}
	if !askless.CannotBeAsked() || api.CannotBeAsked() || (allot.VendorCapabilities{}).CannotBeAsked() {
		t.Error("CannotBeAsked is true only for a vendor that declares no look-up")
	}
}

// A value outside allot's words is refused, naming the field and the words
// it takes; the ledger's JSON reads back what was written.
func TestCapabilitiesCheckAndRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		c    allot.VendorCapabilities
		want string
	}{
		{allot.VendorCapabilities{Lookup: "maybe"}, `lookup "maybe": give "key", "list" or "none"`},
		{allot.VendorCapabilities{Cost: "bill"}, `cost "bill": give "task" or "usage"`},
		{allot.VendorCapabilities{Bill: "daily"}, `bill "daily": give "task" or "none"`},
	} {
		err := tc.c.Check()
		if allot.ErrorType(err) != allot.VendorNotConfigured || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Check = %v, want VendorNotConfigured saying %q", tc.c, err, tc.want)
		}
	}
	c := allot.VendorCapabilities{IdempotencyKey: true, Lookup: allot.LookupByList, Cancel: true, Batch: true, Cost: allot.CostFromUsage, Bill: allot.BillPerTask}
	s, err := allot.MarshalCapabilities(c)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := allot.UnmarshalCapabilities(s); err != nil || back != c {
		t.Fatalf("round trip: %+v, %v; want %+v", back, err, c)
	}
	if _, err := allot.UnmarshalCapabilities(`{"lookup":"maybe"}`); allot.ErrorType(err) != allot.VendorNotConfigured {
		t.Fatalf("a stored word that is not allot's: %v", err)
	}
}
