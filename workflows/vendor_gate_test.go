package workflows

// The vendor gate on every adapter kind (issue 24 §1; docs/design.md,
// "Vendor controls"): each request to a vendor asks the gate right before
// it, in the activities (http, go) and in the Episode (activity adapters).
// Each case runs the Episode in the test environment (virtual time) with
// the real activities, a real SQLite ledger and the conformance suite's
// simulated vendor, which counts every request it gets.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"allot"
	"allot/activities"
	"allot/internal/ledger"
	"allot/internal/protocoltest"
	"allot/paidvendor"
	"allot/pipeline"
)

// gateAdapters are the adapter kinds: http, go, activity.
var gateAdapters = confAdapters[:3]

// withVendorLimits gives the run's vendor these settings (TOML lines of
// its [[vendor]]).
func (r *confRun) withVendorLimits(lines string) {
	r.t.Helper()
	toml := confPipelines(r.ad, r.kind, "http://unused")
	adapter := "adapter = \"" + r.ad.adapter + "\"\n"
	set, err := pipeline.Parse([]byte(strings.Replace(toml, adapter, adapter+lines+"\n", 1)), "vendor_gate_test")
	if err != nil {
		r.t.Fatal(err)
	}
	// The vendors (and their URL) stay as newConfRun built them; only
	// the limits the gate reads change.
	r.acts.Pipelines = set
}

// gateEnv is an environment for an episode that waits for its vendor: the
// wait retries its activity (up to vendorWaitAttempts), which the
// conformance environment would count as a loop.
func (r *confRun) gateEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	env.RegisterWorkflow(Episode)
	env.RegisterActivity(r.acts)
	if r.adapter != nil {
		r.adapter.Register(env, confNames)
	}
	return env
}

// requests counts every request the vendor got.
func (r *confRun) requests() map[string]int {
	out := map[string]int{}
	for _, ep := range []string{protocoltest.EndpointSubmit, protocoltest.EndpointLookup, protocoltest.EndpointPoll, protocoltest.EndpointResult, protocoltest.EndpointOther} {
		if n := r.vendor.Count(ep); n > 0 {
			out[ep] = n
		}
	}
	return out
}

// waitedAnHour runs the episode for an hour of virtual time and returns its
// state then.
func (r *confRun) waitedAnHour(env *testsuite.TestWorkflowEnvironment) EpisodeState {
	var st EpisodeState
	env.RegisterDelayedCallback(func() {
		st = queryState(r.t, env)
		env.CancelWorkflow()
	}, time.Hour)
	executeEpisode(env, EpisodeInput{Pipeline: confPipeline, EpisodeID: r.episode})
	return st
}

// A paused vendor gets no request of any kind, on every adapter: the step
// waits (waiting_vendor, vendor_paused) for an hour and nothing reaches
// the vendor.
func TestPausedVendorGetsNothingOnEveryAdapter(t *testing.T) {
	for _, ad := range gateAdapters {
		t.Run(ad.name, func(t *testing.T) {
			r := newConfRun(t, ad, allot.KindPaid, confCase{want: func(confAdapter) confWant { return confWant{} }})
			if _, err := r.led.PauseVendor(r.ctx, ledger.VendorPause{Vendor: confVendor, Reason: "bills twice", By: "test"}); err != nil {
				t.Fatal(err)
			}
			st := r.waitedAnHour(r.gateEnv())
			if st.Stage != allot.StageWaitingVendor || st.Waiting == nil || st.Waiting.Reason != allot.ReasonVendorPaused {
				t.Fatalf("after an hour: stage %s, waiting %+v", st.Stage, st.Waiting)
			}
			if got := r.requests(); len(got) != 0 {
				t.Fatalf("the paused vendor got requests: %v", got)
			}
		})
	}
}

// A pause that comes during an attempt stops its next request: the
// attempt's look-up is answered, the pause comes, and the send does not go
// (issue 24: one submission reached a paused vendor).
func TestPauseDuringAnAttemptStopsItsSend(t *testing.T) {
	for _, ad := range gateAdapters {
		t.Run(ad.name, func(t *testing.T) {
			r := newConfRun(t, ad, allot.KindPaid, confCase{want: func(confAdapter) confWant { return confWant{} }})
			// A run that died left its intent: the attempt asks the vendor
			// first, and the pause comes while it does.
			if _, err := r.led.WriteIntent(r.ctx, r.ref, r.key, confDeadOwner); err != nil {
				t.Fatal(err)
			}
			pause := func() {
				if _, err := r.led.PauseVendor(context.Background(), ledger.VendorPause{Vendor: confVendor, Reason: "bills twice", By: "test"}); err != nil {
					t.Error(err)
				}
			}
			env := r.gateEnv()
			if ad.self() {
				v := r.acts.Vendors[confVendor]
				build := v.New
				v.New = func(apiKey string) (paidvendor.Submitter, error) {
					s, err := build(apiKey)
					return pausingLookups{Client: s.(paidvendor.Client), pause: pause}, err
				}
				r.acts.Vendors[confVendor] = v
			} else {
				env.RegisterActivityWithOptions(func(ctx context.Context, req paidvendor.ActivityLookupRequest) (paidvendor.ActivityTask, error) {
					defer pause()
					return r.adapter.Lookup(ctx, req)
				}, activity.RegisterOptions{Name: confNames.Lookup, DisableAlreadyRegisteredCheck: true})
			}
			st := r.waitedAnHour(env)
			if st.Stage != allot.StageWaitingVendor || st.Waiting == nil || st.Waiting.Reason != allot.ReasonVendorPaused {
				t.Fatalf("after an hour: stage %s, waiting %+v", st.Stage, st.Waiting)
			}
			if got := r.requests(); got[protocoltest.EndpointSubmit] != 0 || got[protocoltest.EndpointLookup] != 1 {
				t.Fatalf("requests %v, want the one look-up before the pause and nothing after", got)
			}
		})
	}
}

// A retry of an activity adapter's status poll is a request: a pause that
// comes after a poll failed stops the retries too (Temporal's own retries
// of the activity would not ask the gate).
func TestPauseStopsTheRetriesOfAPoll(t *testing.T) {
	r := newConfRun(t, gateAdapters[2], allot.KindPaid, confCase{want: func(confAdapter) confWant { return confWant{} }})
	env := r.gateEnv()
	polls := 0
	env.RegisterActivityWithOptions(func(ctx context.Context, req paidvendor.ActivityTaskRequest) (paidvendor.ActivityTask, error) {
		polls++
		task, err := r.adapter.Status(ctx, req)
		if err != nil || polls > 1 {
			return task, err
		}
		// The answer is lost, and the operator pauses the vendor.
		if _, err := r.led.PauseVendor(context.Background(), ledger.VendorPause{Vendor: confVendor, Reason: "bills twice", By: "test", Polls: true}); err != nil {
			t.Error(err)
		}
		return paidvendor.ActivityTask{}, errors.New("connection reset")
	}, activity.RegisterOptions{Name: confNames.Status, DisableAlreadyRegisteredCheck: true})
	st := r.waitedAnHour(env)
	if st.Stage != allot.StageWaitingVendor || st.Waiting == nil || st.Waiting.Reason != allot.ReasonVendorPaused {
		t.Fatalf("after an hour: stage %s, waiting %+v", st.Stage, st.Waiting)
	}
	if polls != 1 || r.requests()[protocoltest.EndpointPoll] != 1 {
		t.Fatalf("%d status calls, %d polls reached the vendor; want the one before the pause", polls, r.requests()[protocoltest.EndpointPoll])
	}
}

// pausingLookups is a Go or http adapter whose look-ups pause the vendor
// once answered.
type pausingLookups struct {
	paidvendor.Client
	pause func()
}

func (p pausingLookups) LookupByIdempotencyKey(ctx context.Context, key string) (paidvendor.Task, error) {
	defer p.pause()
	return p.Client.LookupByIdempotencyKey(ctx, key)
}

// An open breaker gets nothing more: look-ups that fail trip it after
// trip_after = 2 (each of the Episode's look-ups is one request, its
// adapter activity's attempts included), and no look-up follows while it
// is open (issue 24: 34 look-ups went through an open breaker).
func TestOpenBreakerStopsTheLookups(t *testing.T) {
	for _, ad := range gateAdapters {
		t.Run(ad.name, func(t *testing.T) {
			r := newConfRun(t, ad, allot.KindPaid, confCase{lookupFailures: 1000, want: func(confAdapter) confWant { return confWant{} }})
			r.withVendorLimits("trip_after = 2\ncool_down = \"1h\"")
			if _, err := r.led.WriteIntent(r.ctx, r.ref, r.key, confDeadOwner); err != nil {
				t.Fatal(err)
			}
			st := r.waitedAnHour(r.gateEnv())
			if st.Stage != allot.StageWaitingVendor || st.Waiting == nil || st.Waiting.Reason != allot.ReasonVendorTripped {
				t.Fatalf("after an hour: stage %s, waiting %+v", st.Stage, st.Waiting)
			}
			// Two failed requests: one HTTP look-up each (http, go), or
			// one attempt of the adapter's activity each (each attempt
			// is a request, and asks the gate).
			const want = 2
			if got := r.requests(); got[protocoltest.EndpointLookup] != want || got[protocoltest.EndpointSubmit] != 0 {
				t.Fatalf("requests %v, want %d look-ups and nothing while the breaker is open", got, want)
			}
		})
	}
}

// Issue 24 §1: a step that waits for a vendor that never comes back has an
// exit: resolve --abandon ends the wait, abandons the step with the reason
// recorded (the way a parked step is abandoned), and the episode goes on.
// Before, it answered "wait until it finishes or parks", and it never
// parked. Both shapes: waiting before the intent (paused from the start)
// and after it (the pause came during the attempt: the intent's
// reservation, if any, is released).
func TestAbandonEndsAVendorWait(t *testing.T) {
	for _, ad := range []confAdapter{gateAdapters[0], gateAdapters[2]} {
		for _, midAttempt := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/mid-attempt=%t", ad.name, midAttempt), func(t *testing.T) {
				r := newConfRun(t, ad, allot.KindPaid, confCase{want: func(confAdapter) confWant { return confWant{} }})
				pause := func() {
					if _, err := r.led.PauseVendor(context.Background(), ledger.VendorPause{Vendor: confVendor, Reason: "gone for good", By: "test"}); err != nil {
						t.Error(err)
					}
				}
				if !midAttempt {
					pause()
				} else if _, err := r.led.WriteIntent(r.ctx, r.ref, r.key, confDeadOwner); err != nil {
					t.Fatal(err)
				}
				env := r.gateEnv()
				if midAttempt {
					if ad.self() {
						v := r.acts.Vendors[confVendor]
						build := v.New
						v.New = func(apiKey string) (paidvendor.Submitter, error) {
							s, err := build(apiKey)
							return pausingLookups{Client: s.(paidvendor.Client), pause: pause}, err
						}
						r.acts.Vendors[confVendor] = v
					} else {
						env.RegisterActivityWithOptions(func(ctx context.Context, req paidvendor.ActivityLookupRequest) (paidvendor.ActivityTask, error) {
							defer pause()
							return r.adapter.Lookup(ctx, req)
						}, activity.RegisterOptions{Name: confNames.Lookup, DisableAlreadyRegisteredCheck: true})
					}
				}
				var waiting EpisodeState
				var abandon *updateResult
				env.RegisterDelayedCallback(func() {
					waiting = queryState(t, env)
					abandon = sendUpdate(env, ResolveUpdate, "abandon-1", DecisionRequest{Step: confStep, Resolve: allot.ActionAbandon, Reason: "the vendor is gone"})
				}, 30*time.Minute)
				// A wait the abandon did not end would wait for ever.
				env.RegisterDelayedCallback(env.CancelWorkflow, 3*time.Hour)
				executeEpisode(env, EpisodeInput{Pipeline: confPipeline, EpisodeID: r.episode})
				if waiting.Stage != allot.StageWaitingVendor {
					t.Fatalf("before the abandon the episode was %s, want %s", waiting.Stage, allot.StageWaitingVendor)
				}
				if abandon == nil || !abandon.completed || abandon.err != nil {
					t.Fatalf("resolve --abandon of the waiting step: %+v", abandon)
				}
				var res EpisodeResult
				if err := env.GetWorkflowResult(&res); err != nil {
					t.Fatalf("the episode did not go on: %v", err)
				}
				if res.Stage != allot.StageCompleted || res.Steps[0].Status != allot.StepAbandoned {
					t.Fatalf("the episode ended %s with steps %+v", res.Stage, res.Steps)
				}
				task, err := r.led.LatestPaidTask(r.ctx, confPipeline, r.episode, confStep)
				if err != nil || task.State != allot.PaidAbandoned || task.Error != "the vendor is gone" {
					t.Fatalf("the ledger's task: %+v, %v", task, err)
				}
				if got := r.requests(); got[protocoltest.EndpointSubmit] != 0 {
					t.Fatalf("requests %v: the abandoned step was sent", got)
				}
			})
		}
	}
}

// An activity adapter's quotes ask the gate each, and a quote that fails
// counts toward the breaker: with trip_after = 2, a vendor whose quote
// activity never answers gets two quote calls (each with its batch of
// attempts), then the step waits for the open breaker; nothing is sent.
func TestActivityAdapterQuotesTripTheBreaker(t *testing.T) {
	ad := gateAdapters[2]
	r := newConfRun(t, ad, allot.KindPaid, confCase{want: func(confAdapter) confWant { return confWant{} }})
	toml := confPipelines(ad, allot.KindPaid, "http://unused")
	toml = strings.Replace(toml, "[vendor.activities]\n", "trip_after = 2\ncool_down = \"1h\"\n[vendor.activities]\nquote = \"ConfQuote\"\n", 1)
	toml = strings.Replace(toml, "  params = {", "  max_cost = { amount = 250, currency = \"USD\" }\n  params = {", 1)
	toml = "[[budget]]\nname = \"conf-monthly\"\nvendor = \"" + confVendor + "\"\nperiod = \"month\"\nlimit = { amount = 100000, currency = \"USD\" }\n\n" + toml
	set, err := pipeline.Parse([]byte(toml), "vendor_gate_test")
	if err != nil {
		t.Fatal(err)
	}
	r.acts.Pipelines = set
	env := r.gateEnv()
	quotes := 0
	env.RegisterActivityWithOptions(func(context.Context, paidvendor.ActivitySubmitRequest) (paidvendor.Cost, error) {
		quotes++
		return paidvendor.Cost{}, errors.New("dial tcp 10.0.0.9:443: connect: connection refused")
	}, activity.RegisterOptions{Name: "ConfQuote"})
	st := r.waitedAnHour(env)
	if st.Stage != allot.StageWaitingVendor || st.Waiting == nil || st.Waiting.Reason != allot.ReasonVendorTripped {
		t.Fatalf("after an hour: stage %s, waiting %+v (%d quotes)", st.Stage, st.Waiting, quotes)
	}
	if got := r.requests(); quotes != 2*retryBatch || len(got) != 0 {
		t.Fatalf("%d quote calls and requests %v, want %d quote calls and nothing else", quotes, got, 2*retryBatch)
	}
}

// A pass is used at once or asked for again (docs/design.md, "Vendor
// controls"): a pass the gate granted before a pause, whose use waited
// longer than stalePass (its workflow task sat on a killed worker's sticky
// queue: the chaos run's status poll 6.7 s after a pause), is given back,
// and the gate, asked again, stops the request. Two places hold a pass: the
// gate's own answer (a status poll's), and the admission's pass that the
// attempt's first request uses after PaidPrepare.
func TestStalePassIsAskedForAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		// delay makes the wait: it mocks one activity to answer 5s
		// (virtual) after it was asked, with the pause come meanwhile.
		delay func(r *confRun, env *testsuite.TestWorkflowEnvironment, pause func())
		// want is what reached the vendor: everything before the pause.
		want map[string]int
	}{
		{"status poll", func(r *confRun, env *testsuite.TestWorkflowEnvironment, pause func()) {
			poll := mock.MatchedBy(func(in activities.VendorGateInput) bool { return in.Kind == allot.VendorPoll })
			env.OnActivity(r.acts.PaidVendorGate, mock.Anything, poll).Once().After(5 * time.Second).Return(
				func(ctx context.Context, in activities.VendorGateInput) (activities.VendorGateResult, error) {
					defer pause()
					return r.acts.PaidVendorGate(ctx, in)
				})
			env.OnActivity(r.acts.PaidVendorGate, mock.Anything, mock.Anything).Return(r.acts.PaidVendorGate)
		}, map[string]int{protocoltest.EndpointSubmit: 1}},
		{"admission's pass", func(r *confRun, env *testsuite.TestWorkflowEnvironment, pause func()) {
			env.OnActivity(r.acts.PaidPrepare, mock.Anything, mock.Anything).Once().After(5 * time.Second).Return(
				func(ctx context.Context, in activities.PaidPhaseInput) (activities.PaidPlan, error) {
					defer pause()
					return r.acts.PaidPrepare(ctx, in)
				})
			env.OnActivity(r.acts.PaidPrepare, mock.Anything, mock.Anything).Return(r.acts.PaidPrepare)
		}, map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newConfRun(t, gateAdapters[2], allot.KindPaid, confCase{want: func(confAdapter) confWant { return confWant{} }})
			env := r.gateEnv()
			paused := false
			tc.delay(r, env, func() {
				if paused {
					return
				}
				paused = true
				if _, err := r.led.PauseVendor(context.Background(), ledger.VendorPause{Vendor: confVendor, Reason: "bills twice", By: "test", Polls: true}); err != nil {
					t.Error(err)
				}
			})
			st := r.waitedAnHour(env)
			if !paused {
				t.Fatal("the delayed activity never ran: the test no longer makes a stale pass")
			}
			if st.Stage != allot.StageWaitingVendor || st.Waiting == nil || st.Waiting.Reason != allot.ReasonVendorPaused {
				t.Fatalf("after an hour: stage %s, waiting %+v; want waiting for the paused vendor", st.Stage, st.Waiting)
			}
			if got := r.requests(); !maps.Equal(got, tc.want) {
				t.Fatalf("requests %v, want %v: a stale pass let a request through the pause", got, tc.want)
			}
		})
	}
}
