package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"allot"
	"allot/activities"
)

func paidPending(name string) activities.StepState {
	return activities.StepState{Name: name, Kind: "paid", Action: name, Status: allot.StepPending}
}

func TestUnknownOutcomeParksUntilResolved(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(loaded(paidPending("video"), pending("assemble")), nil)
	submits := 0
	env.OnActivity(a.SubmitPaidTask, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PaidTaskInput) (activities.PaidTaskResult, error) {
			submits++
			if submits == 1 {
				return activities.PaidTaskResult{}, temporal.NewNonRetryableApplicationError("vendor cannot tell", allot.OutcomeUnknown, nil)
			}
			return activities.PaidTaskResult{Step: "video", State: "submitted", RemoteRef: "vt_0123456789abcdef"}, nil
		})
	env.OnActivity(a.AwaitPaidTask, mock.Anything, mock.Anything).Return(
		activities.PaidTaskResult{Step: "video", State: "succeeded", RemoteRef: "vt_0123456789abcdef", SHA256: "ab", CostAmount: 250, CostCurrency: "USD"}, nil)
	var decided activities.DecisionInput
	env.OnActivity(a.ApplyDecision, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DecisionInput) (activities.DecisionResult, error) {
			decided = in
			return activities.DecisionResult{Action: in.Action, Step: "video", Steps: []activities.StepState{
				{Name: "video", Kind: "paid", Status: "submitted", RemoteRef: "vt_0123456789abcdef"}, pending("assemble"),
			}}, nil
		})
	env.OnActivity(a.RunLocalStep, mock.Anything, mock.Anything).Return(activities.StepState{Name: "assemble", Kind: "local", Status: allot.StepCompleted}, nil)
	env.OnActivity(a.CompleteEpisode, mock.Anything, mock.Anything).Return(nominal(), nil)

	var parked EpisodeState
	resolved := false
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(StateQuery)
		if err != nil || v.Get(&parked) != nil {
			t.Errorf("query: %v", err)
		}
		// A second submission never happens while parked.
		if submits != 1 {
			t.Errorf("submitted %d times while parked", submits)
		}
		env.UpdateWorkflow(ResolveUpdate, "resolve-1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("resolve rejected: %v", err) },
			OnComplete: func(_ any, err error) { resolved = err == nil },
		}, DecisionRequest{Step: "video", Resolve: allot.ActionAdopt, RemoteRef: "vt_0123456789abcdef", Reason: "seen in console", By: "alice"})
	}, 6*time.Hour)

	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	var res EpisodeResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if parked.Stage != allot.StageNeedsAttention || parked.Attention == nil || parked.Attention.ErrorType != allot.OutcomeUnknown || parked.Attention.Step != "video" {
		t.Fatalf("parked state %+v", parked)
	}
	if !resolved || decided.Action != allot.ActionAdopt || decided.RemoteRef != "vt_0123456789abcdef" || decided.Reason != "seen in console" || decided.RequestID != "resolve-1" || decided.By != "alice" {
		t.Fatalf("resolved %v, decision %+v", resolved, decided)
	}
	if res.Stage != allot.StageCompleted || res.Attention != nil || res.Steps[0].RemoteRef != "vt_0123456789abcdef" || res.Steps[0].CostAmount != 250 {
		t.Fatalf("result %+v", res)
	}
}

func TestApprovalGateWaitsForOperator(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(loaded(
		activities.StepState{Name: "approve", Kind: "approval", Status: allot.StepPending}, pending("publish")), nil)
	var decidedBy string
	env.OnActivity(a.ApplyDecision, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DecisionInput) (activities.DecisionResult, error) {
			decidedBy = in.By
			status := allot.StepApproved
			if in.Action == allot.ActionReject {
				status = allot.StepRejected
			}
			return activities.DecisionResult{Action: in.Action, Step: "approve", Steps: []activities.StepState{
				{Name: "approve", Kind: "approval", Status: status}, pending("publish"),
			}}, nil
		})
	published := false
	env.OnActivity(a.RunLocalStep, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.RunLocalStepInput) (activities.StepState, error) {
			published = true
			return activities.StepState{Name: "publish", Kind: "local", Status: allot.StepCompleted}, nil
		})
	var waiting EpisodeState
	var rejectErr error
	env.RegisterDelayedCallback(func() {
		v, _ := env.QueryWorkflow(StateQuery)
		_ = v.Get(&waiting)
		env.UpdateWorkflow(RejectUpdate, "reject-1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("reject rejected: %v", err) },
			OnComplete: func(_ any, err error) { rejectErr = err },
		}, DecisionRequest{Reason: "off-brand", By: "bob"})
	}, 24*time.Hour)
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	var res EpisodeResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if waiting.Stage != allot.StageWaitingApproval || rejectErr != nil || decidedBy != "bob" {
		t.Fatalf("waiting state %+v, reject error %v, decided by %q (want bob)", waiting, rejectErr, decidedBy)
	}
	if res.Stage != allot.StageRejected || published {
		t.Fatalf("after reject: stage %s, published %v", res.Stage, published)
	}
}

func TestApproveWhenNotAtGateIsNotReady(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(loaded(pending("publish")), nil)
	env.OnActivity(a.RunLocalStep, mock.Anything, mock.Anything).Return(activities.StepState{Name: "publish", Kind: "local", Status: allot.StepCompleted}, nil).After(time.Hour)
	env.OnActivity(a.CompleteEpisode, mock.Anything, mock.Anything).Return(nominal(), nil)
	var got error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(ApproveUpdate, "approve-1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { got = err },
			OnComplete: func(_ any, err error) { got = err },
		}, DecisionRequest{})
	}, time.Minute)
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var appErr *temporal.ApplicationError
	if !errors.As(got, &appErr) || appErr.Type() != allot.NotReady {
		t.Fatalf("approve without a gate: %v, want %s", got, allot.NotReady)
	}
}

func TestMalformedResolveIsRejectedByValidator(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(loaded(pending("publish")), nil)
	env.OnActivity(a.RunLocalStep, mock.Anything, mock.Anything).Return(activities.StepState{Name: "publish", Kind: "local", Status: allot.StepCompleted}, nil).After(time.Hour)
	env.OnActivity(a.CompleteEpisode, mock.Anything, mock.Anything).Return(nominal(), nil)
	var rejected []error
	for i, req := range []DecisionRequest{
		{Resolve: allot.ActionResubmit},               // no step
		{Step: "video", Resolve: allot.ActionAdopt},   // no reference
		{Step: "video", Resolve: allot.ActionAbandon}, // no reason
		{Step: "video", Resolve: "retry-blindly"},     // unknown way
	} {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(ResolveUpdate, "bad-"+string(rune('a'+i)), &testsuite.TestUpdateCallback{
				OnReject:   func(err error) { rejected = append(rejected, err) },
				OnComplete: func(any, error) { t.Errorf("malformed resolve %+v was accepted", req) },
			}, req)
		}, time.Minute)
	}
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	if len(rejected) != 4 {
		t.Fatalf("rejected %d malformed resolves, want 4", len(rejected))
	}
	for _, err := range rejected {
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != allot.InvalidInput {
			t.Fatalf("rejection %v, want type %s", err, allot.InvalidInput)
		}
	}
}

// A rejection without a reason is refused by the validator, whoever sends
// it (the starter and the page ask for one first), before anything enters
// history.
func TestRejectWithoutAReasonIsRefusedByValidator(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(loaded(
		activities.StepState{Name: "approve", Kind: "approval", Status: allot.StepPending}, pending("publish")), nil)
	var rejected []error
	for i, reason := range []string{"", "  \t"} {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(RejectUpdate, "reject-"+string(rune('a'+i)), &testsuite.TestUpdateCallback{
				OnReject:   func(err error) { rejected = append(rejected, err) },
				OnComplete: func(any, error) { t.Errorf("reject with reason %q was accepted", reason) },
			}, DecisionRequest{Reason: reason, By: "bob"})
		}, time.Hour)
	}
	env.RegisterDelayedCallback(env.CancelWorkflow, 2*time.Hour)
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	if len(rejected) != 2 {
		t.Fatalf("refused %d rejections without a reason, want 2", len(rejected))
	}
	for _, err := range rejected {
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != allot.InvalidInput || !strings.Contains(err.Error(), "reject needs a reason: --reason TEXT") {
			t.Fatalf("refusal %v, want type %s naming --reason", err, allot.InvalidInput)
		}
	}
}
