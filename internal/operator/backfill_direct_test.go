package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"allot"
	"allot/workflows"
)

// fakeRun is a started run whose Get returns when its test releases it.
type fakeRun struct {
	id      string
	release chan allot.Outcome
}

func (r *fakeRun) GetID() string                  { return r.id }
func (r *fakeRun) GetRunID() string               { return "run-" + r.id }
func (r *fakeRun) GetFirstExecutionRunID() string { return r.GetRunID() }
func (r *fakeRun) Get(ctx context.Context, _ any) error {
	select {
	case <-r.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (r *fakeRun) GetWithOptions(ctx context.Context, v any, _ client.WorkflowRunGetOptions) error {
	return r.Get(ctx, v)
}

// StartRun waits out the server's ResourceExhausted with exponential
// back-off, capped, and returns any other error at once.
func TestStartRunBacksOffOnResourceExhausted(t *testing.T) {
	set := testPipelines(t)
	p, err := set.Get("weekly")
	if err != nil {
		t.Fatal(err)
	}
	nominal := time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC)
	var slept []time.Duration
	attempts := 0
	var got client.StartWorkflowOptions
	var gotIn workflows.ScheduledRunInput
	s := &Schedules{Pipelines: set, TaskQueue: "q", LedgerID: "L",
		startWorkflow: func(_ context.Context, opts client.StartWorkflowOptions, in workflows.ScheduledRunInput) (client.WorkflowRun, error) {
			attempts++
			if attempts <= 10 {
				return nil, serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT, "namespace rate limit")
			}
			got, gotIn = opts, in
			return &fakeRun{id: opts.ID}, nil
		},
		sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil },
	}
	run, err := s.StartRun(context.Background(), p, nominal, PriorityBackfill)
	if err != nil {
		t.Fatal(err)
	}
	key := allot.AllocationKey("weekly", nominal)
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond, 10 * time.Second, 10 * time.Second, 10 * time.Second}
	if run.GetID() != key || !slices.Equal(slept, want) {
		t.Fatalf("run %s after waits %v; want %s after %v", run.GetID(), slept, key, want)
	}
	// The run is keyed, routed and started as the Schedule's would be, at
	// the backfill's priority; a running one is joined.
	if got.ID != key || got.TaskQueue != "q" || got.Priority.PriorityKey != PriorityBackfill ||
		got.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING ||
		got.WorkflowIDReusePolicy != enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE ||
		gotIn != (workflows.ScheduledRunInput{Pipeline: "weekly", NominalTime: nominal, LedgerID: "L", EpisodePriority: PriorityBackfillEpisode}) {
		t.Fatalf("start options %+v, input %+v", got, gotIn)
	}
	if v, ok := got.TypedSearchAttributes.GetKeyword(workflows.PipelineAttr); !ok || v != "weekly" {
		t.Fatalf("search attribute %s = %q, %v", workflows.PipelineAttr.GetName(), v, ok)
	}

	// Another error is not waited out.
	s.startWorkflow = func(context.Context, client.StartWorkflowOptions, workflows.ScheduledRunInput) (client.WorkflowRun, error) {
		return nil, serviceerror.NewPermissionDenied("no", "")
	}
	slept = nil
	var denied *serviceerror.PermissionDenied
	if _, err := s.StartRun(context.Background(), p, nominal, PriorityBackfill); !errors.As(err, &denied) || len(slept) != 0 {
		t.Fatalf("permission denied: %v after %v", err, slept)
	}
	// A context that ends during the back-off ends it.
	ctx, cancel := context.WithCancel(context.Background())
	s.startWorkflow = func(context.Context, client.StartWorkflowOptions, workflows.ScheduledRunInput) (client.WorkflowRun, error) {
		return nil, serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT, "busy")
	}
	s.sleep = func(ctx context.Context, d time.Duration) error { cancel(); return sleepCtx(ctx, d) }
	if _, err := s.StartRun(ctx, p, nominal, PriorityBackfill); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled during the back-off: %v", err)
	}
}

// newFakeDirect is a directRun over n keys whose runs end when the test
// releases them; the first already of them are done.
func newFakeDirect(n, already, maxInFlight int) (*directRun, *fakeStarts) {
	f := &fakeStarts{runs: map[string]*fakeRun{}, started: make(chan string, n)}
	d := &directRun{done: map[string]bool{}, rate: 1e6, maxInFlight: maxInFlight, reportEvery: time.Millisecond}
	for i := range n {
		t := time.Date(2026, 1, 1, i, 0, 0, 0, time.UTC)
		k := allot.AllocationKey("weekly-video", t)
		d.keys, d.nominal = append(d.keys, k), append(d.nominal, t)
		if i < already {
			d.done[k] = true
		}
	}
	d.start = func(ctx context.Context, t time.Time) (client.WorkflowRun, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		k := allot.AllocationKey("weekly-video", t)
		r := &fakeRun{id: k, release: make(chan allot.Outcome, 1)}
		f.runs[k] = r
		f.inFlight++
		f.maxSeen = max(f.maxSeen, f.inFlight)
		f.started <- k
		return r, nil
	}
	d.wait = func(ctx context.Context, run client.WorkflowRun) (allot.Outcome, error) {
		err := run.Get(ctx, nil)
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
		if err != nil {
			return allot.OutcomeFailed, err
		}
		return allot.OutcomeAllocated, nil
	}
	return d, f
}

type fakeStarts struct {
	mu       sync.Mutex
	runs     map[string]*fakeRun
	inFlight int
	maxSeen  int
	started  chan string
}

func (f *fakeStarts) release(k string) {
	f.mu.Lock()
	r := f.runs[k]
	f.mu.Unlock()
	r.release <- allot.OutcomeAllocated
}

// The fast backfill starts only the keys not done, never more than
// max-in-flight at a time, and counts the done ones in its progress.
func TestDirectRunKeepsInFlightAndSkipsDone(t *testing.T) {
	d, f := newFakeDirect(30, 7, 3)
	var reports []BackfillProgress
	var mu sync.Mutex
	d.report = func(p BackfillProgress) { mu.Lock(); reports = append(reports, p); mu.Unlock() }
	go func() {
		for k := range f.started {
			f.release(k)
		}
	}()
	p, err := d.run(context.Background())
	close(f.started)
	if err != nil {
		t.Fatal(err)
	}
	if p != (BackfillProgress{Total: 30, Done: 30, AlreadyDone: 7, Started: 23, Allocated: 23}) {
		t.Fatalf("progress %+v", p)
	}
	if f.maxSeen > 3 || len(f.runs) != 23 {
		t.Fatalf("%d runs started, at most %d at a time; want 23, at most 3", len(f.runs), f.maxSeen)
	}
	for k := range f.runs {
		if d.done[k] {
			t.Fatalf("key %s was done and started again", k)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) == 0 || reports[0].AlreadyDone != 7 || reports[len(reports)-1] != p {
		t.Fatalf("reports %+v", reports)
	}
}

// Stopped, it starts nothing more, and returns what it started.
func TestDirectRunStopsStartingWhenCancelled(t *testing.T) {
	d, _ := newFakeDirect(10, 0, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err := d.run(ctx)
	if !errors.Is(err, context.Canceled) || p.Started != 0 {
		t.Fatalf("a cancelled context: %+v, %v", p, err)
	}

	d, f := newFakeDirect(10, 0, 2)
	ctx, cancel = context.WithCancel(context.Background())
	go func() { <-f.started; <-f.started; cancel() }()
	p, err = d.run(ctx)
	if !errors.Is(err, context.Canceled) || p.Started != 2 || len(f.runs) != 2 || p.Done != 0 {
		t.Fatalf("cancelled after two starts: %+v, %v (%d started)", p, err, len(f.runs))
	}
}

// The start rate is capped: starts are spaced by 1/rate on the clock.
func TestDirectRunPacesStarts(t *testing.T) {
	d, f := newFakeDirect(5, 0, 5)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var waits []time.Duration
	d.rate = 4
	d.now = func() time.Time { return clock }
	d.sleep = func(_ context.Context, w time.Duration) error {
		waits = append(waits, w)
		clock = clock.Add(w)
		return nil
	}
	go func() {
		for k := range f.started {
			f.release(k)
		}
	}()
	if _, err := d.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(f.started)
	if want := []time.Duration{250 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond}; !slices.Equal(waits, want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
}

// A start that fails for a reason other than load stops the backfill and
// returns the error with what it started.
func TestDirectRunStopsOnAStartError(t *testing.T) {
	d, f := newFakeDirect(6, 0, 6)
	start := d.start
	n := 0
	d.start = func(ctx context.Context, t time.Time) (client.WorkflowRun, error) {
		if n++; n == 3 {
			return nil, fmt.Errorf("start: %w", serviceerror.NewPermissionDenied("no", ""))
		}
		return start(ctx, t)
	}
	go func() {
		for k := range f.started {
			f.release(k)
		}
	}()
	p, err := d.run(context.Background())
	close(f.started)
	var denied *serviceerror.PermissionDenied
	if !errors.As(err, &denied) || p.Started != 2 || p.Done > 2 || len(f.runs) != 2 {
		t.Fatalf("progress %+v, err %v", p, err)
	}
}
