package e2e

import (
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/paidvendor/paidvendortest"
)

// Defect (issue 25): on a step parked IdempotencyHorizonPassed, `episode
// lookup` printed `resolve --retry` as next, which the episode refuses.
// Past the horizon a vendor that has nothing under the key may have
// forgotten it: the look-up says so, and its next is the resubmit the
// episode takes; run as printed, it moves the episode on to completion.
func TestLookupPastTheHorizonPrintsACommandTheEpisodeTakes(t *testing.T) {
	c := allottest.NewClusterWithPipelines(t, allottest.PipelinesWithDefaultVendor("idempotency_horizon = \"1s\"\nsend_timeout = \"1s\""))
	s := newStarterEnv(t, c)
	// Every send fails without an answer, slower than the horizon.
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{FailBeforeAccept: 1, Latency: 1200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ep := c.Allocate("auto-paid", monday())
	st := c.WaitStage("auto-paid", ep, allot.StageNeedsAttention)
	if a := st.Attention; a == nil || a.ErrorType != allot.IdempotencyHorizonPassed {
		t.Fatalf("attention %+v", st.Attention)
	}
	if err := c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	out := s.run(remedyFor(t, st, "starter episode lookup"))
	var next string
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "next "); ok {
			next = strings.TrimSpace(rest)
		}
	}
	if want := allot.ResubmitCommand("auto-paid", ep, "video"); next != want {
		t.Fatalf("lookup printed next %q, want %q:\n%s", next, want, out)
	}
	if !strings.Contains(out, "may still have been sent") || strings.Contains(out, "nothing was accepted") {
		t.Fatalf("past the horizon the lookup does not say the step may have been sent:\n%s", out)
	}
	s.run(next)
	if final := c.WaitEpisode("auto-paid", ep); final.Stage != allot.StageCompleted {
		t.Fatalf("after the printed next: %+v", final)
	}
	c.Vendor.AssertAtMostOneChargePerKey(t)
}
