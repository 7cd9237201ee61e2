package ledger

import (
	"errors"
	"testing"
	"time"

	"allot"
)

// testChargesOutsideBudget: the costs of a period's episodes that hold no
// entry in the budget are listed (of the pipelines asked, in the period's
// bounds), a reserved one is not; an acknowledgement needs a name and a
// reason, the first one stands, and it is listed with its charge.
func testChargesOutsideBudget(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	ep := alloc(t, l, "weekly", "k1", "2026-W32", 0).Episode
	ep2 := alloc(t, l, "weekly", "k2", "2026-W32", 0).Episode
	other := alloc(t, l, "daily", "k3", "2026-08-03", 0).Episode
	dollars := func(amount int64) allot.Money { return allot.Money{Amount: amount, Currency: "USD"} }
	reserved := paidRef(ep, "video", 0)
	mustReserve(t, l, reserved, usd("video-weekly", "2026-W32", 10_000, 250))
	mustSubmitMoney(t, l, reserved, "vt-reserved", dollars(250))
	for ref, r := range map[string]PaidTaskRef{"vt-cover": paidRef(ep, "cover", 0), "vt-early": paidRef(ep2, "video", 0), "vt-daily": paidRef(other, "video", 0)} {
		mustIntent(t, l, r)
		mustSubmitMoney(t, l, r, ref, dollars(40))
	}
	from, to := t0.Add(-time.Hour), t0.Add(time.Hour)
	got, err := l.ChargesOutsideBudget(ctx, "video-weekly", "2026-W32", []string{"weekly"}, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].PaidTaskRef != paidRef(ep, "cover", 0) || got[1].PaidTaskRef != paidRef(ep2, "video", 0) ||
		got[0].Amount != 40 || got[0].Currency != "USD" || got[0].RemoteRef != "vt-cover" || got[0].Imported || got[0].Ack != nil {
		t.Fatalf("outside video-weekly 2026-W32: %+v", got)
	}
	if all, err := l.ChargesOutsideBudget(ctx, "video-weekly", "2026-W32", nil, from, to); err != nil || len(all) != 3 {
		t.Fatalf("every pipeline's: %d, %v; want the daily one too", len(all), err)
	}
	if none, err := l.ChargesOutsideBudget(ctx, "video-weekly", "2026-W32", nil, to, to.Add(time.Hour)); err != nil || len(none) != 0 {
		t.Fatalf("a window without episodes: %+v, %v", none, err)
	}

	ack := ChargeAck{Budget: "video-weekly", Period: "2026-W32", PaidTaskRef: got[0].PaidTaskRef, Amount: 40, Currency: "USD", By: "alice", Reason: "sent before the budget covered covers"}
	for _, bad := range []ChargeAck{{Budget: ack.Budget, Period: ack.Period, PaidTaskRef: ack.PaidTaskRef, By: "alice"}, {Budget: ack.Budget, Period: ack.Period, PaidTaskRef: ack.PaidTaskRef, Reason: "r"}} {
		if _, err := l.AcknowledgeCharges(ctx, []ChargeAck{ack, bad}, t0); !errors.Is(err, ErrInvalidInput) {
			t.Fatalf("an acknowledgement without a name or a reason: %v", err)
		}
	}
	if acks, err := l.ChargeAcks(ctx, ""); err != nil || len(acks) != 0 {
		t.Fatalf("a refused acknowledgement wrote %+v, %v", acks, err)
	}
	if rec, err := l.AcknowledgeCharges(ctx, []ChargeAck{ack}, t0); err != nil || len(rec) != 1 {
		t.Fatalf("AcknowledgeCharges = %+v, %v", rec, err)
	}
	again := ack
	again.By, again.Reason = "bob", "another reason"
	if rec, err := l.AcknowledgeCharges(ctx, []ChargeAck{again}, t0.Add(time.Minute)); err != nil || len(rec) != 0 {
		t.Fatalf("a second acknowledgement of the same charge = %+v, %v; want none recorded", rec, err)
	}
	got, err = l.ChargesOutsideBudget(ctx, "video-weekly", "2026-W32", []string{"weekly"}, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if a := got[0].Ack; a == nil || a.By != "alice" || a.Reason != ack.Reason || !a.At.Equal(t0) || a.Amount != 40 || got[1].Ack != nil {
		t.Fatalf("after the acknowledgement: %+v %+v", got[0].Ack, got[1].Ack)
	}
	if other, err := l.ChargesOutsideBudget(ctx, "vendor-monthly", "2026-08", []string{"weekly"}, from, to); err != nil || len(other) != 3 || other[1].Ack != nil {
		t.Fatalf("another budget's view: %+v, %v (an acknowledgement is per budget)", other, err)
	}
	if acks, err := l.ChargeAcks(ctx, "video-weekly"); err != nil || len(acks) != 1 || acks[0].By != "alice" || acks[0].PaidTaskRef != ack.PaidTaskRef {
		t.Fatalf("ChargeAcks = %+v, %v", acks, err)
	}
}
