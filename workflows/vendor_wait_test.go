package workflows

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"allot"
	"allot/activities"
)

func vendorWaiting(reason string) error {
	return temporal.NewApplicationErrorWithOptions("vendor default is paused by alice: bills twice", allot.VendorWaiting, temporal.ApplicationErrorOptions{
		NextRetryDelay: 5 * time.Second,
		Details:        []any{activities.VendorWait{Vendor: "default", Reason: reason, Message: "vendor default is paused by alice: bills twice"}},
	})
}

// A step whose vendor takes no request shows waiting_vendor with the
// reason (state query, current details, the ledger's outcome), uses up no
// attempts and never shows as retrying, and goes on by itself when the
// vendor takes requests again.
func TestVendorWaitIsAStageNotAFailure(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(Episode)
	env.RegisterActivity(a)
	var outcomeAttrs []string
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(OutcomeAttr); ok {
			outcomeAttrs = append(outcomeAttrs, v)
		}
	}).Return(nil)
	var outcomes []activities.EpisodeOutcomeInput
	env.OnActivity(a.RecordEpisodeOutcome, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EpisodeOutcomeInput) error {
			outcomes = append(outcomes, in)
			return nil
		})
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(loaded(paidPending("video"), pending("assemble")), nil)
	resumed, submits := false, 0
	env.OnActivity(a.SubmitPaidTask, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PaidTaskInput) (activities.PaidTaskResult, error) {
			submits++
			if !resumed {
				return activities.PaidTaskResult{}, vendorWaiting(allot.ReasonVendorPaused)
			}
			return activities.PaidTaskResult{Step: "video", State: "submitted", RemoteRef: "vt_0123456789abcdef"}, nil
		})
	env.OnActivity(a.AwaitPaidTask, mock.Anything, mock.Anything).Return(
		activities.PaidTaskResult{Step: "video", State: "succeeded", RemoteRef: "vt_0123456789abcdef", SHA256: "ab"}, nil)
	env.OnActivity(a.RunLocalStep, mock.Anything, mock.Anything).Return(activities.StepState{Name: "assemble", Kind: "local", Status: allot.StepCompleted}, nil)
	env.OnActivity(a.CompleteEpisode, mock.Anything, mock.Anything).Return(nominal(), nil)
	var waiting EpisodeState
	var waitedSubmits int
	// Six hours of pause: far beyond what retry batches would allow.
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(StateQuery)
		if err != nil || v.Get(&waiting) != nil {
			t.Errorf("query: %v", err)
		}
		waitedSubmits = submits
		resumed = true
	}, 6*time.Hour)
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	var res EpisodeResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if waiting.Stage != allot.StageWaitingVendor || waiting.Waiting == nil || waiting.Waiting.Reason != allot.ReasonVendorPaused ||
		waiting.Waiting.Vendor != "default" || waiting.Waiting.Step != "video" || waiting.Retrying != nil || waiting.Attention != nil {
		t.Fatalf("while paused: %+v (waiting %+v)", waiting, waiting.Waiting)
	}
	if waitedSubmits < 10 {
		t.Fatalf("the gate was asked %d times in six hours: the wait must keep asking", waitedSubmits)
	}
	if res.Stage != allot.StageCompleted || res.Waiting != nil || res.Steps[0].RemoteRef != "vt_0123456789abcdef" {
		t.Fatalf("after resume: %+v", res)
	}
	if !slices.Contains(outcomeAttrs, string(allot.OutcomeWaitingVendor)) || slices.Contains(outcomeAttrs, string(allot.OutcomeRetrying)) {
		t.Fatalf("AllotOutcome was set to %q, want %q among them and never retrying", outcomeAttrs, allot.OutcomeWaitingVendor)
	}
	var seen []string
	for _, o := range outcomes {
		seen = append(seen, string(o.Outcome)+"/"+o.Reason)
		if o.Outcome == allot.OutcomeRetrying {
			t.Fatalf("a vendor wait was shown as retrying: %v", seen)
		}
	}
	want := []string{"running/in_progress", "waiting_vendor/vendor_paused", "running/in_progress", "completed/steps_completed"}
	if len(seen) != len(want) {
		t.Fatalf("outcomes %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("outcomes %v, want %v", seen, want)
		}
	}
}
