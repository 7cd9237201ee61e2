package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/activities"
)

func loaded(steps ...activities.StepState) activities.LoadEpisodeResult {
	return activities.LoadEpisodeResult{
		Pipeline: "weekly-video", EpisodeID: "2026-W32-1", Period: "2026-W32", Sequence: 1,
		Key: "weekly-video/scheduled-2026-08-03T02:00:00Z", NominalTime: nominal(), Status: "allocated", Steps: steps,
	}
}

func pending(name string) activities.StepState {
	return activities.StepState{Name: name, Kind: "local", Action: name, Status: allot.StepPending}
}

func TestEpisodeRunsPendingStepsInOrderAndCompletes(t *testing.T) {
	env := newEnv(t)
	done := activities.StepState{Name: "plan", Kind: "local", Action: "plan", Status: allot.StepCompleted, SHA256: "aa"}
	env.OnActivity(a.LoadEpisode, mock.Anything, activities.EpisodeRef{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"}).
		Return(loaded(done, pending("assemble"), pending("publish")), nil)
	var ran []string
	env.OnActivity(a.RunLocalStep, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RunLocalStepInput) (activities.StepState, error) {
			ran = append(ran, in.Step)
			return activities.StepState{Name: in.Step, Kind: "local", Action: in.Step, Status: allot.StepCompleted, SHA256: "h-" + in.Step}, nil
		}).After(time.Minute)
	completedAt := time.Time{}
	env.OnActivity(a.CompleteEpisode, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CompleteEpisodeInput) (time.Time, error) {
			completedAt = in.CompletedAt
			return in.CompletedAt, nil
		})
	var midway EpisodeState
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(StateQuery)
		if err != nil {
			t.Error(err)
			return
		}
		if err := v.Get(&midway); err != nil {
			t.Error(err)
		}
	}, 30*time.Second)

	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	var res EpisodeResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 2 || ran[0] != "assemble" || ran[1] != "publish" {
		t.Fatalf("ran %v, want the two pending steps in order (plan was done)", ran)
	}
	if res.Stage != allot.StageCompleted || completedAt.IsZero() || !res.CompletedAt.Equal(completedAt) {
		t.Fatalf("result %+v, completed at %s", res, completedAt)
	}
	if res.Steps[2].SHA256 != "h-publish" || res.Steps[0].SHA256 != "aa" {
		t.Fatalf("steps %+v", res.Steps)
	}
	if midway.EpisodeID != "2026-W32-1" || midway.Period != "2026-W32" || midway.Sequence != 1 ||
		midway.Stage != allot.StageRunning || midway.CurrentStep != "assemble" {
		t.Fatalf("state query answered %+v", midway)
	}
	var st EpisodeState
	v, err := env.QueryWorkflow(StateQuery)
	if err != nil || v.Get(&st) != nil || st.Stage != allot.StageCompleted {
		t.Fatalf("final state %+v, %v", st, err)
	}
}

func TestEpisodeAlreadyCompletedRunsNothing(t *testing.T) {
	env := newEnv(t)
	l := loaded(activities.StepState{Name: "plan", Kind: "local", Status: allot.StepCompleted})
	l.Status, l.CompletedAt = "completed", nominal().Add(time.Hour)
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(l, nil)
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	var res EpisodeResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Stage != allot.StageCompleted || !res.CompletedAt.Equal(l.CompletedAt) {
		t.Fatalf("result %+v", res)
	}
	// RunLocalStep and CompleteEpisode have no mocks: calling them would fail the test.
}

func TestEpisodeMissingFailsWithType(t *testing.T) {
	env := newEnv(t)
	calls := 0
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ activities.EpisodeRef) (activities.LoadEpisodeResult, error) {
			calls++
			return activities.LoadEpisodeResult{}, temporal.NewNonRetryableApplicationError("no episode 2026-W32-9", allot.EpisodeNotFound, nil)
		})
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-9"})
	var appErr *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != allot.EpisodeNotFound {
		t.Fatalf("error = %v, want %s", err, allot.EpisodeNotFound)
	}
	if calls != 1 {
		t.Fatalf("EpisodeNotFound retried: %d calls", calls)
	}
}
