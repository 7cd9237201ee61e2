package ledger

import (
	"math"
	"testing"

	"allot"
)

// testCostBound: a vendor (or an operator's adopt) reporting a cost above
// allot.MaxAmount is refused with nothing written, so that no total of the
// ledger can overflow; the bound itself is a cost. (Registered in
// runConformance.)
func testCostBound(t *testing.T, l *Ledger) {
	ep := alloc(t, l, "weekly", "k", "2026-W32", 0).Episode
	r := paidRef(ep, "render", 0)
	mustIntent(t, l, r)
	before := dumpTables(t, l)
	for _, amount := range []int64{allot.MaxAmount + 1, math.MaxInt64} {
		_, err := l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: r, RemoteRef: "vr-1", Amount: amount, Currency: "USD"})
		wantErr(t, "a submission above the bound", err, ErrInvalidInput, "above the bound of 10000000000.00 USD", "nothing was written")
	}
	mustBeUnchanged(t, l, "a submission above the bound", before)
	req := adoptReq(ep, "render", "adopt-absurd", "vr-1", 0)
	req.Adopted = Submission{RemoteRef: "vr-1", Amount: allot.MaxAmount + 1, Currency: "USD"}
	_, _, err := l.Decide(ctxT(t), req)
	wantErr(t, "an adopt above the bound", err, ErrInvalidInput)
	mustBeUnchanged(t, l, "an adopt above the bound", before)

	mustSubmitMoney(t, l, r, "vr-1", allot.Money{Amount: allot.MaxAmount, Currency: "USD"})
	if cs := mustCosts(t, l, "weekly", ""); len(cs) != 1 || cs[0].Amount != allot.MaxAmount {
		t.Fatalf("costs %+v, want one at the bound", cs)
	}
}

func mustSubmitMoney(t *testing.T, l *Ledger, r PaidTaskRef, remote string, m allot.Money) {
	t.Helper()
	if _, err := l.RecordSubmission(ctxT(t), Submission{PaidTaskRef: r, RemoteRef: remote, Amount: m.Amount, Currency: m.Currency}); err != nil {
		t.Fatalf("RecordSubmission(%+v, %s, %s): %v", r, remote, m, err)
	}
}
