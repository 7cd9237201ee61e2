package activities

import (
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/pipelinetest"
	"allot/pipeline"
)

// wholePipelines: weekly's two paid steps (video, then cover, 250 USD
// cents each at most, on the simulated vendor at 250) under one weekly
// budget of 1,000: two whole episodes a week.
var wholePipelines = pipelinetest.Budgeted{Budget: "media-weekly",
	Then: []pipelinetest.Step{{Name: "cover", Kind: "paid", Action: "cover", MaxCost: 250}}}.TOML()

// An episode is paid for whole, or not at all (issue 24 §3): a backfill of
// six runs into a week that pays for two reached every video step first;
// per-step admission paid four videos and parked four covers (no episode
// whole). Reserved together at the first paid step, two episodes are
// admitted whole and four park with nothing paid, and the raise a parked
// episode names admits all of it.
func TestABudgetNeverPaysForHalfAnEpisode(t *testing.T) {
	f := newFixture(t, nil)
	set, err := pipeline.Parse([]byte(wholePipelines), "whole_episode_test")
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Pipelines = set
	sim, _, _ := withVendor(t, f)
	nominal := time.Date(2026, 8, 3, 9, 0, 0, 0, time.UTC) // 2026-W32
	const week = "2026-W32"
	submit := func(ep, step string) (PaidTaskResult, error) {
		return execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, PaidTaskInput{Pipeline: "weekly", EpisodeID: ep, Step: step})
	}
	spend := func() ledger.BudgetPeriod {
		bp, err := f.led.BudgetPeriodOf(f.ctx, ledger.BudgetLimit{Budget: "media-weekly", Currency: "USD", Limit: 1000}, week)
		if err != nil {
			t.Fatal(err)
		}
		return bp
	}
	var eps []string
	for i := range 6 {
		eps = append(eps, f.mustAllocate(t, "weekly", "run-"+string(rune('a'+i)), nominal.Add(time.Duration(i)*time.Hour)).EpisodeID)
	}
	// Every episode reaches its video step first.
	var parked []ParkDetails
	for i, ep := range eps {
		_, err := submit(ep, "video")
		if i < 2 {
			if err != nil {
				t.Fatalf("episode %d's video: %v", i, err)
			}
			continue
		}
		parked = append(parked, parkDetails(t, err))
	}
	// The two admitted episodes hold their covers; nothing else is held.
	if bp := spend(); bp.Settled != 500 || bp.Reserved != 500 {
		t.Fatalf("after the videos: %+v, want 500 settled (two videos) and 500 reserved (their covers)", bp)
	}
	for _, d := range parked {
		if len(d.Budgets) != 1 || d.Budgets[0].Asked != 500 {
			t.Fatalf("a parked episode asks %+v, want the whole episode's 500", d.Budgets)
		}
	}
	for _, ep := range eps[:2] {
		if _, err := submit(ep, "cover"); err != nil {
			t.Fatalf("the cover of an admitted episode: %v", err)
		}
	}
	if bp := spend(); bp.Settled != 1000 || bp.Reserved != 0 {
		t.Fatalf("after the covers: %+v, want 1,000 settled", bp)
	}
	if n := sim.ChargeCount(); n != 4 {
		t.Fatalf("the vendor charged %d tasks, want 4 (two whole episodes)", n)
	}
	// The raise a parked episode names admits all of it: both its steps.
	need := parked[0].Budgets[0].Needed()
	if _, _, err := f.led.RaiseBudget(f.ctx, ledger.BudgetRaise{RequestID: "r1", Budget: "media-weekly", Period: week, Limit: need, Currency: "USD", Reason: "one more", By: "t"}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"video", "cover"} {
		if _, err := submit(eps[2], step); err != nil {
			t.Fatalf("after the raise to %d, episode 2's %s: %v", need, step, err)
		}
	}
	if _, err := submit(eps[3], "video"); err == nil {
		t.Fatal("episode 3 was admitted past the raised limit")
	}
	for _, ep := range eps[3:] {
		for _, step := range []string{"video", "cover"} {
			if task, err := f.led.LatestPaidTask(f.ctx, "weekly", ep, step); err == nil && task.RemoteRef != "" {
				t.Fatalf("episode %s's %s was sent: %+v", ep, step, task)
			}
		}
	}
}

// The later step's own turn takes over what the first reserved: a lower
// price (a quote) frees the rest; a rejected or completed episode gives
// back what its unsent steps held.
func TestLaterStepsHoldTheirReservationUntilTheirTurn(t *testing.T) {
	f := newFixture(t, nil)
	set, err := pipeline.Parse([]byte(wholePipelines), "whole_episode_test")
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Pipelines = set
	withVendor(t, f)
	nominal := time.Date(2026, 8, 3, 9, 0, 0, 0, time.UTC)
	a := f.mustAllocate(t, "weekly", "run-a", nominal).EpisodeID
	b := f.mustAllocate(t, "weekly", "run-b", nominal.Add(time.Hour)).EpisodeID
	for _, ep := range []string{a, b} {
		if _, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, PaidTaskInput{Pipeline: "weekly", EpisodeID: ep, Step: "video"}); err != nil {
			t.Fatal(err)
		}
	}
	cover := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: a, Step: "cover"}
	task, err := f.led.PaidTask(f.ctx, cover)
	if err != nil || task.State != allot.PaidPlanned {
		t.Fatalf("the later step's task: %+v, %v; want planned, reserved with the video", task, err)
	}
	entries, err := f.led.TaskBudgetEntries(f.ctx, cover)
	if err != nil || len(entries) != 1 || entries[0].State != ledger.EntryHeld || entries[0].Reserved != 250 {
		t.Fatalf("the later step's entries: %+v, %v", entries, err)
	}
	// A rejected episode runs no later step: its cover's 250 comes back.
	if err := f.led.RecordEpisodeOutcome(f.ctx, "weekly", b, allot.OutcomeRejected, allot.ReasonApprovalRejected, time.Time{}); err != nil {
		t.Fatal(err)
	}
	bp, err := f.led.BudgetPeriodOf(f.ctx, ledger.BudgetLimit{Budget: "media-weekly", Currency: "USD", Limit: 1000}, "2026-W32")
	if err != nil || bp.Reserved != 250 || bp.Settled != 500 {
		t.Fatalf("after b was rejected: %+v, %v; want only a's cover (250) reserved", bp, err)
	}
	// A completed episode holds nothing for a step it did not send.
	if _, err := f.led.CompleteEpisode(f.ctx, "weekly", a, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if bp, err = f.led.BudgetPeriodOf(f.ctx, ledger.BudgetLimit{Budget: "media-weekly", Currency: "USD", Limit: 1000}, "2026-W32"); err != nil || bp.Reserved != 0 {
		t.Fatalf("after a completed: %+v, %v; want nothing reserved", bp, err)
	}
}
