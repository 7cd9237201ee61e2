package e2e

import (
	"strings"
	"testing"

	"allot"
	"allot/internal/allottest"
	"allot/internal/operator"
	"allot/pipeline"
	"allot/workflows"
)

// Issue 24 §1: a step waiting for a vendor that never comes back has an
// exit. With the vendor paused for good, the operator's resolve --abandon
// (what `starter episode resolve --abandon` sends) ends each waiting step
// with its reason, and the episode completes without the vendor ever being
// asked. Before, it answered "wait until it finishes or parks".
func TestAbandonEndsTheWaitForAVendorThatNeverComesBack(t *testing.T) {
	c := allottest.NewCluster(t)
	ctx := c.Ctx()
	if _, err := operator.PauseVendor(ctx, c.Ledger, c.Pipelines, operator.VendorPauseInput{Name: pipeline.DefaultVendor, Reason: "gone for good", By: "oncall"}); err != nil {
		t.Fatal(err)
	}
	ep := c.Allocate("auto-paid", monday())
	s := newStarterEnv(t, c)
	reasons := map[string]string{}
	for _, step := range []string{"video", "cover"} {
		st := c.WaitState("auto-paid", ep, "a wait for step "+step+"'s vendor", func(st workflows.EpisodeState) bool {
			return st.Stage == allot.StageWaitingVendor && st.Waiting != nil && st.Waiting.Step == step
		})
		switch step {
		case "video":
			// The exit the wait prints, run as printed.
			if !strings.HasPrefix(st.Waiting.Remedy, allot.AbandonCommand("auto-paid", ep, step, "")[:40]) {
				t.Fatalf("the wait prints %q, want the step's abandon command", st.Waiting.Remedy)
			}
			s.run(st.Waiting.Remedy)
			reasons[step] = "vendor default does not come back"
		case "cover":
			// docs/steps-and-vendors.md's command, on this episode.
			doc := `starter episode resolve --pipeline weekly-video --episode 2026-W32-0 --step video --abandon --reason "vendor gone"`
			s.run(strings.NewReplacer("weekly-video", "auto-paid", "2026-W32-0", ep, "--step video", "--step cover").Replace(doc))
			reasons[step] = "vendor gone"
		}
	}
	if final := c.WaitEpisode("auto-paid", ep); final.Stage != allot.StageCompleted {
		t.Fatalf("after the abandons: %+v", final)
	}
	for _, step := range []string{"video", "cover"} {
		task, err := c.Ledger.LatestPaidTask(ctx, "auto-paid", ep, step)
		if err != nil || task.State != allot.PaidAbandoned || task.Error != reasons[step] {
			t.Fatalf("step %s in the ledger: %+v, %v; want abandoned with %q", step, task, err, reasons[step])
		}
	}
	// The pause is of sends (no --polls): no task may have been sent. A
	// look-up or poll would be allowed; none is expected either, and any
	// is named, so that a run that sees one says which.
	reqs := c.Vendor.Requests()
	for _, r := range reqs {
		if strings.HasPrefix(r, "POST ") {
			t.Fatalf("the paused vendor got a send, %q, among its requests %q", r, reqs)
		}
	}
	if len(reqs) > 0 {
		t.Logf("the paused vendor got look-ups or polls, which a pause of sends lets through: %q", reqs)
	}
	c.MustCheck()
}
