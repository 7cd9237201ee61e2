package chaos

import (
	"context"
	"fmt"
	"time"

	"allot"
	"allot/internal/operator"
	"allot/pipeline"
)

// pauseVendor is an operator pausing a vendor, sends and polls
// (`starter vendor pause --polls`), and resuming it after d. From a grace
// after the pause (a request that passed the gate before it may still go
// out) until the resume, the vendor must see no request of any kind: no
// submission, look-up, status poll or download (docs/design.md, "Vendor
// controls"), whatever its adapter; meanwhile the episodes that reach a
// paid step wait, visibly, for it.
func (r *run) pauseVendor(ctx context.Context, name string, d time.Duration) {
	const grace = 5 * time.Second
	v := r.vendorProcs()[name]
	if v == nil {
		r.faultViolation("the plan pauses vendor %q, which the run does not have", name)
		return
	}
	r.logf("operator pauses vendor %s for %s (starter vendor pause)", name, d)
	if _, err := r.starter(ctx, "vendor", "pause", name, "--polls", "--reason", "chaos: the vendor bills twice", "--by", "chaos", "--json"); err != nil {
		r.faultViolation("starter vendor pause %s: %v", name, err)
		return
	}
	r.vendorPauses.Add(1)
	resumeAt := time.Now().Add(d)
	sleep(ctx, grace)
	_ = v.sample(ctx)
	before := v.requestsSeen()
	for time.Now().Before(resumeAt) && ctx.Err() == nil {
		r.countPausedWaits(ctx)
		sleep(ctx, time.Second)
	}
	_ = v.sample(ctx)
	if after := v.requestsSeen(); after != before {
		r.pausedRequests.Add(after - before)
		r.faultViolation("the paused vendor %s got %d requests between %s after the pause and its resume", name, after-before, grace)
	}
	if err := r.retry(ctx, time.Now().Add(time.Minute), func(ctx context.Context) error {
		_, err := r.starter(ctx, "vendor", "resume", name, "--json")
		return err
	}); err != nil {
		r.faultViolation("starter vendor resume %s: %v", name, err)
		return
	}
	r.logf("operator resumed vendor %s", name)
}

// vendorProcs are the run's vendors by their [[vendor]] names.
func (r *run) vendorProcs() map[string]*vendorProc {
	return map[string]*vendorProc{pipeline.DefaultVendor: r.vendor, "strict": r.strict, ActivityVendor: r.activity, BatchVendor: r.batch}
}

// countPausedWaits keeps the most episodes seen waiting for the paused
// vendor at once, from the ledger's outcomes.
func (r *run) countPausedWaits(ctx context.Context) {
	n := 0
	for _, name := range r.pipelines.Names() {
		eps, err := r.led.ListEpisodes(ctx, name, "")
		if err != nil {
			return
		}
		for _, ep := range eps {
			if allot.Outcome(ep.Outcome) == allot.OutcomeWaitingVendor && ep.OutcomeReason == allot.ReasonVendorPaused {
				n++
			}
		}
	}
	for {
		cur := r.pausedWaits.Load()
		if int64(n) <= cur || r.pausedWaits.CompareAndSwap(cur, int64(n)) {
			return
		}
	}
}

// outageRuns is how many runs start while the default vendor is down.
const outageRuns = 2

// vendorOutage kills the default vendor for d: its breaker must trip (the
// ledger shows it tripped) and, once the vendor is back, close again (the
// drain completes every episode; check finds it active).
func (r *run) vendorOutage(ctx context.Context, d time.Duration) {
	r.logf("default vendor killed (SIGKILL) for %s: its breaker should trip", d)
	r.vendor.down(ctx)
	r.vendor.p.kill()
	back := time.Now().Add(d)
	// Requests that reach it while it is down: runs of a week after the
	// load's range, whose budget periods have room (the load's may have
	// run out, and a refused step sends nothing).
	week := r.sc.To.AddDate(0, 0, 14)
	for i := range outageRuns {
		nominal := week.Add(time.Duration(i) * time.Hour)
		res, err := r.runs.Run(ctx, operator.RunInput{Pipeline: PipelineReview, NominalTime: nominal})
		if err != nil {
			r.loadError("start a run of %s at %s during the vendor outage: %v", PipelineReview, nominal.Format(time.RFC3339), err)
			continue
		}
		r.expect(PipelineReview, res.WorkflowID)
	}
	var seen time.Time
	maxFailures := 0
	for time.Now().Before(back) && ctx.Err() == nil {
		s, err := r.led.VendorStateOf(ctx, pipeline.DefaultVendor, time.Time{})
		if err == nil {
			maxFailures = max(maxFailures, s.Failures)
		}
		if err == nil && s.Tripped() && !s.TrippedAt.Equal(seen) {
			seen = s.TrippedAt
			r.vendorTrips.Add(1)
			r.logf("default vendor's breaker open: %s", s.Reason())
		}
		sleep(ctx, 500*time.Millisecond)
	}
	if err := r.vendor.start(ctx, true); err != nil {
		r.faultViolation("restart the default vendor after its outage: %v", err)
		return
	}
	// The breaker trips on trip_after consecutive failed requests; a
	// vendor no request reached while it was down (its budget refused the
	// sends, nothing was in flight) has nothing to trip on.
	if r.vendorTrips.Load() == 0 && maxFailures < defaultTripAfter {
		r.logf("no trip: the default vendor was down %s and saw %d failed requests of the %d that trip its breaker", d, maxFailures, defaultTripAfter)
	} else if r.vendorTrips.Load() == 0 {
		r.faultViolation("the default vendor was down %s, %d requests to it failed, and its breaker never tripped", d, maxFailures)
	}
	r.logf("default vendor back")
}

func (r *run) faultViolation(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faultErrs = append(r.faultErrs, fmt.Sprintf(format, args...))
}
