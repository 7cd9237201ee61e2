package workflows

// Workflow tests of an episode refused by a budget (invariant 20): it parks
// with BudgetExhausted, naming each budget and the raise that admits it,
// and resumes by itself once the budgets have room: at once on a raise's
// signal, else on its backoff timer; an operator's retry and abandon work
// as for any parked step.

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"allot"
	"allot/activities"
	"allot/internal/ledger"
	"allot/internal/payonce"
	"allot/paidvendor"
)

var weeklyShortfall = ledger.BudgetShortfall{Budget: "video-weekly", Period: "2026-W32", Currency: "USD", Limit: 750, Settled: 500, Reserved: 250, Asked: 250}

func budgetRefusal() error {
	return temporal.NewNonRetryableApplicationError("paid task weekly-video/2026-W32-1 step video revision 0 is not sent: budget video-weekly ...",
		allot.BudgetExhausted, nil, activities.ParkDetails{TaskState: allot.PaidPlanned, Budgets: []ledger.BudgetShortfall{weeklyShortfall}})
}

// budgetEnv runs an episode whose video step is refused by its budget
// first, then admitted; room says what BudgetRoom answers on each call.
func budgetEnv(t *testing.T, room func(call int) bool) (env *testsuite.TestWorkflowEnvironment, submits, checks *int) {
	env = newEnv(t)
	submits, checks = new(int), new(int)
	env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(loaded(paidPending("video"), pending("assemble")), nil)
	env.OnActivity(a.SubmitPaidTask, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.PaidTaskInput) (activities.PaidTaskResult, error) {
			*submits++
			if *submits == 1 {
				return activities.PaidTaskResult{}, budgetRefusal()
			}
			return activities.PaidTaskResult{Step: "video", State: allot.PaidSubmitted, RemoteRef: "vt_0123456789abcdef"}, nil
		})
	env.OnActivity(a.BudgetRoom, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BudgetRoomInput) (activities.BudgetRoomResult, error) {
			*checks++
			if len(in.Needs) != 1 || in.Needs[0] != weeklyShortfall || in.Step != "video" {
				t.Errorf("BudgetRoom asked %+v", in)
			}
			if room(*checks) {
				return activities.BudgetRoomResult{Room: true}, nil
			}
			return activities.BudgetRoomResult{Shortfalls: []ledger.BudgetShortfall{weeklyShortfall}}, nil
		})
	env.OnActivity(a.AwaitPaidTask, mock.Anything, mock.Anything).Return(
		activities.PaidTaskResult{Step: "video", State: allot.PaidSucceeded, RemoteRef: "vt_0123456789abcdef", SHA256: "ab"}, nil)
	env.OnActivity(a.RunLocalStep, mock.Anything, mock.Anything).Return(activities.StepState{Name: "assemble", Kind: "local", Status: allot.StepCompleted}, nil)
	env.OnActivity(a.CompleteEpisode, mock.Anything, mock.Anything).Return(nominal(), nil)
	return env, submits, checks
}

func TestBudgetExhaustedParksWithTheRaiseAndResumesWhenRaised(t *testing.T) {
	raised := false
	env, submits, checks := budgetEnv(t, func(int) bool { return raised })
	var parked, nudged EpisodeState
	env.RegisterDelayedCallback(func() {
		parked = queryState(t, env)
		raised = true
		env.SignalWorkflow(BudgetRaisedSignal, nil)
	}, 10*time.Second)
	// Still before the first timed check (a minute after parking): the
	// signal alone moved it on.
	env.RegisterDelayedCallback(func() { nudged = queryState(t, env) }, 30*time.Second)
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	var res EpisodeResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	att := parked.Attention
	if att == nil || att.ErrorType != allot.BudgetExhausted || att.TaskState != allot.PaidPlanned || parked.Stage != allot.StageNeedsAttention ||
		len(att.Budgets) != 1 || att.Budgets[0] != weeklyShortfall {
		t.Fatalf("parked %+v", parked)
	}
	want := []string{
		"starter budget raise video-weekly --period 2026-W32 --limit 1000 --reason 'admit weekly-video/2026-W32-1 step video'",
		"starter episode resolve --pipeline weekly-video --episode 2026-W32-1 --step video --retry",
		"starter episode resolve --pipeline weekly-video --episode 2026-W32-1 --step video --abandon --reason 'abandoned after BudgetExhausted'",
	}
	if !slices.Equal(att.Remedies, want) || att.Remedy != want[0] {
		t.Fatalf("remedies %q, want %q", att.Remedies, want)
	}
	for _, r := range att.Remedies {
		if words, err := SplitCommand(r); err != nil || len(words) < 4 {
			t.Fatalf("remedy %q does not split: %v", r, err)
		}
	}
	if nudged.Attention != nil || nudged.Stage == allot.StageNeedsAttention {
		t.Fatalf("the raise's signal did not move the episode on before its timer: %+v", nudged)
	}
	if res.Stage != allot.StageCompleted || *submits != 2 || *checks != 1 {
		t.Fatalf("after the raise: stage %s, %d submits, %d budget checks; want completed, 2, 1 (asked at once on the signal)", res.Stage, *submits, *checks)
	}
}

// Without a signal (a release, a cost below its reservation, a raise by
// someone who did not nudge) the episode asks on its timer, backing off.
func TestBudgetExhaustedResumesOnItsTimer(t *testing.T) {
	env, submits, checks := budgetEnv(t, func(call int) bool { return call == 3 })
	executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
	var res EpisodeResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Stage != allot.StageCompleted || *submits != 2 || *checks != 3 {
		t.Fatalf("stage %s, %d submits, %d budget checks; want completed, 2, 3", res.Stage, *submits, *checks)
	}
}

// An operator's retry, while the episode waits for its budget, runs the
// step again at once; an abandon goes on without it.
func TestBudgetExhaustedTakesRetryAndAbandon(t *testing.T) {
	for _, action := range []allot.Action{allot.ActionRetry, allot.ActionAbandon} {
		t.Run(string(action), func(t *testing.T) {
			env, submits, checks := budgetEnv(t, func(int) bool { return false })
			env.OnActivity(a.ApplyDecision, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.DecisionInput) (activities.DecisionResult, error) {
					st := paidPending("video")
					if in.Action == allot.ActionAbandon {
						st.Status, st.TaskState = allot.StepAbandoned, allot.PaidAbandoned
					}
					return activities.DecisionResult{Action: in.Action, Step: "video", Steps: []activities.StepState{st, pending("assemble")}}, nil
				})
			var cmd, refused *updateResult
			env.RegisterDelayedCallback(func() {
				refused = sendUpdate(env, ReworkUpdate, "rework-1", DecisionRequest{Step: "video"})
				cmd = sendUpdate(env, ResolveUpdate, "cmd-1", DecisionRequest{Step: "video", Resolve: action, Reason: "over budget"})
			}, 10*time.Second)
			executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
			var res EpisodeResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			wantType(t, refused.err, allot.NotReady)
			wantSubmits := 2
			if action == allot.ActionAbandon {
				wantSubmits = 1
			}
			if cmd == nil || !cmd.completed || cmd.err != nil || res.Stage != allot.StageCompleted || *submits != wantSubmits || *checks != 0 {
				t.Fatalf("%s: %+v, stage %s, %d submits, %d budget checks", action, cmd, res.Stage, *submits, *checks)
			}
		})
	}
}

// An activity adapter's quote: the protocol asks for it only when
// PaidPrepare says so, gives the answer to the next PaidPrepare of the
// same attempt, and asks again after a pause while the quote activity
// does not answer; refused credentials park the step.
func TestActivityAdapterQuoteGoesToPaidPrepare(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failures  int    // quote calls that fail with a retryable error first
		errType   string // then this, if set
		wantStage allot.Stage
	}{
		{"answered", 0, "", allot.StageCompleted},
		{"answered after a silence", 2, "", allot.StageCompleted},
		{"credentials refused", 0, paidvendor.ActivityErrUnauthorized, allot.StageNeedsAttention},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(Episode)
			env.RegisterActivity(a)
			quotes := 0
			price := paidvendor.Cost{Amount: 80, Currency: "USD"}
			env.RegisterActivityWithOptions(func(_ context.Context, req paidvendor.ActivitySubmitRequest) (paidvendor.Cost, error) {
				quotes++
				switch {
				case req.IdempotencyKey != "k" || req.Kind != "cover":
					t.Errorf("quote asked for %+v", req)
				case quotes <= tc.failures:
					return paidvendor.Cost{}, temporal.NewNonRetryableApplicationError("vendor busy", "Busy", nil)
				case tc.errType != "":
					return paidvendor.Cost{}, temporal.NewNonRetryableApplicationError("key refused", tc.errType, nil)
				}
				return price, nil
			}, activity.RegisterOptions{Name: "CoversQuote"})
			env.OnActivity(a.RecordEpisodeOutcome, mock.Anything, mock.Anything).Return(nil).Maybe()
			// The vendor's gate lets every request go.
			env.OnActivity(a.PaidVendorGate, mock.Anything, mock.Anything).Return(activities.VendorGateResult{Passed: true}, nil).Maybe()
			env.OnActivity(a.PaidVendorRelease, mock.Anything, mock.Anything).Return(nil).Maybe()
			step := activities.StepState{Name: "cover", Kind: "effect", Action: "cover", Status: allot.StepPending,
				Run: &activities.StepRun{Vendor: &activities.VendorActivities{Name: "covers", TaskQueue: "covers", Submit: "CoversSubmit", Quote: "CoversQuote", CallTimeout: time.Second}}}
			env.OnActivity(a.LoadEpisode, mock.Anything, mock.Anything).Return(loaded(step), nil)
			var prepared []activities.PaidPhaseInput
			env.OnActivity(a.PaidPrepare, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.PaidPhaseInput) (activities.PaidPlan, error) {
					prepared = append(prepared, in)
					if in.Quote == nil && !in.NoQuote {
						return activities.PaidPlan{Next: payonce.NextQuote, IdempotencyKey: "k", QuoteRequest: &paidvendor.SubmitRequest{IdempotencyKey: "k", Kind: "cover"}}, nil
					}
					return activities.PaidPlan{Next: payonce.NextDone, Result: &activities.PaidTaskResult{Step: "cover", Kind: "effect", State: allot.PaidSubmitted, RemoteRef: "out_1"}}, nil
				})
			env.OnActivity(a.CompleteEpisode, mock.Anything, mock.Anything).Return(nominal(), nil).Maybe()
			var parked EpisodeState
			env.RegisterDelayedCallback(func() {
				parked = queryState(t, env)
				env.CancelWorkflow()
			}, time.Hour)
			executeEpisode(env, EpisodeInput{Pipeline: "weekly-video", EpisodeID: "2026-W32-1"})
			if tc.wantStage == allot.StageNeedsAttention {
				if parked.Attention == nil || parked.Attention.ErrorType != allot.VendorNotConfigured || len(prepared) != 1 {
					t.Fatalf("parked %+v after %d prepares", parked, len(prepared))
				}
				return
			}
			var res EpisodeResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if res.Stage != tc.wantStage || quotes != tc.failures+1 || len(prepared) != 2 || prepared[1].Quote == nil || *prepared[1].Quote != price ||
				prepared[1].Owner != prepared[0].Owner {
				t.Fatalf("stage %s, %d quotes, prepares %+v", res.Stage, quotes, prepared)
			}
		})
	}
}
