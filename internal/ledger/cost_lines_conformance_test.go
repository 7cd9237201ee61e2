package ledger

import (
	"errors"
	"slices"
	"testing"
	"time"

	"allot"
)

// testCostLines: the costs recorded in the window, oldest first, each with
// its task, its vendor from the pinned plan ("default" where it names
// none) and the budgets holding it; a pipeline filter keeps its own.
func testCostLines(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	ep := alloc(t, l, "weekly", "k1", "2026-W32", 0).Episode
	if _, err := l.PinPlan(ctx, "weekly", ep.ID, billPlan); err != nil {
		t.Fatal(err)
	}
	other := alloc(t, l, "daily", "k2", "2026-08-03", 0).Episode
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	reserved := paidRef(ep, "video", 0)
	mustReserve(t, l, reserved, usd("video-weekly", "2026-W32", 10_000, 250))
	for _, c := range []struct {
		r      PaidTaskRef
		ref    string
		amount int64
		at     time.Time
	}{
		{reserved, "vt_video", 240, at(2)},
		{paidRef(ep, "cover", 0), "vt_cover", 40, at(1)},
		{paidRef(other, "render", 0), "vt_daily", 7, at(3)},
		{paidRef(ep, "video", 1), "vt_old", 999, at(-5)},
	} {
		if c.r != reserved {
			mustIntent(t, l, c.r)
		}
		mustSubmitMoney(t, l, c.r, c.ref, allot.Money{Amount: c.amount, Currency: "USD"})
		rawExec(t, l, `UPDATE cost_entries SET recorded_at = ? WHERE remote_ref = ?`, l.d.timeArg(c.at), c.ref)
	}
	got, err := l.CostLines(ctx, "", t0, at(4))
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, c := range got {
		refs = append(refs, c.RemoteRef)
	}
	if !slices.Equal(refs, []string{"vt_cover", "vt_video", "vt_daily"}) {
		t.Fatalf("CostLines = %v, want the window's costs oldest first", refs)
	}
	cover, video := got[0], got[1]
	if cover.Vendor != "default" || cover.Amount != 40 || cover.Currency != "USD" || !cover.RecordedAt.Equal(at(1)) || len(cover.Budgets) != 0 ||
		video.Vendor != "acme" || !slices.Equal(video.Budgets, []string{"video-weekly"}) || video.PaidTaskRef != reserved {
		t.Fatalf("CostLines: cover %+v, video %+v", cover, video)
	}
	if weekly, err := l.CostLines(ctx, "weekly", t0, at(4)); err != nil || len(weekly) != 2 {
		t.Fatalf("CostLines of weekly = %+v, %v", weekly, err)
	}
	if _, err := l.CostLines(ctx, "", at(4), t0); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("a reversed window: %v", err)
	}
}
