package activities

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
)

// BenchmarkDirectVersusBatch sends the same 1,000 paid tasks through the
// direct path (SubmitPaidTask, then AwaitPaidTask, which holds its worker
// slot while the vendor works) and through batches (SubmitBatchItem per
// item, then OpenBatch, CreateBatch and PollBatch per batch of 1,000), side
// by side on one simulated vendor whose tasks take taskDuration, and
// reports, per item: the vendor's cost (batch over direct: goal ≤ 0.55),
// the activity executions, and the worker slot time the activities held
// (the batch path's wait holds none: its collector sleeps on a timer).
//
//	go test -run '^$' -bench BenchmarkDirectVersusBatch -benchtime 1x ./activities
func BenchmarkDirectVersusBatch(b *testing.B) {
	const (
		items        = 1000
		taskDuration = 20 * time.Millisecond
	)
	for range b.N {
		direct := sendItems(b, items, taskDuration, false)
		batch := sendItems(b, items, taskDuration, true)
		b.ReportMetric(float64(batch.cost)/float64(direct.cost), "cost_batch/direct")
		b.ReportMetric(float64(direct.activities)/items, "activities/item_direct")
		b.ReportMetric(float64(batch.activities)/items, "activities/item_batch")
		b.ReportMetric(direct.slotTime.Seconds()*1000/items, "slot_ms/item_direct")
		b.ReportMetric(batch.slotTime.Seconds()*1000/items, "slot_ms/item_batch")
		b.ReportMetric(batch.slotTime.Seconds()/direct.slotTime.Seconds(), "slot_batch/direct")
	}
}

type sendTotals struct {
	cost       int64 // minor units, from the vendor's bill
	activities int
	slotTime   time.Duration // summed over the activities run
}

const benchPipelines = `
[[pipeline]]
name   = "direct"
period = "iso-week"
  [[pipeline.step]]
  name = "score"
  kind = "paid"

[[pipeline]]
name   = "evals"
period = "iso-week"
  [[pipeline.step]]
  name            = "score"
  kind            = "paid"
  batch           = true
  batch_max_items = 1000
`

func sendItems(b *testing.B, n int, taskDuration time.Duration, batch bool) sendTotals {
	b.Helper()
	f := newFixture(b, nil)
	set, err := pipeline.Parse([]byte(benchPipelines), "batch_bench_test")
	if err != nil {
		b.Fatal(err)
	}
	f.acts.Pipelines = set
	sim := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: testVendorKey, Seed: 1, TaskDuration: taskDuration,
		PricePerKind: map[string]paidvendor.Cost{"score": {Amount: 251, Currency: "USD"}}, BatchDuration: taskDuration})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	f.acts.Credentials = &countingCredentials{}
	f.acts.NewVendor = paidvendor.HTTPClientFactory(srv.URL)
	f.acts.PollInterval = time.Millisecond
	f.acts.EnqueueBatch = (&enqueued{}).hook
	name := "direct"
	if batch {
		name = "evals"
	}
	var (
		out  sendTotals
		refs []ledger.PaidTaskRef
	)
	run := func(fn, in any, into any) {
		start := time.Now()
		v, err := f.env.ExecuteActivity(fn, in)
		if err == nil && into != nil {
			err = v.Get(into)
		}
		if err != nil {
			b.Fatal(err)
		}
		out.activities++
		out.slotTime += time.Since(start)
	}
	b.StopTimer()
	for i := range n {
		var res AllocateResult
		nominal := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
		v, err := f.env.ExecuteActivity(f.acts.Allocate, AllocateInput{Pipeline: name, Key: fmt.Sprintf("%s/%d", name, i), NominalTime: nominal})
		if err != nil || v.Get(&res) != nil {
			b.Fatal(err)
		}
		refs = append(refs, ledger.PaidTaskRef{Pipeline: name, EpisodeID: res.EpisodeID, Step: "score"})
	}
	b.StartTimer()
	if !batch {
		for _, r := range refs {
			in := PaidTaskInput{Pipeline: r.Pipeline, EpisodeID: r.EpisodeID, Step: r.Step}
			var res PaidTaskResult
			run(f.acts.SubmitPaidTask, in, &res)
			run(f.acts.AwaitPaidTask, in, &res)
			if res.State != allot.PaidSucceeded {
				b.Fatalf("direct %s: %+v", r.EpisodeID, res)
			}
		}
	} else {
		var items []BatchItemInput
		for _, r := range refs {
			var res BatchItemResult
			run(f.acts.SubmitBatchItem, PaidTaskInput{Pipeline: r.Pipeline, EpisodeID: r.EpisodeID, Step: r.Step}, &res)
			items = append(items, BatchItemInput{Ref: r})
		}
		key := allot.IdempotencyKey("bench", "batch", "score", 0)
		run(f.acts.OpenBatch, OpenBatchInput{Key: key, Vendor: pipeline.DefaultVendor, Kind: "score", Items: refs}, nil)
		run(f.acts.CreateBatch, CreateBatchInput{Key: key, Vendor: pipeline.DefaultVendor, Items: items}, nil)
		for {
			// The collector's timer between polls holds no slot.
			time.Sleep(taskDuration)
			var res PollBatchResult
			run(f.acts.PollBatch, PollBatchInput{Key: key, Vendor: pipeline.DefaultVendor}, &res)
			if res.Batch.State == allot.BatchEnded {
				break
			}
		}
		// Each episode reads its outcome once: one more activity per item.
		for _, r := range refs {
			var res BatchItemResult
			run(f.acts.SubmitBatchItem, PaidTaskInput{Pipeline: r.Pipeline, EpisodeID: r.EpisodeID, Step: r.Step}, &res)
			if res.Waiting || res.Task.State != allot.PaidSucceeded {
				b.Fatalf("batch %s: %+v", r.EpisodeID, res)
			}
		}
	}
	for _, c := range sim.Charges() {
		out.cost += c.Amount
	}
	return out
}
