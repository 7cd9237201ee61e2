package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
	"allot/internal/ledger"
	"allot/step"
	"allot/workflows"
)

// twoStepPipeline is bench-two: two local steps (plan, assemble).
const twoStepPipeline = "bench-two"

// BenchmarkRunVsHandWritten sets allot's run of a two-step job (a
// ScheduledRun that allocates and starts its Episode, which runs the two
// local steps and completes) beside the pair a careful engineer would write
// by hand for the same job, on the same server, the same ledger and the
// same disk: a parent with one activity that allocates in the ledger
// (ledger.Allocate: the same transaction, the same fsync) and starts the
// child, and a child with one activity per step that runs the same step
// function (allot's built-in plan and assemble, writing and fsyncing the
// same files). The hand-written pair keeps none of allot's promises beyond
// the allocation (no outcomes, no step records, no plan, no resume), so it
// is the floor of what the job costs on Temporal.
//
// Each iteration runs `runs` runs of each, `inFlight` at a time (a
// semaphore), alternating which goes first, and reports allot-runs/s,
// hand-runs/s and ratio-allot/hand (allot's throughput over the
// hand-written pair's: 1 is parity, the goal is ≥ 0.9), and the regular
// (task-queue) activities of one run of each.
//
//	go test -run '^$' -bench RunVsHandWritten -benchtime 1x -timeout 30m ./bench/
func BenchmarkRunVsHandWritten(b *testing.B) {
	const runs, inFlight = 200, 20
	for _, store := range benchStores() {
		b.Run("store="+store, func(b *testing.B) {
			st := startTemporal(b, store)
			w := startAllotWorker(b, st)
			hand := startHandWorker(b, st, w)
			clock := newNominalClock(time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC))
			ctx := context.Background()

			// One of each, untimed: warms both paths and counts activities.
			nominal := clock.take()
			if err := w.runAllotOf(ctx, st.Client, twoStepPipeline, nominal); err != nil {
				b.Fatal(err)
			}
			runActs, _ := countHistory(b, st.Client, allot.AllocationKey(twoStepPipeline, nominal))
			eps, err := w.Ledger.ListEpisodes(ctx, twoStepPipeline, "")
			if err != nil || len(eps) != 1 {
				b.Fatalf("episodes after one run: %v, %v", eps, err)
			}
			epActs, _ := countHistory(b, st.Client, allot.EpisodeWorkflowID(twoStepPipeline, eps[0].ID))
			warm := clock.take()
			if err := hand.run(ctx, warm); err != nil {
				b.Fatal(err)
			}
			handParentActs, _ := countHistory(b, st.Client, hand.parentID(warm))
			handChildActs, _ := countHistory(b, st.Client, hand.childID(warm))

			batch := func(run func(nominal time.Time) error) time.Duration {
				times := make([]time.Time, runs)
				for i := range times {
					times[i] = clock.take()
				}
				sem := make(chan struct{}, inFlight)
				errs := make([]error, runs)
				var wg sync.WaitGroup
				start := time.Now()
				for i := range runs {
					sem <- struct{}{}
					wg.Add(1)
					go func() {
						defer func() { <-sem; wg.Done() }()
						errs[i] = run(times[i])
					}()
				}
				wg.Wait()
				d := time.Since(start)
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				return d
			}
			allotRun := func(n time.Time) error { return w.runAllotOf(ctx, st.Client, twoStepPipeline, n) }
			var allotTime, handTime time.Duration
			var n int64
			for b.Loop() {
				n++
				if n%2 == 0 {
					handTime += batch(func(t time.Time) error { return hand.run(ctx, t) })
					allotTime += batch(allotRun)
				} else {
					allotTime += batch(allotRun)
					handTime += batch(func(t time.Time) error { return hand.run(ctx, t) })
				}
			}
			total := float64(n * runs)
			allotRate, handRate := total/allotTime.Seconds(), total/handTime.Seconds()
			b.ReportMetric(allotRate, "allot-runs/s")
			b.ReportMetric(handRate, "hand-runs/s")
			b.ReportMetric(allotRate/handRate, "ratio-allot/hand")
			b.ReportMetric(float64(runActs+epActs), "allot-activities/run")
			b.ReportMetric(float64(handParentActs+handChildActs), "hand-activities/run")
		})
	}
}

// runAllotOf is runAllot for another pipeline of the bench's set.
func (w *allotWorker) runAllotOf(ctx context.Context, c client.Client, pipelineName string, nominal time.Time) error {
	key := allot.AllocationKey(pipelineName, nominal)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: key, TaskQueue: w.TaskQueue}, workflows.ScheduledRunWorkflow,
		workflows.ScheduledRunInput{Pipeline: pipelineName, NominalTime: nominal, LedgerID: w.Ledger.ID()})
	if err != nil {
		return fmt.Errorf("start %s: %w", key, err)
	}
	var res workflows.ScheduledRunResult
	if err := run.Get(ctx, &res); err != nil {
		return fmt.Errorf("run %s: %w", key, err)
	}
	var ep workflows.EpisodeResult
	if err := c.GetWorkflow(ctx, allot.EpisodeWorkflowID(pipelineName, res.EpisodeID), "").Get(ctx, &ep); err != nil {
		return fmt.Errorf("episode %s: %w", res.EpisodeID, err)
	}
	if ep.Stage != allot.StageCompleted {
		return fmt.Errorf("episode %s ended %s", res.EpisodeID, ep.Stage)
	}
	return nil
}

// The hand-written pair.
const (
	handQueue    = "bench-hand"
	handParentWF = "HandParent"
	handChildWF  = "HandChild"
	handAllocate = "HandAllocate"
	handStep     = "HandStep"
	handPipeline = "hand-written"
)

type handWorker struct {
	c     client.Client
	steps []string
}

func (h handWorker) parentID(nominal time.Time) string {
	return "hand/parent/" + nominal.UTC().Format(time.RFC3339)
}
func (h handWorker) childID(nominal time.Time) string {
	return "hand/child/" + nominal.UTC().Format(time.RFC3339)
}

type handParentInput struct {
	Key         string    `json:"key"`
	NominalTime time.Time `json:"nominal_time"`
	ChildID     string    `json:"child_id"`
	Steps       []string  `json:"steps"`
}

type handChildInput struct {
	EpisodeID   string    `json:"episode_id"`
	Period      string    `json:"period"`
	NominalTime time.Time `json:"nominal_time"`
	Steps       []string  `json:"steps"`
}

type handAllocation struct {
	EpisodeID string `json:"episode_id"`
	Period    string `json:"period"`
}

type handStepInput struct {
	EpisodeID   string    `json:"episode_id"`
	Period      string    `json:"period"`
	NominalTime time.Time `json:"nominal_time"`
	Step        string    `json:"step"`
	Steps       []string  `json:"steps"`
}

func handActivityCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
}

func handParent(ctx workflow.Context, in handParentInput) (string, error) {
	var alloc handAllocation
	if err := workflow.ExecuteActivity(handActivityCtx(ctx), handAllocate, in.Key, in.NominalTime).Get(ctx, &alloc); err != nil {
		return "", err
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: in.ChildID, ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON})
	child := handChildInput{EpisodeID: alloc.EpisodeID, Period: alloc.Period, NominalTime: in.NominalTime, Steps: in.Steps}
	if err := workflow.ExecuteChildWorkflow(cctx, handChildWF, child).GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		return "", err
	}
	return in.ChildID, nil
}

func handChild(ctx workflow.Context, in handChildInput) error {
	for _, s := range in.Steps {
		if err := workflow.ExecuteActivity(handActivityCtx(ctx), handStep, handStepInput{
			EpisodeID: in.EpisodeID, Period: in.Period, NominalTime: in.NominalTime, Step: s, Steps: in.Steps,
		}).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// startHandWorker runs the hand-written pair's worker on its own task queue,
// on allot's ledger (another pipeline name) and artifact disk.
func startHandWorker(tb testing.TB, st *stack, aw *allotWorker) handWorker {
	tb.Helper()
	p, err := aw.Pipelines.Get(twoStepPipeline)
	if err != nil {
		tb.Fatal(err)
	}
	led, dir := aw.Ledger, filepath.Join(aw.Dir, "hand")
	funcs := activities.BuiltinSteps()
	allocate := func(ctx context.Context, key string, nominal time.Time) (handAllocation, error) {
		period := p.PeriodOf(nominal)
		res, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: handPipeline, Key: key, Period: period, NominalTime: nominal, RunID: activity.GetInfo(ctx).WorkflowExecution.RunID})
		if err != nil {
			return handAllocation{}, err
		}
		return handAllocation{EpisodeID: res.Episode.ID, Period: period}, nil
	}
	runStep := func(ctx context.Context, in handStepInput) error {
		_, err := funcs[in.Step](ctx, step.Input{Pipeline: handPipeline, EpisodeID: in.EpisodeID, Period: in.Period,
			NominalTime: in.NominalTime, Step: in.Step, Steps: in.Steps, Dir: filepath.Join(dir, in.EpisodeID)})
		return err
	}
	w := worker.New(st.Client, handQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(handParent, workflow.RegisterOptions{Name: handParentWF})
	w.RegisterWorkflowWithOptions(handChild, workflow.RegisterOptions{Name: handChildWF})
	w.RegisterActivityWithOptions(allocate, activity.RegisterOptions{Name: handAllocate})
	w.RegisterActivityWithOptions(runStep, activity.RegisterOptions{Name: handStep})
	if err := w.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.Stop)
	return handWorker{c: st.Client, steps: p.StepNames()}
}

// run starts the hand-written parent for nominal and waits until its child
// has completed.
func (h handWorker) run(ctx context.Context, nominal time.Time) error {
	run, err := h.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: h.parentID(nominal), TaskQueue: handQueue}, handParentWF,
		handParentInput{Key: h.parentID(nominal), NominalTime: nominal, ChildID: h.childID(nominal), Steps: h.steps})
	if err != nil {
		return err
	}
	var childID string
	if err := run.Get(ctx, &childID); err != nil {
		return err
	}
	return h.c.GetWorkflow(ctx, childID, "").Get(ctx, nil)
}
