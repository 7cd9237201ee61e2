package activities

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"allot"
	"allot/internal/ledger"
	"allot/paidvendor"
)

// countingHandler is a metrics handler that adds up every counter by name.
type countingHandler struct {
	mu     *sync.Mutex
	totals map[string]int64
}

func newCountingHandler() countingHandler {
	return countingHandler{mu: &sync.Mutex{}, totals: map[string]int64{}}
}

func (h countingHandler) WithTags(map[string]string) client.MetricsHandler { return h }
func (h countingHandler) Counter(name string) client.MetricsCounter        { return counter{h, name} }
func (h countingHandler) Gauge(string) client.MetricsGauge                 { return client.MetricsNopHandler.Gauge("") }
func (h countingHandler) Timer(string) client.MetricsTimer                 { return client.MetricsNopHandler.Timer("") }

func (h countingHandler) total(name string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.totals[name]
}

type counter struct {
	h    countingHandler
	name string
}

func (c counter) Inc(n int64) {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	c.h.totals[c.name] += n
}

// A run and a cost are counted once per fact, however often an activity
// attempt writes them: counted after the ledger write, from what the write
// reports as new.
func TestRunsAndCostsAreCountedOncePerFact(t *testing.T) {
	f := newFixture(t, nil)
	h := newCountingHandler()
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(h)
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(f.acts)

	run := RecordRunOutcomeInput{Pipeline: "tokyo", Key: "tokyo/k", RunID: "run-1", NominalTime: tokyoNominal,
		Outcome: allot.OutcomeAllocated, Reason: allot.ReasonNewEpisode, EpisodeID: tokyoEpisode, Period: tokyoPeriod, RecordedAt: time.Now()}
	for range 3 { // the first attempt and two retries of the same run
		if _, err := env.ExecuteActivity(f.acts.RecordRunOutcome, run); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.total(MetricRuns); n != 1 {
		t.Fatalf("one run recorded three times counted %d times, want 1", n)
	}
	run.RunID = "run-2"
	if _, err := env.ExecuteActivity(f.acts.RecordRunOutcome, run); err != nil {
		t.Fatal(err)
	}
	if n := h.total(MetricRuns); n != 2 {
		t.Fatalf("a second run: counted %d, want 2", n)
	}

	ep, err := f.led.Allocate(f.ctx, ledger.AllocateInput{Pipeline: "tokyo", Key: "tokyo/k", Period: tokyoPeriod, NominalTime: tokyoNominal})
	if err != nil {
		t.Fatal(err)
	}
	ref := ledger.PaidTaskRef{Pipeline: "tokyo", EpisodeID: ep.Episode.ID, Step: "video", Revision: 0}
	if _, err := f.led.WriteIntent(f.ctx, ref, "idem-1", "owner"); err != nil {
		t.Fatal(err)
	}
	vt := paidvendor.Task{ID: "vt_1", Cost: paidvendor.Cost{Amount: 250, Currency: "USD"}}
	env.RegisterActivityWithOptions(func(ctx context.Context, amount int64) error {
		vt.Cost.Amount = amount
		_, err := f.acts.recordSubmission(ctx, ref, vt, allot.KindPaid)
		return err
	}, activity.RegisterOptions{Name: "RecordSubmissionForTest"})
	for _, c := range []struct{ amount, total int64 }{{250, 250}, {250, 250}, {250, 250}, {300, 300}, {300, 300}} {
		if _, err := env.ExecuteActivity("RecordSubmissionForTest", c.amount); err != nil {
			t.Fatal(err)
		}
		if n := h.total(MetricCost); n != c.total {
			t.Fatalf("after recording %d: cost counted %d, want %d", c.amount, n, c.total)
		}
	}
}
