package report

import (
	"context"
	"testing"

	"allot"
	"allot/internal/ledger"
)

// Show gives the kind of each step of the episode's pinned plan, so that
// an effect step's task is shown as an effect, not as a paid step (issue
// 15).
func TestShowGivesEachStepsKindFromThePinnedPlan(t *testing.T) {
	l := newTestLedger(t)
	ctx := context.Background()
	ep := l.Allocate("weekly", mon)
	if _, err := l.led.PinPlan(ctx, "weekly", ep.ID, `[{"name":"video","kind":"paid"},{"name":"notify","kind":"effect","vendor":"outbox"}]`); err != nil {
		t.Fatal(err)
	}
	if _, err := l.led.WriteIntent(ctx, ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: ep.ID, Step: "notify"}, "key-notify", "test"); err != nil {
		t.Fatal(err)
	}
	show, err := Show(ctx, l.led, nil, "weekly", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if show.StepKinds["notify"] != allot.KindEffect || show.StepKinds["video"] != allot.KindPaid || len(show.PaidTasks) != 1 {
		t.Fatalf("show: kinds %v, tasks %+v", show.StepKinds, show.PaidTasks)
	}
}
