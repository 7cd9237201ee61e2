package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"allot"
)

// BenchmarkEndToEnd sets one run of allot (a ScheduledRun that allocates in
// the ledger and starts its Episode, which runs three local steps and
// completes) beside a bare Temporal workflow pair that does the same
// orchestration and nothing else: a parent that runs no-op activities and
// starts a child (parent close policy abandon, waiting only for the child
// to start, as ScheduledRun does), and a child that runs no-op activities.
// Before timing, one allot run is made and its two histories are read: the
// bare parent gets as many activities as the ScheduledRun scheduled, the
// bare child as many as the Episode, so that the difference is what allot
// does inside and around its activities (ledger transactions, each fsynced;
// search attributes; the plan and step records), not how many round trips
// Temporal makes.
//
// Both run on the same embedded server, from the same client, with workers
// in this process on two task queues; a run is timed from its start until
// the child (the Episode) has completed. Each iteration does one batch of
// allot runs and one batch of bare runs (alternating which goes first), of
// `concurrency` runs started at once, and times each batch:
//
//	go test -run '^$' -bench EndToEnd -benchtime 40x ./bench/
//
// It reports allot-ms/run and bare-ms/run (batch wall time ÷ runs in it),
// allot-runs/s and bare-runs/s, ratio-allot/bare (allot's time per run over
// the bare pair's: 3 means allot's runs take three times as long), and the
// activities and history events of one run of each. ns/op is one batch of
// each. It runs on both Temporal stores (see benchStores) unless
// ALLOT_BENCH_TEMPORAL_STORE names one.
func BenchmarkEndToEnd(b *testing.B) {
	for _, store := range benchStores() {
		b.Run("store="+store, func(b *testing.B) {
			st := startTemporal(b, store)
			w := startAllotWorker(b, st)
			startBareWorker(b, st)
			clock := newNominalClock(time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC))
			ctx := context.Background()

			// One run of each, untimed: it warms both paths up and tells
			// how many activities allot's run has.
			nominal := clock.take()
			if err := w.runAllot(ctx, st.Client, nominal); err != nil {
				b.Fatal(err)
			}
			runActs, runEvents := countHistory(b, st.Client, allot.AllocationKey(benchPipeline, nominal))
			eps, err := w.Ledger.ListEpisodes(ctx, benchPipeline, "")
			if err != nil || len(eps) != 1 {
				b.Fatalf("episodes after one run: %v, %v", eps, err)
			}
			epActs, epEvents := countHistory(b, st.Client, allot.EpisodeWorkflowID(benchPipeline, eps[0].ID))
			bare := bareRunner{c: st.Client, parentActs: runActs, childActs: epActs}
			bareID := 0
			if err := bare.run(ctx, "warm"); err != nil {
				b.Fatal(err)
			}
			bareParentActs, bareParentEvents := countHistory(b, st.Client, "bare/parent/warm")
			bareChildActs, bareChildEvents := countHistory(b, st.Client, "bare/child/warm")
			if bareParentActs != runActs || bareChildActs != epActs {
				b.Fatalf("bare pair runs %d+%d activities, allot %d+%d", bareParentActs, bareChildActs, runActs, epActs)
			}

			for _, conc := range []int{1, 8} {
				b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
					var allotTime, bareTime time.Duration
					var n int64
					batch := func(run func(i int) error) time.Duration {
						start := time.Now()
						var wg sync.WaitGroup
						errs := make([]error, conc)
						for i := range conc {
							wg.Add(1)
							go func() { defer wg.Done(); errs[i] = run(i) }()
						}
						wg.Wait()
						for _, err := range errs {
							if err != nil {
								b.Fatal(err)
							}
						}
						return time.Since(start)
					}
					allotBatch := func() time.Duration {
						times := make([]time.Time, conc)
						for i := range times {
							times[i] = clock.take()
						}
						return batch(func(i int) error { return w.runAllot(ctx, st.Client, times[i]) })
					}
					bareBatch := func() time.Duration {
						first := bareID
						bareID += conc
						return batch(func(i int) error { return bare.run(ctx, fmt.Sprint(first+i)) })
					}
					for b.Loop() {
						n++
						if n%2 == 0 {
							bareTime += bareBatch()
							allotTime += allotBatch()
						} else {
							allotTime += allotBatch()
							bareTime += bareBatch()
						}
					}
					runs := float64(n * int64(conc))
					allotMS := allotTime.Seconds() * 1000 / runs
					bareMS := bareTime.Seconds() * 1000 / runs
					b.ReportMetric(allotMS, "allot-ms/run")
					b.ReportMetric(bareMS, "bare-ms/run")
					b.ReportMetric(1000/allotMS, "allot-runs/s")
					b.ReportMetric(1000/bareMS, "bare-runs/s")
					b.ReportMetric(allotMS/bareMS, "ratio-allot/bare")
					b.ReportMetric(float64(runActs+epActs), "activities/run")
					b.ReportMetric(float64(runEvents+epEvents), "allot-events/run")
					b.ReportMetric(float64(bareParentEvents+bareChildEvents), "bare-events/run")
				})
			}
		})
	}
}

// countHistory counts the activities a workflow scheduled and the events of
// its history.
func countHistory(tb testing.TB, c client.Client, workflowID string) (activities, events int) {
	tb.Helper()
	var types []string
	it := c.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			tb.Fatal(err)
		}
		events++
		if e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			activities++
			types = append(types, e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName())
		}
	}
	tb.Logf("%s: %d events, activities %v", workflowID, events, types)
	return activities, events
}

// The bare pair: the orchestration of an allot run with no-op activities.
const (
	bareQueue    = "bench-bare"
	bareParentWF = "BareParent"
	bareChildWF  = "BareChild"
	bareNoOp     = "BareNoOp"
)

type bareParentInput struct {
	ChildID          string `json:"child_id"`
	ParentActivities int    `json:"parent_activities"`
	ChildActivities  int    `json:"child_activities"`
}

func bareActivityCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
}

// bareParent is ScheduledRun's shape: one activity (allocate), start the
// child and wait until it has started, the rest of its activities (record
// the outcome), end.
func bareParent(ctx workflow.Context, in bareParentInput) (string, error) {
	actx := bareActivityCtx(ctx)
	n := in.ParentActivities
	if n > 0 {
		if err := workflow.ExecuteActivity(actx, bareNoOp).Get(ctx, nil); err != nil {
			return "", err
		}
		n--
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: in.ChildID, ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
	})
	if err := workflow.ExecuteChildWorkflow(cctx, bareChildWF, in.ChildActivities).GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		return "", err
	}
	for ; n > 0; n-- {
		if err := workflow.ExecuteActivity(actx, bareNoOp).Get(ctx, nil); err != nil {
			return "", err
		}
	}
	return in.ChildID, nil
}

// bareChild is the Episode's shape: its activities one after another.
func bareChild(ctx workflow.Context, activities int) error {
	actx := bareActivityCtx(ctx)
	for range activities {
		if err := workflow.ExecuteActivity(actx, bareNoOp).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

func bareNoOpActivity(context.Context) error { return nil }

// startBareWorker runs the bare pair's worker in this process, on its own
// task queue, with the same (default) worker options as allot's.
func startBareWorker(tb testing.TB, st *stack) {
	tb.Helper()
	w := worker.New(st.Client, bareQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(bareParent, workflow.RegisterOptions{Name: bareParentWF})
	w.RegisterWorkflowWithOptions(bareChild, workflow.RegisterOptions{Name: bareChildWF})
	w.RegisterActivityWithOptions(bareNoOpActivity, activity.RegisterOptions{Name: bareNoOp})
	if err := w.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.Stop)
}

type bareRunner struct {
	c                     client.Client
	parentActs, childActs int
}

// run starts the bare parent and waits until its child has completed.
func (r bareRunner) run(ctx context.Context, id string) error {
	run, err := r.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "bare/parent/" + id, TaskQueue: bareQueue}, bareParentWF,
		bareParentInput{ChildID: "bare/child/" + id, ParentActivities: r.parentActs, ChildActivities: r.childActs})
	if err != nil {
		return err
	}
	var childID string
	if err := run.Get(ctx, &childID); err != nil {
		return err
	}
	return r.c.GetWorkflow(ctx, childID, "").Get(ctx, nil)
}
