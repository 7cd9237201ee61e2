package workflows

// The paid protocol's conformance suite (invariant 7 of docs/design.md):
// one table of cases, run on every adapter kind (http, go, activity, and
// an activity adapter without a look-up activity) and every remote step
// kind (paid, effect). Each case allocates an episode in a real SQLite
// ledger, runs the Episode workflow in the test environment (virtual time)
// with the real activities, against one simulated vendor
// (paidvendortest.Simulator) that ignores idempotency keys, so that a
// second send of a task shows as a second charge. After every case:
//
//   - per idempotency key at most one submission was accepted (the
//     simulator's charges), and as many submit requests reached the vendor
//     as the case allows;
//   - the ledger's cost entries are the vendor's charges of the references
//     it recorded, for paid steps, and there are none for effect steps;
//   - the episode completed, or parked (needs_attention) with the named
//     error type, in the state query and in the ledger, and nothing was
//     sent while it stayed parked for hours;
//   - ledger.Check finds nothing, and ledger.Audit (two hours on) finds
//     only the unknown outcome a parked intent is;
//   - no activity was retried until the test environment gave it up
//     (Temporal would retry it forever), and no Episode looped without
//     settling.
//
// Faults: the simulator's own (a response lost after accept, a 503 before
// accept, no look-up), a refused key (401), look-ups that fail for a
// while, and workers that die. A dead worker is an attempt that panics at
// the point it dies, so nothing after it runs: after writing the intent
// (http, go: while reading the vendor's key; activity: PaidPrepare's result
// is lost), or while sending, with the request at the vendor or not. The
// ledger compares a send's deadline with the wall clock, not the test's
// virtual time, so a send that died is given a deadline already past (30 s
// in production) instead of waiting for it. Concurrent attempts are two
// SubmitPaidTask calls (http, go) or two interleaved phase sequences
// (activity), before the Episode finishes the step.
//
// Run it with: go test ./workflows -run Conformance -count=1 (-v for the
// matrix).

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"allot"
	"allot/activities"
	"allot/internal/ledger"
	"allot/internal/payonce"
	"allot/internal/protocoltest"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
)

const (
	confPipeline  = "conf"
	confStep      = "work"
	confVendor    = "conf-vendor"
	confKeyEnv    = "ALLOT_CONFORMANCE_VENDOR_KEY"
	confGoodKey   = "sk-conformance-good"
	confWrongKey  = "sk-conformance-revoked"
	confDeadOwner = "an-earlier-run-that-died"
)

// The activity adapter's activity types.
var confNames = protocoltest.Names{Submit: "ConfSubmit", Lookup: "ConfLookup", Status: "ConfStatus", Fetch: "ConfFetch"}

// confAdapter is how allot reaches the vendor.
type confAdapter struct {
	name    string
	adapter string // pipeline.AdapterHTTP, AdapterGo or AdapterActivity
	// noLookupActivity: an activity adapter that names no lookup activity
	// (a vendor that cannot look up); it runs the no-lookup cases only.
	noLookupActivity bool
}

// self: the worker calls the adapter itself, in SubmitPaidTask.
func (a confAdapter) self() bool { return a.adapter != pipeline.AdapterActivity }

// asks: a look-up reaches the vendor (and is answered, if only by 501).
func (a confAdapter) asks() bool { return !a.noLookupActivity }

var confAdapters = []confAdapter{
	{name: "http", adapter: pipeline.AdapterHTTP},
	{name: "go", adapter: pipeline.AdapterGo},
	{name: "activity", adapter: pipeline.AdapterActivity},
	{name: "activity-nolookup", adapter: pipeline.AdapterActivity, noLookupActivity: true},
}

// Where a worker dies, or a dead run left the task.
type confKill int

const (
	_ confKill = iota // no kill
	// killAfterIntent: the worker dies after the intent is written, before
	// the send is marked (http/go: while it builds the vendor's adapter;
	// activity: PaidPrepare's result is lost).
	killAfterIntent
	// killSendingReached: the worker dies while sending, after the request
	// reached the vendor (accepted and charged), before the answer is
	// written.
	killSendingReached
	// killSendingLost: the worker dies while sending, before the request
	// left: the vendor has nothing, but the ledger says it may.
	killSendingLost
)

// Two attempts at once on the same paid task.
type confConc int

const (
	_ confConc = iota // one attempt
	// concWhileSending: the second attempt comes while the first one's
	// request is in flight.
	concWhileSending
	// concBeforeSend: the second attempt comes after the first wrote its
	// intent and before it marked the send.
	concBeforeSend
)

type confCase struct {
	name     string
	noLookup bool
	// submits are the simulator's faults for the submissions in order.
	submits []paidvendortest.SimFaults
	// lookupFailures: the first look-ups answer 503 (the vendor is down).
	lookupFailures int
	// wrongKey: the worker's (or the adapter's) key is refused (401).
	wrongKey bool
	// deadIntent: an earlier run that died wrote the intent (only).
	deadIntent bool
	kill       confKill
	conc       confConc
	want       func(ad confAdapter) confWant
}

type confWant struct {
	// parked is the attention's error type; "" means the episode completes.
	parked    string
	taskState allot.PaidTaskState // the parked step's task state
	charges   int                 // what the vendor charged, in all
	submits   int                 // submit requests that reached the vendor
	// lookupFirst: a look-up reached the vendor before the first submit.
	lookupFirst bool
	// lookups: at least this many look-ups reached the vendor.
	lookups int
	// noLookups: no look-up reached the vendor.
	noLookups bool
}

var (
	lose1 = []paidvendortest.SimFaults{{LoseResponseAfterAccept: 1}}
	fail1 = []paidvendortest.SimFaults{{FailBeforeAccept: 1}}
)

func completes(charges, submits int) confWant { return confWant{charges: charges, submits: submits} }

func parks(errType string, state allot.PaidTaskState, charges, submits int) confWant {
	return confWant{parked: errType, taskState: state, charges: charges, submits: submits}
}

var confCases = []confCase{
	{name: "lost-response/lookup", submits: lose1, want: func(confAdapter) confWant {
		w := completes(1, 1) // adopted by key
		w.lookups = 1
		return w
	}},
	{name: "lost-response/no-lookup", noLookup: true, submits: lose1, want: func(confAdapter) confWant {
		return parks(allot.OutcomeUnknown, allot.PaidIntent, 1, 1)
	}},
	{name: "fail-before-accept", submits: fail1, want: func(confAdapter) confWant {
		w := completes(1, 2) // 503, asked (nothing), sent again
		w.lookups = 1
		return w
	}},
	{name: "no-lookup/fail-before-accept", noLookup: true, submits: fail1, want: func(confAdapter) confWant {
		// A 503 is no answer: as far as allot knows, the vendor may have
		// the task; it cannot be asked, so the episode parks.
		return parks(allot.OutcomeUnknown, allot.PaidIntent, 0, 1)
	}},
	{name: "no-lookup/clean", noLookup: true, want: func(confAdapter) confWant {
		w := completes(1, 1)
		w.noLookups = true // an attempt that owns its unsent intent asks nobody
		return w
	}},
	{name: "killed-after-intent/lookup", kill: killAfterIntent, want: confKilledAfterIntent},
	{name: "killed-after-intent/no-lookup", noLookup: true, kill: killAfterIntent, want: confKilledAfterIntent},
	{name: "dead-run-intent/lookup", deadIntent: true, want: func(confAdapter) confWant {
		w := completes(1, 1)
		w.lookupFirst = true
		return w
	}},
	{name: "dead-run-intent/no-lookup", noLookup: true, deadIntent: true, want: func(ad confAdapter) confWant {
		// Never sent: the vendor's "cannot tell" does not stop the send.
		w := completes(1, 1)
		w.lookupFirst = ad.asks()
		w.noLookups = !ad.asks()
		return w
	}},
	{name: "dead-run-intent/lookup-unavailable", deadIntent: true, lookupFailures: 6, want: func(confAdapter) confWant {
		// More failed look-ups than one call's retries: asked again until
		// the vendor answers, then sent once.
		w := completes(1, 1)
		w.lookupFirst = true
		w.lookups = 7
		return w
	}},
	{name: "killed-while-sending/reached/lookup", kill: killSendingReached, want: func(confAdapter) confWant {
		w := completes(1, 1) // adopted by key
		w.lookups = 1
		return w
	}},
	{name: "killed-while-sending/reached/no-lookup", noLookup: true, kill: killSendingReached, want: func(confAdapter) confWant {
		return parks(allot.OutcomeUnknown, allot.PaidIntent, 1, 1)
	}},
	{name: "killed-while-sending/lost/lookup", kill: killSendingLost, want: func(confAdapter) confWant {
		w := completes(1, 1) // the vendor had nothing: sent once
		w.lookupFirst = true
		return w
	}},
	{name: "killed-while-sending/lost/no-lookup", noLookup: true, kill: killSendingLost, want: func(confAdapter) confWant {
		return parks(allot.OutcomeUnknown, allot.PaidIntent, 0, 0)
	}},
	{name: "wrong-key/submit", wrongKey: true, want: func(confAdapter) confWant {
		// Refused: the intent goes back to planned, nothing charged.
		return parks(allot.VendorNotConfigured, allot.PaidPlanned, 0, 1)
	}},
	{name: "wrong-key/lookup", wrongKey: true, deadIntent: true, want: func(confAdapter) confWant {
		w := parks(allot.VendorNotConfigured, allot.PaidIntent, 0, 0)
		w.lookups = 1
		return w
	}},
	{name: "concurrent/while-sending/lookup", conc: concWhileSending, want: confConcurrent},
	{name: "concurrent/while-sending/no-lookup", noLookup: true, conc: concWhileSending, want: confConcurrent},
	{name: "concurrent/before-send/lookup", conc: concBeforeSend, want: confConcurrent},
	{name: "concurrent/before-send/no-lookup", noLookup: true, conc: concBeforeSend, want: confConcurrent},
}

func confKilledAfterIntent(ad confAdapter) confWant {
	w := completes(1, 1)
	if ad.self() {
		// The next attempt is another owner: it asks by key first (a
		// vendor without look-up answers 501), then sends, once.
		w.lookupFirst = true
	} else {
		// The workflow's attempt still owns its intent, never sent:
		// nothing to ask.
		w.noLookups = true
	}
	return w
}

func confConcurrent(confAdapter) confWant { return completes(1, 1) }

func TestProtocolConformance(t *testing.T) {
	for _, ad := range confAdapters {
		for _, kind := range []allot.StepKind{allot.KindPaid, allot.KindEffect} {
			for _, c := range confCases {
				if ad.noLookupActivity && !c.noLookup {
					continue // a vendor without a look-up activity has only no-lookup cases
				}
				t.Run(fmt.Sprintf("%s/%s/%s", ad.name, kind, c.name), func(t *testing.T) {
					newConfRun(t, ad, kind, c).play()
				})
			}
		}
	}
}

// confRun is one case on one adapter and step kind.
type confRun struct {
	t    *testing.T
	ad   confAdapter
	kind allot.StepKind
	c    confCase
	want confWant
	ctx  context.Context

	led     *ledger.Ledger
	acts    *activities.Activities
	vendor  *protocoltest.Vendor
	adapter *protocoltest.Adapter // the activity adapter
	episode string
	ref     ledger.PaidTaskRef
	key     string // the task's idempotency key

	// credsHook runs in every read of the vendor's credentials by the
	// worker (http, go), with its 1-based number: between the intent and
	// the send.
	credsHook func(n int)
	creds     atomic.Int32
	kills     atomic.Int32
}

// confGiveUp is the test environment's limit of attempts for an activity
// whose retry policy has none.
const confGiveUp = 10

// confMaxActivities bounds the activities of one case's Episode: the
// busiest case needs a few dozen.
const confMaxActivities = 300

// confDied is what a worker that dies panics with: nothing after it runs.
const confDied = "the worker died here (conformance fault)"

func newConfRun(t *testing.T, ad confAdapter, kind allot.StepKind, c confCase) *confRun {
	t.Helper()
	r := &confRun{t: t, ad: ad, kind: kind, c: c, want: c.want(ad), ctx: context.Background()}
	dir := t.TempDir()

	sim := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: confGoodKey, Seed: 1, IgnoreIdempotency: true})
	r.vendor = protocoltest.NewVendor(sim, paidvendortest.SimFaults{NoLookup: c.noLookup, IgnoreIdempotency: true})
	r.vendor.Submits = c.submits
	r.vendor.LookupFailures = c.lookupFailures
	srv := httptest.NewServer(r.vendor)
	t.Cleanup(srv.Close)

	set, err := pipeline.Parse([]byte(confPipelines(ad, kind, srv.URL)), "protocol_conformance_test")
	if err != nil {
		t.Fatalf("parse the pipelines: %v", err)
	}
	led, err := ledger.Open(r.ctx, "sqlite:"+filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatalf("open the ledger: %v", err)
	}
	t.Cleanup(func() { _ = led.Close() })
	r.led = led

	key := confGoodKey
	if c.wrongKey {
		key = confWrongKey
	}
	t.Setenv(confKeyEnv, key)
	var factories map[string]paidvendor.Factory
	if ad.adapter == pipeline.AdapterGo {
		factories = map[string]paidvendor.Factory{confVendor: protocoltest.Factory(r.vendor)}
	}
	vendors, err := activities.NamedVendors(set, factories)
	if err != nil {
		t.Fatalf("NamedVendors: %v", err)
	}
	if v, ok := vendors[confVendor]; ok {
		v.Credentials = confCreds{inner: v.Credentials, r: r}
		build := v.New
		v.New = func(apiKey string) (paidvendor.Submitter, error) {
			s, err := build(apiKey)
			if err != nil || (c.kill != killSendingReached && c.kill != killSendingLost) {
				return s, err
			}
			return confKiller{Client: s.(paidvendor.Client), r: r}, nil
		}
		vendors[confVendor] = v
	}
	r.acts = &activities.Activities{
		Ledger: led, Pipelines: set, ArtifactsDir: filepath.Join(dir, "artifacts"),
		PollInterval: time.Millisecond, Vendors: vendors,
	}
	if ad.adapter == pipeline.AdapterActivity {
		// The adapter's worker holds its own credentials.
		client, err := paidvendor.NewHTTPClient(srv.URL, key, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.adapter = &protocoltest.Adapter{Client: client}
		if c.kill == killSendingReached || c.kill == killSendingLost {
			r.adapter.BeforeSubmit = func(ctx context.Context, n int, req paidvendor.ActivitySubmitRequest) error {
				if n == 1 {
					r.kills.Add(1)
					if c.kill == killSendingReached {
						_, _ = client.Submit(ctx, paidvendor.SubmitRequest(req))
					}
					panic(confDied)
				}
				return nil
			}
		}
	}

	p, err := set.Get(confPipeline)
	if err != nil {
		t.Fatal(err)
	}
	nominal := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	alloc, err := led.Allocate(r.ctx, ledger.AllocateInput{
		Pipeline: confPipeline, Key: allot.AllocationKey(confPipeline, nominal), Period: p.PeriodOf(nominal), NominalTime: nominal,
	})
	if err != nil {
		t.Fatalf("allocate: %v", err)
	}
	// As the ScheduledRun that allocated it records.
	if _, err := led.RecordRunOutcome(r.ctx, ledger.RunOutcome{
		Pipeline: confPipeline, AllocationKey: alloc.Episode.AllocationKey, RunID: "run-1", NominalTime: nominal,
		NominalTimeSource: allot.NominalFromKey, Outcome: allot.OutcomeAllocated, Reason: allot.ReasonNewEpisode,
		EpisodeID: alloc.Episode.ID, Period: alloc.Episode.Period, Sequence: alloc.Episode.Sequence,
	}); err != nil {
		t.Fatalf("record the run: %v", err)
	}
	r.episode = alloc.Episode.ID
	r.ref = ledger.PaidTaskRef{Pipeline: confPipeline, EpisodeID: r.episode, Step: confStep}
	r.key = allot.IdempotencyKey(confPipeline, r.episode, confStep, 0)
	return r
}

func confPipelines(ad confAdapter, kind allot.StepKind, url string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[[vendor]]\nname = %q\nadapter = %q\n", confVendor, ad.adapter)
	switch ad.adapter {
	case pipeline.AdapterHTTP:
		fmt.Fprintf(&b, "url = %q\napi_key_env = %q\n", url, confKeyEnv)
	case pipeline.AdapterGo:
		fmt.Fprintf(&b, "api_key_env = %q\n", confKeyEnv)
	case pipeline.AdapterActivity:
		fmt.Fprintf(&b, "task_queue = \"conf-vendor-queue\"\n[vendor.activities]\nsubmit = %q\nstatus = %q\nfetch = %q\n", confNames.Submit, confNames.Status, confNames.Fetch)
		if !ad.noLookupActivity {
			fmt.Fprintf(&b, "lookup = %q\n", confNames.Lookup)
		}
	}
	action := "render-video"
	if kind == allot.KindEffect {
		action = "notify"
	}
	fmt.Fprintf(&b, "\n[[pipeline]]\nname = %q\n\n  [[pipeline.step]]\n  name = %q\n  kind = %q\n  vendor = %q\n  action = %q\n  params = { lang = \"en\" }\n",
		confPipeline, confStep, kind, confVendor, action)
	return b.String()
}

// confCreds is the vendor's key source with the case's hook.
type confCreds struct {
	inner paidvendor.CredentialsSource
	r     *confRun
}

func (c confCreds) VendorAPIKey(ctx context.Context) (string, error) {
	n := int(c.r.creds.Add(1))
	if h := c.r.credsHook; h != nil {
		h(n)
	}
	return c.inner.VendorAPIKey(ctx)
}

// confKiller is the vendor's adapter on a worker that dies during its
// first send: after the request reached the vendor (killSendingReached) or
// before it left (killSendingLost). By the time another attempt runs, the
// dead send's deadline has passed (30 s in real time; the test moves it
// instead of waiting, as a dead worker cannot end its send).
type confKiller struct {
	paidvendor.Client
	r *confRun
}

func (k confKiller) Submit(ctx context.Context, req paidvendor.SubmitRequest) (paidvendor.Task, error) {
	if k.r.kills.Add(1) > 1 {
		return k.Client.Submit(ctx, req)
	}
	if k.r.c.kill == killSendingReached {
		_, _ = k.Client.Submit(ctx, req) // its answer dies with the worker
	}
	task, err := k.r.led.PaidTask(context.Background(), k.r.ref)
	if err != nil || !task.MaybeSent {
		k.r.t.Errorf("a send began without being marked: %+v, %v", task, err)
	} else if _, err := k.r.led.MarkSending(context.Background(), k.r.ref, task.Owner, time.Now().Add(-time.Millisecond)); err != nil {
		k.r.t.Errorf("expire the dead send: %v", err)
	}
	panic(confDied)
}

// play runs the case: what comes before the Episode (a dead run's intent,
// two concurrent attempts), the Episode until it completes or has stayed
// parked for hours, and the checks.
func (r *confRun) play() {
	t := r.t
	if r.c.deadIntent {
		if _, err := r.led.WriteIntent(r.ctx, r.ref, r.key, confDeadOwner); err != nil {
			t.Fatal(err)
		}
	}
	switch r.c.conc {
	case concWhileSending, concBeforeSend:
		if r.ad.self() {
			r.concurrentSubmits()
		} else {
			r.concurrentPhases()
		}
		if t.Failed() {
			return
		}
	}
	r.runEpisode()
	r.check()
}

func (r *confRun) newEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	// The test environment gives an activity up after 10 attempts where
	// Temporal retries it without limit: an activity that got that far
	// would, in production, repeat the same call forever.
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, err error) {
		if err != nil && info.Attempt >= confGiveUp {
			r.t.Errorf("activity %s failed %d times in a row with the same input (in production it never stops): %v", info.ActivityType.Name, info.Attempt, err)
		}
	})
	// A workflow that loops through activities without ever waiting is
	// never idle, so the test timeout does not end it: stop it here.
	started := 0
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if started++; started == confMaxActivities {
			r.t.Errorf("the episode ran %d activities without settling: it loops (last: %s)", started, info.ActivityType.Name)
			env.CancelWorkflow()
		}
	})
	env.RegisterWorkflow(Episode)
	env.RegisterActivity(r.acts)
	if r.adapter != nil {
		names := confNames
		if r.ad.noLookupActivity {
			names.Lookup = ""
		}
		r.adapter.Register(env, names)
	}
	if r.c.kill == killAfterIntent {
		if r.ad.self() {
			// The intent is written; the worker dies building the
			// vendor's adapter, before the send is marked.
			r.credsHook = func(n int) {
				if n == 1 {
					r.kills.Add(1)
					panic(confDied)
				}
			}
		} else {
			// PaidPrepare writes the intent, and the worker dies before
			// its result is reported: Temporal runs it again.
			env.RegisterActivityWithOptions(func(ctx context.Context, in activities.PaidPhaseInput) (activities.PaidPlan, error) {
				plan, err := r.acts.PaidPrepare(ctx, in)
				if err == nil && r.kills.Add(1) == 1 {
					panic(confDied)
				}
				return plan, err
			}, activity.RegisterOptions{Name: "PaidPrepare", DisableAlreadyRegisteredCheck: true})
		}
	}
	return env
}

// confParked is what the case saw while the episode was parked.
type confParked struct {
	state         EpisodeState
	episode       ledger.Episode
	submitsBefore int
}

func (r *confRun) runEpisode() {
	t := r.t
	env := r.newEnv()
	var parked *confParked
	// A parked episode waits for an operator; look at it once it has
	// waited an hour, and again two hours later: nothing may have been
	// sent meanwhile.
	env.RegisterDelayedCallback(func() {
		st, err := r.query(env)
		if err != nil {
			t.Errorf("query: %v", err)
			env.CancelWorkflow()
			return
		}
		if st.Stage != allot.StageNeedsAttention {
			t.Errorf("after an hour the episode is %s, neither completed nor parked: %s", st.Stage, modelSummary(st))
			env.CancelWorkflow()
			return
		}
		ep, err := r.led.Episode(r.ctx, confPipeline, r.episode)
		if err != nil {
			t.Error(err)
		}
		parked = &confParked{state: st, episode: ep, submitsBefore: r.vendor.Count(protocoltest.EndpointSubmit)}
		env.RegisterDelayedCallback(func() {
			if n := r.vendor.Count(protocoltest.EndpointSubmit); n != parked.submitsBefore {
				t.Errorf("while parked, %d more submissions reached the vendor", n-parked.submitsBefore)
			}
			env.CancelWorkflow()
		}, 2*time.Hour)
	}, time.Hour)
	executeEpisode(env, EpisodeInput{Pipeline: confPipeline, EpisodeID: r.episode})

	if r.want.parked == "" {
		var res EpisodeResult
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatalf("the episode did not complete: %v (events %v)", err, r.vendor.Events())
		}
		if res.Stage != allot.StageCompleted {
			t.Fatalf("the episode ended %s, want completed", res.Stage)
		}
		ep, err := r.led.Episode(r.ctx, confPipeline, r.episode)
		if err != nil {
			t.Fatal(err)
		}
		if ep.Outcome != string(allot.OutcomeCompleted) {
			t.Errorf("the ledger has the episode %q (%q), want completed", ep.Outcome, ep.OutcomeReason)
		}
		return
	}
	if parked == nil {
		t.Fatalf("the episode never parked (want %s); it ended: %v", r.want.parked, env.GetWorkflowError())
	}
	st := parked.state
	if st.Attention == nil || st.Attention.ErrorType != r.want.parked || st.Attention.Step != confStep {
		t.Fatalf("parked with attention %+v, want %s on step %s", st.Attention, r.want.parked, confStep)
	}
	if st.Attention.TaskState != r.want.taskState {
		t.Errorf("the parked step shows task state %s, want %s", st.Attention.TaskState, r.want.taskState)
	}
	if len(st.Attention.Remedies) == 0 {
		t.Errorf("parked without a remedy")
	}
	if parked.episode.Outcome != string(allot.OutcomeNeedsAttention) || parked.episode.OutcomeReason != r.want.parked {
		t.Errorf("the ledger has the parked episode %q (%q), want %s (%s)", parked.episode.Outcome, parked.episode.OutcomeReason, allot.OutcomeNeedsAttention, r.want.parked)
	}
}

func (r *confRun) query(env *testsuite.TestWorkflowEnvironment) (EpisodeState, error) {
	v, err := env.QueryWorkflow(StateQuery)
	if err != nil {
		return EpisodeState{}, err
	}
	var st EpisodeState
	return st, v.Get(&st)
}

// check asserts what every case promises, from the vendor's and the
// ledger's records.
func (r *confRun) check() {
	t := r.t
	if t.Failed() {
		t.Logf("vendor requests: %v", r.vendor.Events())
	}
	// The vendor: at most one accepted submission per key, as many as
	// the case makes, all of this task.
	charges := r.vendor.Charges()
	perKey := map[string][]string{}
	for _, ch := range charges {
		perKey[ch.IdempotencyKey] = append(perKey[ch.IdempotencyKey], ch.TaskID)
	}
	for key, ids := range perKey {
		if len(ids) > 1 {
			t.Errorf("idempotency key %s was accepted %d times: vendor tasks %v", key, len(ids), ids)
		}
		if key != r.key {
			t.Errorf("the vendor charged key %s, not the task's %s", key, r.key)
		}
	}
	if len(charges) != r.want.charges {
		t.Errorf("the vendor charged %d times, want %d", len(charges), r.want.charges)
	}
	events := r.vendor.Events()
	if n := r.vendor.Count(protocoltest.EndpointSubmit); n != r.want.submits {
		t.Errorf("%d submissions reached the vendor, want %d (requests %v)", n, r.want.submits, events)
	}
	lookups := r.vendor.Count(protocoltest.EndpointLookup)
	if r.want.noLookups && lookups != 0 {
		t.Errorf("%d look-ups reached the vendor, want none (requests %v)", lookups, events)
	}
	if lookups < r.want.lookups {
		t.Errorf("%d look-ups reached the vendor, want at least %d (requests %v)", lookups, r.want.lookups, events)
	}
	if r.want.lookupFirst {
		first := slices.Index(events, protocoltest.EndpointSubmit)
		if first < 0 || !slices.Contains(events[:first], protocoltest.EndpointLookup) {
			t.Errorf("the vendor was not asked by key before the first send (requests %v)", events)
		}
	}

	// The ledger: the task, its reference, and its cost.
	task, err := r.led.PaidTask(r.ctx, r.ref)
	if err != nil {
		t.Fatalf("the paid task: %v", err)
	}
	wantState := r.want.taskState
	if r.want.parked == "" {
		wantState = allot.PaidSucceeded
		if r.kind == allot.KindEffect {
			wantState = allot.PaidSubmitted
		}
	}
	if task.State != wantState {
		t.Errorf("the ledger has the task %s, want %s: %+v", task.State, wantState, task)
	}
	if task.RemoteRef != "" && !slices.Contains(perKey[r.key], task.RemoteRef) {
		t.Errorf("the ledger records vendor task %s, which the vendor did not accept under key %s", task.RemoteRef, r.key)
	}
	if r.want.parked == "" && (len(charges) != 1 || task.RemoteRef != charges[0].TaskID) {
		t.Errorf("the completed task records %q, want the vendor's one task (charges %+v)", task.RemoteRef, charges)
	}
	costs, err := r.led.Costs(r.ctx, confPipeline, "")
	if err != nil {
		t.Fatal(err)
	}
	var wantCosts []string
	if r.kind == allot.KindPaid {
		for _, ch := range charges {
			if ch.TaskID == task.RemoteRef {
				wantCosts = append(wantCosts, fmt.Sprintf("%s %d %s", ch.TaskID, ch.Amount, ch.Currency))
			}
		}
	}
	var gotCosts []string
	for _, c := range costs {
		gotCosts = append(gotCosts, fmt.Sprintf("%s %d %s", c.RemoteRef, c.Amount, c.Currency))
	}
	if !slices.Equal(gotCosts, wantCosts) {
		t.Errorf("the ledger's costs %v, want %v (the vendor's charges of the recorded reference; none for an effect)", gotCosts, wantCosts)
	}

	// The ledger's own checks.
	vs, err := r.led.Check(r.ctx, confPipeline)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Errorf("ledger check: %s", v)
	}
	audit, err := r.led.Audit(r.ctx, ledger.AuditOptions{Pipeline: confPipeline, Now: time.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var kinds, wantKinds []string
	for _, v := range audit.Violations {
		kinds = append(kinds, v.Kind)
	}
	if task.State == allot.PaidIntent {
		// An intent without a reference, hours on, is the unknown
		// outcome the audit must show.
		wantKinds = []string{ledger.KindUnknownOutcome}
	}
	if !slices.Equal(kinds, wantKinds) {
		t.Errorf("ledger audit found %v, want %v: %+v", kinds, wantKinds, audit.Violations)
	}
}

// --- concurrent attempts ---

// concurrentSubmits runs two SubmitPaidTask attempts at once, each in its
// own activity environment as on two workers: the second comes while the
// first one's request is in flight, or between its intent and its send.
// One submission; both end with the same reference, or the loser waits and
// its retry finds the winner's.
func (r *confRun) concurrentSubmits() {
	t := r.t
	in := activities.PaidTaskInput{Pipeline: confPipeline, EpisodeID: r.episode, Step: confStep}
	attempt := func() (activities.PaidTaskResult, error) {
		env := r.activityEnv()
		v, err := env.ExecuteActivity(r.acts.SubmitPaidTask, in)
		var res activities.PaidTaskResult
		if err == nil {
			err = v.Get(&res)
		}
		return res, err
	}
	type result struct {
		res activities.PaidTaskResult
		err error
	}
	var entered <-chan struct{}
	var release func()
	switch r.c.conc {
	case concWhileSending:
		entered, release = r.vendor.Hold(1)
	case concBeforeSend:
		in, out := make(chan struct{}), make(chan struct{})
		entered, release = in, func() { close(out) }
		r.credsHook = func(n int) {
			if n == 1 {
				close(in)
				<-out
			}
		}
	}
	first := make(chan result, 1)
	go func() {
		res, err := attempt()
		first <- result{res, err}
	}()
	<-entered
	second, err := attempt()
	switch r.c.conc {
	case concWhileSending:
		// The first attempt's send may still arrive: the second waits,
		// asking and sending nothing.
		if err == nil || !retryable(err) {
			t.Errorf("an attempt during another's send: %+v, %v; want a retryable wait", second, err)
		}
		if evs := r.vendor.Events(); len(evs) != 1 {
			t.Errorf("an attempt during another's send reached the vendor: %v", evs)
		}
	case concBeforeSend:
		// The first has not sent: the second asks, takes the intent over
		// and sends.
		if err != nil || second.State != allot.PaidSubmitted {
			t.Errorf("an attempt while another held an unsent intent: %+v, %v; want it sent", second, err)
		}
	}
	release()
	a := <-first
	r.credsHook = nil
	ref := a.res.RemoteRef
	if r.c.conc == concBeforeSend {
		ref = second.RemoteRef
		// The first lost its intent while it built its adapter: it must
		// not send; it fails (retryable) or finds the winner's task.
		if a.err == nil && a.res.RemoteRef != ref {
			t.Errorf("the first attempt ended with %q, the second with %q", a.res.RemoteRef, ref)
		}
		if a.err != nil && !retryable(a.err) {
			t.Errorf("the first attempt failed for good: %v", a.err)
		}
	} else if a.err != nil || a.res.State != allot.PaidSubmitted {
		t.Errorf("the first attempt: %+v, %v; want it sent", a.res, a.err)
	}
	// Retried, the loser finds the winner's task.
	again, err := attempt()
	if err != nil || again.RemoteRef != ref || ref == "" {
		t.Errorf("a retry after the race: %+v, %v; want reference %q", again, err, ref)
	}
}

func (r *confRun) activityEnv() *testsuite.TestActivityEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(r.acts)
	if r.adapter != nil {
		names := confNames
		if r.ad.noLookupActivity {
			names.Lookup = ""
		}
		r.adapter.Register(env, names)
	}
	return env
}

// confPhases drives the protocol's phases for one owner, as the Episode
// does for an activity adapter (remoteSubmit), a call at a time.
type confPhases struct {
	r     *confRun
	env   *testsuite.TestActivityEnvironment
	phase activities.PaidPhaseInput
}

func (r *confRun) phases(owner string) *confPhases {
	return &confPhases{r: r, env: r.activityEnv(), phase: activities.PaidPhaseInput{
		PaidTaskInput: activities.PaidTaskInput{Pipeline: confPipeline, EpisodeID: r.episode, Step: confStep}, Owner: owner,
	}}
}

func confCall[T any](env *testsuite.TestActivityEnvironment, fn any, in any) (T, error) {
	var out T
	v, err := env.ExecuteActivity(fn, in)
	if err == nil {
		err = v.Get(&out)
	}
	return out, err
}

func (p *confPhases) prepare() activities.PaidPlan {
	plan, err := confCall[activities.PaidPlan](p.env, p.r.acts.PaidPrepare, p.phase)
	if err != nil {
		p.r.t.Fatalf("%s: PaidPrepare: %v", p.phase.Owner, err)
	}
	return plan
}

func (p *confPhases) lookup(plan activities.PaidPlan) activities.PaidPlan {
	out := payonce.LookupOutcome{Unsupported: true}
	if !p.r.ad.noLookupActivity {
		task, err := confCall[paidvendor.ActivityTask](p.env, confNames.Lookup, paidvendor.ActivityLookupRequest{IdempotencyKey: plan.IdempotencyKey})
		switch errorType(err) {
		case "":
			if err != nil {
				p.r.t.Fatalf("%s: lookup: %v", p.phase.Owner, err)
			}
			vt, terr := task.Task()
			if terr != nil {
				p.r.t.Fatal(terr)
			}
			out = payonce.LookupOutcome{Found: &vt}
		case paidvendor.ActivityErrNotFound:
			out = payonce.LookupOutcome{NotFound: true}
		case paidvendor.ActivityErrLookupUnsupported:
		default:
			p.r.t.Fatalf("%s: lookup: %v", p.phase.Owner, err)
		}
	}
	next, err := confCall[activities.PaidPlan](p.env, p.r.acts.PaidAfterLookup, activities.PaidAfterLookupInput{PaidPhaseInput: p.phase, Plan: plan, Outcome: out})
	if err != nil {
		p.r.t.Fatalf("%s: PaidAfterLookup: %v", p.phase.Owner, err)
	}
	return next
}

func (p *confPhases) beginSend(plan activities.PaidPlan) (payonce.SendRequest, error) {
	return confCall[payonce.SendRequest](p.env, p.r.acts.PaidBeginSend, activities.PaidSendInput{PaidPhaseInput: p.phase, Plan: plan})
}

func (p *confPhases) send(plan activities.PaidPlan, send payonce.SendRequest) (activities.PaidTaskResult, error) {
	task, err := confCall[paidvendor.ActivityTask](p.env, confNames.Submit, paidvendor.ActivitySubmitRequest{
		IdempotencyKey: send.Request.IdempotencyKey, Kind: send.Request.Kind, Params: send.Request.Params,
	})
	return confCall[activities.PaidTaskResult](p.env, p.r.acts.PaidAfterSend, activities.PaidAfterSendInput{
		PaidPhaseInput: p.phase, Plan: plan, Outcome: sendOutcomeOf(err, task),
	})
}

// concurrentPhases interleaves two owners' phase sequences on one task,
// as two Episode attempts of an activity adapter would run them.
func (r *confRun) concurrentPhases() {
	t := r.t
	a, b := r.phases("attempt-a"), r.phases("attempt-b")
	planA := a.prepare()
	if planA.Next != payonce.NextSend {
		t.Fatalf("the first attempt: next %s, want send", planA.Next)
	}
	var ref string
	switch r.c.conc {
	case concWhileSending:
		sendA, err := a.beginSend(planA)
		if err != nil {
			t.Fatal(err)
		}
		// A's request is in flight: B waits for its deadline.
		if planB := b.prepare(); planB.Next != payonce.NextWait {
			t.Errorf("an attempt during another's send: next %s, want wait", planB.Next)
		}
		resA, err := a.send(planA, sendA)
		if err != nil || resA.State != allot.PaidSubmitted {
			t.Fatalf("the first attempt's send: %+v, %v", resA, err)
		}
		ref = resA.RemoteRef
	case concBeforeSend:
		// B comes between A's intent and A's send: it asks, takes over
		// and sends; A's send is refused.
		planB := b.prepare()
		if planB.Next != payonce.NextLookup {
			t.Fatalf("an attempt on another's unsent intent: next %s, want lookup", planB.Next)
		}
		planB = b.lookup(planB)
		if planB.Next != payonce.NextSend {
			t.Fatalf("after the look-up: next %s, want send", planB.Next)
		}
		sendB, err := b.beginSend(planB)
		if err != nil {
			t.Fatal(err)
		}
		resB, err := b.send(planB, sendB)
		if err != nil || resB.State != allot.PaidSubmitted {
			t.Fatalf("the second attempt's send: %+v, %v", resB, err)
		}
		ref = resB.RemoteRef
		if _, err := a.beginSend(planA); err == nil || !retryable(err) {
			t.Errorf("the first attempt began a send on an intent it lost: %v; want a retryable refusal", err)
		}
	}
	// Each prepares again and finds the one task.
	for _, p := range []*confPhases{a, b} {
		plan := p.prepare()
		if plan.Next != payonce.NextDone || plan.Result == nil || plan.Result.RemoteRef != ref {
			t.Errorf("%s after the race: %+v, want done with %s", p.phase.Owner, plan, ref)
		}
	}
}
