package chaos

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/pipeline"
)

func TestPlanIsAFunctionOfTheSeed(t *testing.T) {
	sc := Scales["small"]
	a, b := newPlan(7, sc, 3), newPlan(7, sc, 3)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two plans of one seed differ")
	}
	if c := newPlan(8, sc, 3); c.Digest == a.Digest {
		t.Fatal("seeds 7 and 8 made the same plan")
	}
	kinds := map[string]int{}
	for _, e := range a.Events {
		kinds[e.Kind]++
		if e.At < 0 || e.At > sc.Load {
			t.Fatalf("event outside the load phase: %s", e)
		}
		if (e.Kind == evManual || e.Kind == evDupScheduled) && (e.Nominal.Before(sc.From) || !e.Nominal.Before(sc.To)) {
			t.Fatalf("nominal time outside [%s, %s): %s", sc.From, sc.To, e)
		}
	}
	if kinds[evKill] != sc.Kills || kinds[evVendorRestart] != 1 || kinds[evTemporalRestart] != 1 || kinds[evBackfill] != 3*len(weeks(sc)) {
		t.Fatalf("event kinds %v", kinds)
	}
}

func TestScheduledTimesAreTheCronsAcrossTheNewYear(t *testing.T) {
	sc := Scales["small"]
	s := schedules(sc)
	daily := s[PipelineDaily].times(sc.From, sc.To)
	// Auckland's Friday 2027-01-01 06:00 is 2026-12-31 17:00 UTC: a run
	// of 2026 in UTC and of 2027-01-01 in the pipeline's zone.
	want := time.Date(2026, 12, 31, 17, 0, 0, 0, time.UTC)
	found := false
	for _, ti := range daily {
		found = found || ti.Equal(want)
	}
	if !found {
		t.Fatalf("daily times %v lack %s", daily, want)
	}
	if len(daily) != 2*len(weeks(sc)) {
		t.Fatalf("%d daily times in %d weeks", len(daily), len(weeks(sc)))
	}
	set, err := pipeline.Parse([]byte(pipelinesTOML(sc, "http://127.0.0.1:1", "http://127.0.0.1:2", time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))), "chaos")
	if err != nil {
		t.Fatal(err)
	}
	p, err := set.Get(PipelineDaily)
	if err != nil {
		t.Fatal(err)
	}
	if period := p.PeriodOf(want); period != "2027-01-01" {
		t.Fatalf("period of %s = %q", want, period)
	}
	// chaos-batch's step is in batch mode on the batch vendor, whose
	// collector asks every BatchPollEvery.
	bp, err := set.Get(PipelineBatch)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := bp.Step("score"); !ok || !st.Batch || st.Vendor != BatchVendor || st.BatchMaxItemsOrDefault() != BatchMaxItems || st.BatchMaxWaitDuration() != BatchMaxWait {
		t.Fatalf("chaos-batch's step %+v", st)
	}
	if got := set.Batching(BatchVendor); got.PollEvery() != BatchPollEvery || got.ListLag() != BatchListLag || got.BatchMaxQueuedItems != BatchMaxQueued {
		t.Fatalf("the batch vendor's settings %+v", got)
	}
	review := s[PipelineReview].times(sc.From, sc.To)
	if len(review) != 2*len(weeks(sc)) || review[0] != time.Date(2026, 12, 15, 14, 30, 0, 0, time.UTC) {
		t.Fatalf("review times %v", review)
	}
	if got := allot.AllocationKey(PipelineVideo, s[PipelineVideo].times(sc.From, sc.To)[0]); got != "chaos-video/scheduled-2026-12-14T02:00:00Z" {
		t.Fatalf("first video key %s", got)
	}
}

func TestEpisodeTimesSpanEveryRunOfAnID(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	execs := []*workflowExecution{
		{ID: "a", Start: t0, Close: t0.Add(2 * time.Second)},
		{ID: "a", Start: t0.Add(10 * time.Second), Close: t0.Add(12 * time.Second)}, // resumed
		{ID: "b", Start: t0, Close: t0.Add(time.Second)},
		{ID: "c", Start: t0}, // still open: not counted
	}
	got := episodeTimes(execs)
	if !reflect.DeepEqual(got, []time.Duration{time.Second, 12 * time.Second}) {
		t.Fatalf("times %v", got)
	}
	if percentile(got, 0.5) != time.Second || percentile(got, 0.95) != 12*time.Second || percentile(nil, 0.5) != 0 {
		t.Fatal("percentiles")
	}
}

func TestSummaryIsOneLine(t *testing.T) {
	line := Summary{Seed: 1, Scale: "small", Violations: []string{"x"}}.Line()
	if strings.Contains(line, "\n") || !strings.HasPrefix(line, "chaos seed=1 scale=small") || !strings.HasSuffix(line, "violations=1") {
		t.Fatalf("summary %q", line)
	}
}
