package activities

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
)

// SubmitBatchItem and RefuseBatchItem: the episode's side of a batch step
// (docs/design.md, "Batches").

const batchStepPipelines = `
[[budget]]
name     = "evals"
pipeline = "evals"
period   = "iso-week"
limit    = { amount = %LIMIT%, currency = "USD" }

[[pipeline]]
name   = "evals"
period = "iso-week"
  [[pipeline.step]]
  name            = "score"
  kind            = "paid"
  batch           = true
  batch_max_items = 3
  batch_max_wait  = "20m"
  max_cost        = { amount = 251, currency = "USD" }
  params          = { rubric = "v2" }
`

// enqueued records what SubmitBatchItem handed the collector.
type enqueued struct {
	mu  sync.Mutex
	got []BatchEnqueue
}

func (e *enqueued) hook(_ context.Context, b BatchEnqueue) error {
	e.mu.Lock()
	e.got = append(e.got, b)
	e.mu.Unlock()
	return nil
}

func newBatchStepFixture(t *testing.T, limit string) (*fixture, *enqueued, PaidTaskInput) {
	t.Helper()
	f := newFixture(t, nil)
	set, err := pipeline.Parse([]byte(strings.ReplaceAll(batchStepPipelines, "%LIMIT%", limit)), "batch_step_test")
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Pipelines = set
	e := &enqueued{}
	f.acts.EnqueueBatch = e.hook
	res := f.mustAllocate(t, "evals", "evals/2026-12-01", time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	return f, e, PaidTaskInput{Pipeline: "evals", EpisodeID: res.EpisodeID, Step: "score"}
}

func TestSubmitBatchItemQueuesWithItsReservationAndHandsItToTheCollector(t *testing.T) {
	f, e, in := newBatchStepFixture(t, "100000")
	for call := 1; call <= 2; call++ {
		res, err := execute[BatchItemResult](t, f, f.acts.SubmitBatchItem, in)
		if err != nil || !res.Waiting || res.Reason != allot.ReasonBatchQueued || res.Task.State != allot.PaidIntent {
			t.Fatalf("call %d: SubmitBatchItem = %+v, %v; want waiting in the queue", call, res, err)
		}
		// Asked again, it hands the item over again (the collector takes
		// it once) and reserves nothing twice.
		if len(e.got) != call {
			t.Fatalf("call %d: handed to the collector %d times", call, len(e.got))
		}
	}
	got := e.got[0]
	ref := ledger.PaidTaskRef{Pipeline: "evals", EpisodeID: in.EpisodeID, Step: "score"}
	if got.Vendor != pipeline.DefaultVendor || got.Kind != "score" || got.MaxItems != 3 || got.MaxWait != 20*time.Minute || got.Ref != ref ||
		got.NotifyWorkflowID == "" || got.Params["rubric"] != "v2" || got.Params["episode"] != in.EpisodeID {
		t.Fatalf("handed to the collector: %+v", got)
	}
	task, err := f.led.PaidTask(f.ctx, ref)
	if err != nil || task.Owner != ledger.BatchQueue || task.MaybeSent || task.IdempotencyKey != allot.IdempotencyKey("evals", in.EpisodeID, "score", 0) {
		t.Fatalf("the queued task: %+v, %v", task, err)
	}
	es, err := f.led.TaskBudgetEntries(f.ctx, ref)
	if err != nil || len(es) != 1 || es[0].State != ledger.EntryHeld || es[0].Reserved != 251 {
		t.Fatalf("the queued task's reservation: %+v, %v; want 251 held once", es, err)
	}
}

// A budget without room refuses the item before any batch: nothing is
// queued, nothing handed over, and the episode parks as for a direct task.
func TestSubmitBatchItemRefusedByItsBudgetQueuesNothing(t *testing.T) {
	f, e, first := newBatchStepFixture(t, "300")
	if _, err := execute[BatchItemResult](t, f, f.acts.SubmitBatchItem, first); err != nil {
		t.Fatal(err)
	}
	// The week's first item holds 251 of 300: the second has no room.
	res := f.mustAllocate(t, "evals", "evals/2026-12-02", time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	in := PaidTaskInput{Pipeline: "evals", EpisodeID: res.EpisodeID, Step: "score"}
	_, err := execute[BatchItemResult](t, f, f.acts.SubmitBatchItem, in)
	wantAppError(t, err, allot.BudgetExhausted)
	if len(e.got) != 1 {
		t.Fatalf("an item its budget refused was handed to the collector: %+v", e.got)
	}
	if task, err := f.led.PaidTask(f.ctx, in.ref()); err != nil || task.State != allot.PaidPlanned {
		t.Fatalf("the refused task: %+v, %v; want planned", task, err)
	}
}

// A worker that cannot reach a collector says so (its intent stays queued
// for a worker that can).
func TestSubmitBatchItemWithoutACollectorSaysSo(t *testing.T) {
	f, _, in := newBatchStepFixture(t, "100000")
	f.acts.EnqueueBatch = nil
	_, err := execute[BatchItemResult](t, f, f.acts.SubmitBatchItem, in)
	wantAppError(t, err, allot.VendorNotConfigured)
}

// The item through a real batch: once its batch ended, SubmitBatchItem
// returns the result and its billed cost; an item whose result is lost is
// OutcomeUnknown, with the task left maybe-sent.
func TestSubmitBatchItemReturnsTheOutcomeOfItsBatch(t *testing.T) {
	for _, c := range []struct {
		name   string
		lost   bool
		expect string
	}{{"succeeded", false, ""}, {"result lost", true, allot.BatchResultLost}} {
		t.Run(c.name, func(t *testing.T) {
			f, e, in := newBatchStepFixture(t, "100000")
			v := withBatchVendor(t, f)
			if _, err := execute[BatchItemResult](t, f, f.acts.SubmitBatchItem, in); err != nil {
				t.Fatal(err)
			}
			key := allot.IdempotencyKey("batch-step-test", c.name, "batch", 0)
			ref := e.got[0].Ref
			if _, err := execute[OpenBatchResult](t, f, f.acts.OpenBatch, OpenBatchInput{Key: key, Vendor: "default", Kind: "score", Items: []ledger.PaidTaskRef{ref}}); err != nil {
				t.Fatal(err)
			}
			if c.lost {
				if err := v.sim.SetFaults(paidvendortest.SimFaults{BatchOutputGone: 1}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := execute[BatchView](t, f, f.acts.CreateBatch, CreateBatchInput{Key: key, Vendor: "default", Items: []BatchItemInput{{Ref: ref, Params: e.got[0].Params}}}); err != nil {
				t.Fatal(err)
			}
			running, err := execute[BatchItemResult](t, f, f.acts.SubmitBatchItem, in)
			if err != nil || !running.Waiting || running.Reason != allot.ReasonBatchRunning || running.Batch == nil || running.Batch.VendorBatchID == "" {
				t.Fatalf("SubmitBatchItem while its batch runs = %+v, %v", running, err)
			}
			v.clock.Add(5 * time.Hour)
			if res, err := execute[PollBatchResult](t, f, f.acts.PollBatch, PollBatchInput{Key: key, Vendor: "default"}); err != nil || res.Batch.State != allot.BatchEnded {
				t.Fatalf("PollBatch = %+v, %v", res, err)
			}
			done, err := execute[BatchItemResult](t, f, f.acts.SubmitBatchItem, in)
			if c.expect != "" {
				wantAppError(t, err, c.expect)
				if task, _ := f.led.PaidTask(f.ctx, ref); !task.OutcomeUnknown() {
					t.Fatalf("a lost item's task: %+v, want maybe-sent", task)
				}
				return
			}
			if err != nil || done.Waiting || done.Task.State != allot.PaidSucceeded || done.Task.CostAmount != 126 || done.Task.SHA256 == "" {
				t.Fatalf("SubmitBatchItem after its batch = %+v, %v; want succeeded at 126", done, err)
			}
		})
	}
}

// An item the vendor refused in every batch: its intent goes back to
// planned with its reservation released, and the error parks the episode.
func TestRefuseBatchItemReleasesItsReservation(t *testing.T) {
	f, _, in := newBatchStepFixture(t, "100000")
	if _, err := execute[BatchItemResult](t, f, f.acts.SubmitBatchItem, in); err != nil {
		t.Fatal(err)
	}
	_, err := f.env.ExecuteActivity(f.acts.RefuseBatchItem, RefuseBatchItemInput{PaidTaskInput: in, Reason: "400 invalid_request: model not available for batch"})
	appErr := wantAppError(t, err, allot.VendorRejected)
	if !strings.Contains(appErr.Error(), "model not available") {
		t.Fatalf("the refusal does not carry the vendor's reason: %v", appErr)
	}
	var details ParkDetails
	if !appErr.HasDetails() || appErr.Details(&details) != nil || details.TaskState != allot.PaidPlanned {
		t.Fatalf("the refusal's park details: %+v", details)
	}
	es, err := f.led.TaskBudgetEntries(f.ctx, in.ref())
	if err != nil || len(es) != 1 || es[0].State != ledger.EntryReleased {
		t.Fatalf("the refused item's reservation: %+v, %v; want released", es, err)
	}
}
