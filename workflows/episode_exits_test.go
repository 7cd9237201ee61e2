package workflows

// Workflow tests of the exits of parked states and of commands refused at
// once (issue 7), and of steps that keep retrying (issue 8).

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"allot"
	"allot/activities"
)

func queryState(t *testing.T, env *testsuite.TestWorkflowEnvironment) EpisodeState {
	t.Helper()
	v, err := env.QueryWorkflow(StateQuery)
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	var st EpisodeState
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// updateResult is what an update's callbacks saw.
type updateResult struct {
	rejected, completed bool
	err                 error
}

func sendUpdate(env *testsuite.TestWorkflowEnvironment, name, id string, req DecisionRequest) *updateResult {
	r := &updateResult{}
	env.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
		OnReject:   func(err error) { r.rejected, r.err = true, err },
		OnComplete: func(_ any, err error) { r.completed, r.err = true, err },
	}, req)
	return r
}

func wantType(t *testing.T, err error, errType string) {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != errType {
		t.Fatalf("error %v, want type %s", err, errType)
	}
}

// Defect: a refused command retried forever while holding the episode, and
// the correct command sent next waited behind it. A command the table does
// not allow is refused by the validator, at once, and changes nothing; the
// allowed one goes through.
func TestRefusedCommandIsAnsweredAtOnceAndChangesNothing(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(loaded(paidPending("video"), pending("assemble")), nil)
	submits := 0
	env.OnActivity(a.SubmitPaidTask, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.PaidTaskInput) (activities.PaidTaskResult, error) {
			submits++
			return activities.PaidTaskResult{}, temporal.NewNonRetryableApplicationError("vendor cannot tell", allot.OutcomeUnknown, nil)
		}).Once()
	decisions := 0
	env.OnActivity(a.ApplyDecision, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DecisionInput) (activities.DecisionResult, error) {
			decisions++
			return activities.DecisionResult{Action: in.Action, Step: "video", Steps: []activities.StepState{
				{Name: "video", Kind: "paid", Status: allot.StepAbandoned, TaskState: allot.PaidAbandoned}, pending("assemble"),
			}}, nil
		})
	env.OnActivity(a.RunLocalStep, mock.Anything, mock.Anything).Return(activities.StepState{Name: "assemble", Kind: "local", Status: allot.StepCompleted}, nil)
	env.OnActivity(a.CompleteEpisode, mock.Anything, mock.Anything).Return(nominal(), nil)

	var refused []*updateResult
	var abandon *updateResult
	env.RegisterDelayedCallback(func() {
		before := queryState(t, env)
		if before.Attention == nil || before.Attention.ErrorType != allot.OutcomeUnknown {
			t.Fatalf("not parked: %+v", before)
		}
		for i, c := range []struct {
			update string
			req    DecisionRequest
		}{
			{ReworkUpdate, DecisionRequest{Step: "video"}},
			{ApproveUpdate, DecisionRequest{}},
			{RejectUpdate, DecisionRequest{Reason: "no"}},
			{ResolveUpdate, DecisionRequest{Step: "assemble", Resolve: allot.ActionRetry}},
		} {
			refused = append(refused, sendUpdate(env, c.update, "refused-"+string(rune('a'+i)), c.req))
		}
		// Answered at once: a second later, without any activity run in
		// between, all are refused and the state is as it was.
		env.RegisterDelayedCallback(func() {
			for i, r := range refused {
				if !r.rejected {
					t.Errorf("command %d was not refused at once: %+v", i, r)
				}
			}
			if decisions != 0 {
				t.Errorf("refused commands ran %d decisions", decisions)
			}
			if after := queryState(t, env); !reflect.DeepEqual(after, before) {
				t.Errorf("refused commands changed the state:\n%+v\n%+v", before, after)
			}
			abandon = sendUpdate(env, ResolveUpdate, "abandon-1", DecisionRequest{Step: "video", Resolve: allot.ActionAbandon, Reason: "gave up"})
		}, time.Second)
	}, time.Hour)
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	var res EpisodeResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	wantType(t, refused[0].err, allot.NotReady)
	wantType(t, refused[1].err, allot.NotReady)
	wantType(t, refused[2].err, allot.NotReady)
	wantType(t, refused[3].err, allot.NotReady)
	if abandon == nil || !abandon.completed || abandon.err != nil || decisions != 1 || submits != 1 {
		t.Fatalf("abandon %+v, %d decisions, %d submits", abandon, decisions, submits)
	}
	if res.Stage != allot.StageCompleted {
		t.Fatalf("result %+v", res)
	}
}

// Defect: parked while submitted (the worker's key could not be read while
// polling), no command could unpark the episode. The table gives it retry
// and abandon; the remedies are exactly those commands; retry polls again.
func TestParkedWhileSubmittedRetries(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(loaded(paidPending("video")), nil)
	env.OnActivity(a.SubmitPaidTask, mock.Anything, mock.Anything).Return(
		activities.PaidTaskResult{Step: "video", State: allot.PaidSubmitted, RemoteRef: "vt_0123456789abcdef"}, nil)
	awaits := 0
	env.OnActivity(a.AwaitPaidTask, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.PaidTaskInput) (activities.PaidTaskResult, error) {
			awaits++
			if awaits == 1 {
				return activities.PaidTaskResult{}, temporal.NewNonRetryableApplicationError("read the key file: permission denied", allot.VendorNotConfigured, nil)
			}
			return activities.PaidTaskResult{Step: "video", State: allot.PaidSucceeded, RemoteRef: "vt_0123456789abcdef", SHA256: "ab"}, nil
		})
	env.OnActivity(a.ApplyDecision, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DecisionInput) (activities.DecisionResult, error) {
			return activities.DecisionResult{Action: in.Action, Step: "video", Steps: []activities.StepState{
				{Name: "video", Kind: "paid", Status: allot.StepSubmitted, TaskState: allot.PaidSubmitted, RemoteRef: "vt_0123456789abcdef"},
			}}, nil
		})
	env.OnActivity(a.CompleteEpisode, mock.Anything, mock.Anything).Return(nominal(), nil)
	var parked EpisodeState
	var retry *updateResult
	env.RegisterDelayedCallback(func() {
		parked = queryState(t, env)
		retry = sendUpdate(env, ResolveUpdate, "retry-1", DecisionRequest{Step: "video", Resolve: allot.ActionRetry})
	}, time.Hour)
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	var res EpisodeResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	att := parked.Attention
	if att == nil || att.ErrorType != allot.VendorNotConfigured || att.TaskState != allot.PaidSubmitted {
		t.Fatalf("parked %+v", parked)
	}
	want := []string{
		"starter episode resolve --pipeline weekly-video --episode 2026-W32-1 --step video --retry",
		"starter episode resolve --pipeline weekly-video --episode 2026-W32-1 --step video --abandon --reason 'abandoned after VendorNotConfigured'",
	}
	if !reflect.DeepEqual(att.Remedies, want) || att.Remedy != want[0] {
		t.Fatalf("remedies %q, want %q", att.Remedies, want)
	}
	if retry == nil || !retry.completed || retry.err != nil || awaits != 2 || res.Stage != allot.StageCompleted {
		t.Fatalf("retry %+v, awaits %d, result %+v", retry, awaits, res)
	}
}

// Every remedy the workflow prints is an action the table allows for the
// state and attention it is printed for, and a complete starter command.
func TestRemediesAreAllowedCompleteCommands(t *testing.T) {
	for _, rule := range allot.PaidCommandTable {
		if rule.Attention == "" {
			continue
		}
		rs := Remedies("weekly-video", "2026-W32-1", "video", rule.State, rule.Attention)
		if len(rs) == 0 {
			t.Fatalf("%s/%s: no remedy", rule.State, rule.Attention)
		}
		for _, r := range rs {
			if !strings.HasPrefix(r, "starter episode ") || !strings.Contains(r, "--pipeline weekly-video --episode 2026-W32-1 --step video") {
				t.Errorf("%s/%s: remedy %q is not a complete command", rule.State, rule.Attention, r)
			}
		}
	}
}

// Defect: a second Episode started by hand under another workflow ID could
// work on the same paid tasks. The Episode refuses any ID but its own.
func TestEpisodeRefusesAForeignWorkflowID(t *testing.T) {
	env := newEnv(t)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "my-own-episode-copy", TaskQueue: TaskQueue})
	env.ExecuteWorkflow(Episode, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	wantType(t, env.GetWorkflowError(), allot.InvalidInput)
}

// Issue 8: a step whose activity keeps failing with errors a retry may fix
// shows as retrying (stage, AllotOutcome, the ledger), with the last error,
// the attempts and since when; it goes on until the activity succeeds.
func TestRetryingStepIsVisible(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(Episode)
	env.RegisterActivity(a)
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(loaded(paidPending("video")), nil)
	attempts := 0
	env.OnActivity(a.SubmitPaidTask, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.PaidTaskInput) (activities.PaidTaskResult, error) {
			attempts++
			if attempts <= 2*retryBatch {
				return activities.PaidTaskResult{}, errors.New("dial tcp 127.0.0.1:8787: connect: connection refused")
			}
			return activities.PaidTaskResult{Step: "video", State: allot.PaidSubmitted, RemoteRef: "vt_0123456789abcdef"}, nil
		})
	env.OnActivity(a.AwaitPaidTask, mock.Anything, mock.Anything).Return(
		activities.PaidTaskResult{Step: "video", State: allot.PaidSucceeded, RemoteRef: "vt_0123456789abcdef", SHA256: "ab"}, nil)
	env.OnActivity(a.CompleteEpisode, mock.Anything, mock.Anything).Return(nominal(), nil)
	var recorded []activities.EpisodeOutcomeInput
	env.OnActivity(a.RecordEpisodeOutcome, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EpisodeOutcomeInput) error {
			recorded = append(recorded, in)
			return nil
		})
	var outcomeAttrs []string // every AllotOutcome the workflow set, in order
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(OutcomeAttr); ok {
			outcomeAttrs = append(outcomeAttrs, v)
		}
	}).Return(nil)
	var during EpisodeState
	env.RegisterDelayedCallback(func() { during = queryState(t, env) }, 90*time.Second)
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	var res EpisodeResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	r := during.Retrying
	if during.Stage != allot.StageRetrying || r == nil || r.Step != "video" || r.Activity != "SubmitPaidTask" ||
		r.Attempts < retryBatch || !strings.Contains(r.Error, "connection refused") || r.Since.IsZero() {
		t.Fatalf("while retrying: stage %s, retrying %+v", during.Stage, r)
	}
	if res.Stage != allot.StageCompleted || res.Retrying != nil {
		t.Fatalf("result %+v", res)
	}
	var sawRetrying bool
	for _, o := range recorded {
		sawRetrying = sawRetrying || o.Outcome == allot.OutcomeRetrying
	}
	if !sawRetrying {
		t.Fatalf("outcomes recorded %+v, want retrying among them", recorded)
	}
	// Visibility too: AllotOutcome = "retrying" while it retries, then
	// "completed".
	if !slices.Contains(outcomeAttrs, string(allot.OutcomeRetrying)) || outcomeAttrs[len(outcomeAttrs)-1] != string(allot.OutcomeCompleted) {
		t.Fatalf("AllotOutcome was set to %q, want %q while retrying and %q last", outcomeAttrs, allot.OutcomeRetrying, allot.OutcomeCompleted)
	}
}

// Defect (issue 25): reassemble on an episode parked before its assembly
// ran was accepted and a reassemble decision recorded, for nothing. It is
// refused at once, records nothing, leaves the state as it was, and names
// the commands that do move the episode on (the parked step's remedies).
func TestReassembleBeforeTheAssemblyIsRefusedAtOnce(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(loaded(paidPending("video"), pending("assemble")), nil)
	env.OnActivity(a.SubmitPaidTask, mock.Anything, mock.Anything).Return(
		activities.PaidTaskResult{}, temporal.NewNonRetryableApplicationError("vendor cannot tell", allot.OutcomeUnknown, nil)).Once()
	var decided []allot.Action
	env.OnActivity(a.ApplyDecision, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DecisionInput) (activities.DecisionResult, error) {
			decided = append(decided, in.Action)
			return activities.DecisionResult{Action: in.Action, Step: "video", Steps: []activities.StepState{
				{Name: "video", Kind: "paid", Status: allot.StepAbandoned, TaskState: allot.PaidAbandoned}, pending("assemble"),
			}}, nil
		})
	env.OnActivity(a.RunLocalStep, mock.Anything, mock.Anything).Return(activities.StepState{Name: "assemble", Kind: "local", Action: "assemble", Status: allot.StepCompleted}, nil)
	env.OnActivity(a.CompleteEpisode, mock.Anything, mock.Anything).Return(nominal(), nil)

	var before EpisodeState
	var reassemble *updateResult
	env.RegisterDelayedCallback(func() {
		before = queryState(t, env)
		reassemble = sendUpdate(env, ReassembleUpdate, "reassemble-1", DecisionRequest{Reason: "try again"})
		env.RegisterDelayedCallback(func() {
			if !reassemble.rejected {
				t.Errorf("reassemble was not refused at once: %+v", reassemble)
			}
			if after := queryState(t, env); !reflect.DeepEqual(after, before) {
				t.Errorf("the refused reassemble changed the state:\n%+v\n%+v", before, after)
			}
			sendUpdate(env, ResolveUpdate, "abandon-1", DecisionRequest{Step: "video", Resolve: allot.ActionAbandon, Reason: "gave up"})
		}, time.Second)
	}, time.Hour)
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	if err := env.GetWorkflowResult(new(EpisodeResult)); err != nil {
		t.Fatal(err)
	}
	if before.Attention == nil || before.Attention.ErrorType != allot.OutcomeUnknown {
		t.Fatalf("not parked: %+v", before)
	}
	wantType(t, reassemble.err, allot.NotReady)
	for _, want := range []string{"step assemble has not run yet", "parked on step video (OutcomeUnknown)", before.Attention.Remedies[0]} {
		if !strings.Contains(reassemble.err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", reassemble.err, want)
		}
	}
	if !slices.Equal(decided, []allot.Action{allot.ActionAbandon}) {
		t.Fatalf("decisions recorded %v, want only the abandon", decided)
	}
}
