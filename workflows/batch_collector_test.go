package workflows

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"allot"
	"allot/activities"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/paidvendor/vendorapi"
)

// The BatchCollector in virtual time, with the real batch activities, a
// real ledger and the simulated vendor on the environment's clock.

const collectorVendorKey = "sk-collector-test"

type collectorCreds struct{}

func (collectorCreds) VendorAPIKey(context.Context) (string, error) { return collectorVendorKey, nil }

type collectorRun struct {
	t    *testing.T
	env  *testsuite.TestWorkflowEnvironment
	led  *ledgertest.Ledger
	sim  *paidvendortest.Simulator
	acts *activities.Activities

	mu   sync.Mutex
	done map[ledger.PaidTaskRef][]BatchItemDone // the signals each item's workflow got
	// refuse makes the vendor answer every create with a 400.
	refuse  atomic.Bool
	creates atomic.Int32
}

func newCollectorRun(t *testing.T, faults paidvendortest.SimFaults) *collectorRun {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	r := &collectorRun{t: t, env: env, led: ledgertest.New(t), done: map[ledger.PaidTaskRef][]BatchItemDone{}}
	r.sim = paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: collectorVendorKey, Seed: 1, Clock: env.Now,
		PricePerKind: map[string]paidvendor.Cost{"score": {Amount: 300, Currency: "USD"}}, BatchDuration: 4 * time.Hour})
	if err := r.sim.SetFaults(faults); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost && req.URL.Path == vendorapi.BatchesPath {
			r.creates.Add(1)
			if r.refuse.Load() {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":{"code":"invalid_request","message":"model not available for batch"}}`))
				return
			}
		}
		r.sim.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.acts = &activities.Activities{Ledger: r.led.Led, ArtifactsDir: filepath.Join(t.TempDir(), "artifacts"),
		Credentials: collectorCreds{}, NewVendor: paidvendor.HTTPClientFactory(srv.URL)}
	env.RegisterWorkflow(BatchCollector)
	env.RegisterActivity(r.acts)
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", BatchItemDoneSignal, mock.Anything).Return(
		func(_, _, _, _ string, arg any) error {
			d := arg.(BatchItemDone)
			r.mu.Lock()
			r.done[d.Ref] = append(r.done[d.Ref], d)
			r.mu.Unlock()
			return nil
		})
	env.SetStartWorkflowOptions(startOptions(allot.BatchCollectorID("default", "score")))
	return r
}

// queue writes n items' intents as waiting for a batch and returns what
// their episodes send the collector.
func (r *collectorRun) queue(n int, from time.Time) []BatchItemRequest {
	r.t.Helper()
	var out []BatchItemRequest
	for i := range n {
		ep := r.led.Allocate("evals", from.Add(time.Duration(i)*time.Minute))
		ref := ledger.PaidTaskRef{Pipeline: ep.Pipeline, EpisodeID: ep.ID, Step: "score"}
		key := allot.IdempotencyKey(ref.Pipeline, ref.EpisodeID, ref.Step, ref.Revision)
		if _, err := r.led.Led.WriteIntent(context.Background(), ref, key, ledger.BatchQueue); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, BatchItemRequest{Ref: ref, Params: map[string]string{"case": ep.ID}, NotifyWorkflowID: allot.EpisodeWorkflowID(ep.Pipeline, ep.ID)})
	}
	return out
}

// checkEachItemOnce: every item's workflow was told once, succeeded, and
// the vendor billed it once; the vendor made wantBatches batches.
func (r *collectorRun) checkEachItemOnce(items []BatchItemRequest, wantBatches int) {
	r.t.Helper()
	billed := map[string]int{}
	for _, c := range r.sim.Charges() {
		billed[c.IdempotencyKey]++
	}
	for _, it := range items {
		pt, err := r.led.Led.PaidTask(context.Background(), it.Ref)
		if err != nil {
			r.t.Fatal(err)
		}
		if pt.State != allot.PaidSucceeded || billed[pt.IdempotencyKey] != 1 {
			r.t.Errorf("%s: %s, billed %d times; want succeeded, billed once", it.Ref.EpisodeID, pt.State, billed[pt.IdempotencyKey])
		}
		if got := r.done[it.Ref]; len(got) != 1 || got[0].Outcome != allot.BatchItemSucceeded {
			r.t.Errorf("%s's workflow was told %+v, want succeeded once", it.Ref.EpisodeID, got)
		}
	}
	if n := r.sim.BatchCount(); n != wantBatches {
		r.t.Errorf("the vendor made %d batches, want %d", n, wantBatches)
	}
}

// Items close a batch by size, the rest by age; each item is sent once
// and its workflow told once.
func TestBatchCollectorClosesBySizeAndAge(t *testing.T) {
	r := newCollectorRun(t, paidvendortest.SimFaults{})
	first := r.queue(3, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	late := r.queue(2, time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	for i, it := range late {
		r.env.RegisterDelayedCallback(func() { r.env.SignalWorkflow(BatchItemSignal, it) }, time.Duration(i+1)*time.Minute)
	}
	// A repeated signal (the episode's activity retried) is the same item.
	r.env.RegisterDelayedCallback(func() { r.env.SignalWorkflow(BatchItemSignal, late[0]) }, 3*time.Minute)
	var states []BatchCollectorState
	r.env.RegisterDelayedCallback(func() {
		v, err := r.env.QueryWorkflow(BatchCollectorStateQuery)
		if err != nil {
			t.Error(err)
			return
		}
		var s BatchCollectorState
		if err := v.Get(&s); err != nil {
			t.Error(err)
		}
		states = append(states, s)
	}, 10*time.Minute)
	r.env.ExecuteWorkflow(BatchCollector, BatchCollectorInput{LedgerID: r.led.Led.ID(), Vendor: "default", Kind: "score",
		MaxItems: 3, MaxWait: 30 * time.Minute, PollEvery: 30 * time.Minute, Pending: first})
	if !r.env.IsWorkflowCompleted() || r.env.GetWorkflowError() != nil {
		t.Fatalf("collector: completed %v, error %v", r.env.IsWorkflowCompleted(), r.env.GetWorkflowError())
	}
	r.checkEachItemOnce(append(first, late...), 2)
	if len(states) != 1 || states[0].Pending != 2 || len(states[0].Batches) != 1 || states[0].Batches[0].State != allot.BatchCreated {
		t.Errorf("state 10 minutes in = %+v, want the full batch created and 2 items pending", states)
	}
}

// A batch that expires half way: its unprocessed items go into the next
// batch under their same keys, and nothing is billed twice.
func TestBatchCollectorSendsUnprocessedItemsAgain(t *testing.T) {
	r := newCollectorRun(t, paidvendortest.SimFaults{BatchExpireHalfway: 1})
	items := r.queue(4, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	// The fault strikes the first batch only (created at a minute).
	r.env.RegisterDelayedCallback(func() {
		if err := r.sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
			t.Error(err)
		}
	}, 90*time.Second)
	r.env.ExecuteWorkflow(BatchCollector, BatchCollectorInput{LedgerID: r.led.Led.ID(), Vendor: "default", Kind: "score",
		MaxItems: 10, MaxWait: time.Minute, PollEvery: 30 * time.Minute, Pending: items})
	if !r.env.IsWorkflowCompleted() || r.env.GetWorkflowError() != nil {
		t.Fatalf("collector: completed %v, error %v", r.env.IsWorkflowCompleted(), r.env.GetWorkflowError())
	}
	r.checkEachItemOnce(items, 2)
}

// A vendor that refuses every create: each item goes into one more batch
// (the refusal may be another item's), then its workflow is told why and
// the collector stops sending it. Nothing is billed.
func TestBatchCollectorStopsSendingWhatTheVendorRefuses(t *testing.T) {
	r := newCollectorRun(t, paidvendortest.SimFaults{})
	r.refuse.Store(true)
	items := r.queue(2, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	r.env.ExecuteWorkflow(BatchCollector, BatchCollectorInput{LedgerID: r.led.Led.ID(), Vendor: "default", Kind: "score",
		MaxItems: 10, MaxWait: time.Minute, PollEvery: 30 * time.Minute, Pending: items})
	if !r.env.IsWorkflowCompleted() || r.env.GetWorkflowError() != nil {
		t.Fatalf("collector: completed %v, error %v", r.env.IsWorkflowCompleted(), r.env.GetWorkflowError())
	}
	if n := r.creates.Load(); n != batchRefusalsBeforeParking {
		t.Errorf("%d creates reached the vendor, want %d", n, batchRefusalsBeforeParking)
	}
	for _, it := range items {
		got := r.done[it.Ref]
		if len(got) != 1 || got[0].Outcome != allot.BatchItemNotProcessed || !strings.Contains(got[0].Refused, "model not available") {
			t.Errorf("%s's workflow was told %+v, want the refusal once", it.Ref.EpisodeID, got)
		}
		pt, err := r.led.Led.PaidTask(context.Background(), it.Ref)
		if err != nil || pt.State != allot.PaidIntent || pt.Owner != ledger.BatchQueue || pt.MaybeSent {
			t.Errorf("%s after refusals: %+v, %v; want a queued intent, not maybe-sent", it.Ref.EpisodeID, pt, err)
		}
	}
	if n := r.sim.ChargeCount(); n != 0 {
		t.Errorf("the vendor billed %d lines for refused batches", n)
	}
}

// Started by its first item's signal (SignalWithStart), as the worker
// starts it: the item is sent, whether the batch closes by size or by age.
func TestBatchCollectorStartedByASignalSendsTheItem(t *testing.T) {
	for _, maxItems := range []int{1, 5} {
		r := newCollectorRun(t, paidvendortest.SimFaults{})
		items := r.queue(1, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
		r.env.RegisterDelayedCallback(func() { r.env.SignalWorkflow(BatchItemSignal, items[0]) }, 0)
		r.env.ExecuteWorkflow(BatchCollector, BatchCollectorInput{LedgerID: r.led.Led.ID(), Vendor: "default", Kind: "score",
			MaxItems: maxItems, MaxWait: 30 * time.Minute, PollEvery: 30 * time.Minute})
		if !r.env.IsWorkflowCompleted() || r.env.GetWorkflowError() != nil {
			t.Fatalf("max %d: collector: completed %v, error %v", maxItems, r.env.IsWorkflowCompleted(), r.env.GetWorkflowError())
		}
		r.checkEachItemOnce(items, 1)
	}
}

// A batch whose driving stops on a refusal (here its first poll, as when
// the ledger refuses an item changed from outside) is not let go: the
// collector's state shows it stopped, with why and when it goes on, and
// an hour later it is driven again from the ledger's state, so that its
// items end as they would have, each billed once and its workflow told.
func TestBatchCollectorDrivesAStoppedBatchAgain(t *testing.T) {
	r := newCollectorRun(t, paidvendortest.SimFaults{})
	items := r.queue(2, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	var polls atomic.Int32
	r.env.OnActivity(r.acts.PollBatch, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.PollBatchInput) (activities.PollBatchResult, error) {
			if polls.Add(1) == 1 {
				return activities.PollBatchResult{}, temporal.NewNonRetryableApplicationError("ledger: an item is not this batch's", allot.PaidTaskStateConflict, nil)
			}
			return r.acts.PollBatch(ctx, in)
		})
	var stopped BatchCollectorState
	r.env.RegisterDelayedCallback(func() {
		v, err := r.env.QueryWorkflow(BatchCollectorStateQuery)
		if err == nil {
			err = v.Get(&stopped)
		}
		if err != nil {
			t.Error(err)
		}
	}, time.Hour) // the batch closed at 1m, its first poll failed at 31m
	r.env.ExecuteWorkflow(BatchCollector, BatchCollectorInput{LedgerID: r.led.Led.ID(), Vendor: "default", Kind: "score",
		MaxItems: 10, MaxWait: time.Minute, PollEvery: 30 * time.Minute, Pending: items})
	if !r.env.IsWorkflowCompleted() || r.env.GetWorkflowError() != nil {
		t.Fatalf("collector: completed %v, error %v", r.env.IsWorkflowCompleted(), r.env.GetWorkflowError())
	}
	if len(stopped.Stopped) != 1 || !strings.Contains(stopped.Stopped[0].Error, "not this batch's") || stopped.Stopped[0].RetryAt.IsZero() || len(stopped.Batches) != 1 {
		t.Errorf("state while stopped = %+v, want the batch stopped with why and when it goes on", stopped)
	}
	r.checkEachItemOnce(items, 1)
}

// The batch activities run under a heartbeat timeout of seconds (they
// heartbeat while they run: TestBatchActivitiesHeartbeatWhileTheyWait), so
// that a killed worker's attempt is retried within it, not after the
// 10-minute start-to-close timeout with the batch's items waiting: a chaos
// run on one worker met that. (The test environment does not time an
// attempt's heartbeats, so the options are what is checked here.)
func TestBatchCollectorNoticesAKilledWorkerInSeconds(t *testing.T) {
	o := batchActivityOptions()
	if o.HeartbeatTimeout <= 0 || o.HeartbeatTimeout > 30*time.Second || o.HeartbeatTimeout >= o.StartToCloseTimeout {
		t.Fatalf("batch activities: heartbeat timeout %s, start-to-close %s; want a heartbeat timeout of at most 30s", o.HeartbeatTimeout, o.StartToCloseTimeout)
	}
}

// An item whose task an operator abandons (from outside its episode) after
// its batch opened and before the create is never sent: the create carries
// the others, or, when it was alone, no batch is made at the vendor. The
// collector then lets the item go, since there is nothing left to send for
// it, and ends; the other items are sent once.
func TestBatchCollectorNeverSendsAnItemAbandonedBeforeTheCreate(t *testing.T) {
	for _, n := range []int{1, 3} {
		r := newCollectorRun(t, paidvendortest.SimFaults{})
		items := r.queue(n, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
		gone := items[0].Ref
		var abandoned atomic.Bool
		r.env.OnActivity(r.acts.CreateBatch, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, in activities.CreateBatchInput) (activities.BatchView, error) {
				if !abandoned.Swap(true) {
					if _, _, err := r.led.Led.Decide(ctx, ledger.DecisionRequest{OperatorDecision: ledger.OperatorDecision{RequestID: "outside", Pipeline: gone.Pipeline,
						EpisodeID: gone.EpisodeID, Step: gone.Step, Action: allot.ActionAbandon, Reason: "given up from outside", By: "ops"}}); err != nil {
						return activities.BatchView{}, err
					}
				}
				return r.acts.CreateBatch(ctx, in)
			})
		// A collector that never let the item go would drive it hourly
		// for ever.
		r.env.SetWorkflowRunTimeout(7 * 24 * time.Hour)
		r.env.ExecuteWorkflow(BatchCollector, BatchCollectorInput{LedgerID: r.led.Led.ID(), Vendor: "default", Kind: "score",
			MaxItems: 10, MaxWait: time.Minute, PollEvery: 30 * time.Minute, Pending: items})
		if !r.env.IsWorkflowCompleted() || r.env.GetWorkflowError() != nil {
			t.Fatalf("%d items: collector: completed %v, error %v", n, r.env.IsWorkflowCompleted(), r.env.GetWorkflowError())
		}
		pt, err := r.led.Led.PaidTask(context.Background(), gone)
		if err != nil || pt.State != allot.PaidAbandoned {
			t.Fatalf("%d items: the abandoned task: %+v, %v", n, pt, err)
		}
		for _, c := range r.sim.Charges() {
			if c.IdempotencyKey == pt.IdempotencyKey {
				t.Errorf("%d items: the vendor billed the abandoned item: %+v", n, c)
			}
		}
		for _, d := range r.done[gone] {
			if d.Refused != "" {
				t.Errorf("%d items: the abandoned item's workflow was told a refusal: %+v", n, d)
			}
		}
		if n == 1 {
			if c := r.creates.Load(); c != 0 {
				t.Errorf("a batch whose only item was abandoned: %d creates reached the vendor, want none", c)
			}
			continue
		}
		r.checkEachItemOnce(items[1:], 1)
		if c := r.sim.ChargeCount(); c != n-1 {
			t.Errorf("%d items, one abandoned: the vendor billed %d lines, want %d", n, c, n-1)
		}
	}
}
