package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledgertest"
)

// AcknowledgeOutside records each open charge outside a period's records
// once, with who and why; a request without a reason, or for a period
// with nothing left open, is refused and writes nothing.
func TestAcknowledgeOutsideRecordsEachOpenChargeOnce(t *testing.T) {
	l, _ := budgetLedger(t)
	ctx := context.Background()
	l.ChargeWithoutReservation("weekly", mon.Add(10*time.Hour), "vt_early", 300)
	l.ChargeWithoutReservation("weekly", mon.Add(11*time.Hour), "vt_late", 300)
	set := ledgertest.BudgetPipelines(t)
	in := AcknowledgeInput{Pipelines: set, Budget: "video-weekly", Period: "2026-W32", By: "carol"}
	for _, bad := range []AcknowledgeInput{in, {Pipelines: set, Budget: "video-weekly", Period: "2026-13", Reason: "r"}, {Pipelines: set, Budget: "nosuch", Period: "2026-W32", Reason: "r"}} {
		if _, err := AcknowledgeOutside(ctx, l.led, bad); !isType(err, allot.InvalidInput) {
			t.Fatalf("%+v: %v, want InvalidInput", bad, err)
		}
	}
	if acks, err := l.led.ChargeAcks(ctx, ""); err != nil || len(acks) != 0 {
		t.Fatalf("refused requests wrote %+v, %v", acks, err)
	}
	in.Reason = "sent before the budget covered video"
	res, err := AcknowledgeOutside(ctx, l.led, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Acknowledged) != 2 || res.Acknowledged[0].By != "carol" || res.Acknowledged[0].Reason != in.Reason || res.Acknowledged[0].Amount != 300 ||
		res.Outside.OpenCount != 0 || res.Outside.Acknowledged != 600 {
		t.Fatalf("AcknowledgeOutside = %+v", res)
	}
	_, err = AcknowledgeOutside(ctx, l.led, in)
	if !isType(err, allot.InvalidInput) || !strings.Contains(err.Error(), allot.BudgetShowCommand("video-weekly", "2026-W32")) {
		t.Fatalf("a second acknowledgement: %v, want refused naming budget show", err)
	}
	if acks, _ := l.led.ChargeAcks(ctx, ""); len(acks) != 2 {
		t.Fatalf("acknowledgements after a refused second request: %+v", acks)
	}
}
