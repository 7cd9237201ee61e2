package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/reconcile"
	"allot/internal/report"
	"allot/paidvendor"
	"allot/pipeline"
)

// check asserts allot's promises on what the run left, and fills in the
// summary's figures. Every broken promise is a violation.
func (r *run) check(ctx context.Context, sum *Summary) error {
	bad := func(format string, args ...any) { r.violation(sum, format, args...) }

	// The vendors' bills. The default vendor's planted faults are read
	// first: allot's own promises are checked on the bill without them
	// (fair), and the drift items must be exactly them (checkDrift).
	planted, err := r.readBillFaults(ctx)
	if err != nil {
		return err
	}
	costOf := r.costOf(ctx)
	type vendorBill struct {
		name    string
		charges []paidvendor.Charge
	}
	// The vendors as the pipelines name them, with their keys given here,
	// not through this process's environment, and their accounts, where
	// the workers' reconcilers keep their drift items.
	var vendors []report.VendorCharges
	for _, v := range []struct {
		name string
		vp   *vendorProc
	}{{pipeline.DefaultVendor, r.vendor}, {"strict", r.strict}, {ActivityVendor, r.activity}, {BatchVendor, r.batch}} {
		c, err := paidvendor.NewHTTPClient(v.vp.url, v.vp.key, nil)
		if err != nil {
			return err
		}
		var lister report.ChargeLister = c
		if v.vp == r.vendor {
			lister = fairLister{c: c, planted: planted, costOf: costOf}
		}
		vendors = append(vendors, report.VendorCharges{Name: v.name, Charges: lister, Bill: reconcile.SameBill(v.vp.url, v.vp.key)})
	}
	var bills []vendorBill
	for _, v := range vendors {
		var charges []paidvendor.Charge
		if err := r.retry(ctx, time.Now().Add(30*time.Second), func(ctx context.Context) error {
			var err error
			charges, err = v.Charges.Charges(ctx)
			return err
		}); err != nil {
			return fmt.Errorf("vendor %s charges: %w", v.Name, err)
		}
		bills = append(bills, vendorBill{v.Name, charges})
	}
	// The default vendor's own count of requests at once, over the run.
	if err := r.vendor.sample(ctx); err != nil {
		return fmt.Errorf("default vendor stats: %w", err)
	}
	sum.VendorMaxInFlight, _ = r.vendor.seen()
	if sum.VendorMaxInFlight > DefaultMaxInFlight {
		bad("the default vendor served %d requests at once; its max_in_flight is %d", sum.VendorMaxInFlight, DefaultMaxInFlight)
	}
	// Paused vendors: the requests that reached one after the grace (each
	// pause's is a violation of its own, in faultErrs).
	sum.PausedRequests = r.pausedRequests.Load()
	r.mu.Lock()
	for _, f := range r.faultErrs {
		bad("%s", f)
	}
	r.mu.Unlock()
	// Every pause was resumed and every breaker closed again.
	states, err := r.led.VendorStates(ctx, time.Time{})
	if err != nil {
		return err
	}
	for _, s := range states {
		if s.Status() != "active" {
			bad("vendor %s is still %s after the run: %s", s.Vendor, s.Status(), s.Reason())
		}
	}
	chargesByKey := map[string][]paidvendor.Charge{}
	chargesByRef := map[string]paidvendor.Charge{}
	var chargedTotal int64
	for _, b := range bills {
		if b.name == ActivityVendor {
			sum.ActivityCharges = len(b.charges)
		}
		for _, ch := range b.charges {
			sum.Charges++
			chargedTotal += ch.Amount
			chargesByKey[ch.IdempotencyKey] = append(chargesByKey[ch.IdempotencyKey], ch)
			chargesByRef[ch.TaskID] = ch
		}
	}
	// One charge per idempotency key: the promise that nobody is paid twice.
	for key, chs := range chargesByKey {
		if len(chs) > 1 {
			var refs []string
			for _, c := range chs {
				refs = append(refs, c.TaskID)
			}
			bad("vendor charged idempotency key %s %d times (%s)", key, len(chs), strings.Join(refs, ", "))
		}
	}

	ledgerKeys := map[string]bool{}
	costByRef := map[string]ledger.CostEntry{}
	var costTotal int64
	for _, name := range r.pipelines.Names() {
		eps, err := r.led.ListEpisodes(ctx, name, "")
		if err != nil {
			return err
		}
		sum.Episodes += len(eps)
		byKey := map[string][]ledger.Episode{}
		byID := map[string]ledger.Episode{}
		periods := map[string][]int{}
		for _, ep := range eps {
			byKey[ep.AllocationKey] = append(byKey[ep.AllocationKey], ep)
			byID[ep.ID] = ep
			periods[ep.Period] = append(periods[ep.Period], ep.Sequence)
			o := allot.Outcome(ep.Outcome)
			if ep.Status != ledger.EpisodeCompleted && o != allot.OutcomeCompleted && o != allot.OutcomeRejected {
				bad("%s/%s did not complete: status %s, outcome %q (%s)", name, ep.ID, ep.Status, ep.Outcome, ep.OutcomeReason)
			}
		}
		// Invariant 1: one key, one episode.
		for key, list := range byKey {
			if len(list) > 1 {
				var ids []string
				for _, ep := range list {
					ids = append(ids, ep.ID)
				}
				bad("%s: key %s has %d episodes (%s)", name, key, len(list), strings.Join(ids, ", "))
			}
		}
		// Invariant 2: dense sequences per period.
		for period, seqs := range periods {
			sort.Ints(seqs)
			for i, s := range seqs {
				if s != i {
					bad("%s: period %s has sequences %v, not 0..%d", name, period, seqs, len(seqs)-1)
					break
				}
			}
		}
		if p, err := r.pipelines.Get(name); err == nil && p.MaxPerPeriod > 0 {
			for period, seqs := range periods {
				if len(seqs) > p.MaxPerPeriod {
					bad("%s: period %s has %d episodes, over its cap of %d", name, period, len(seqs), p.MaxPerPeriod)
				}
			}
		}
		// Invariant 10: every key has a run outcome with a reason, and
		// every run of a key names the key's one episode.
		outcomes, err := r.led.RunOutcomes(ctx, name, time.Time{})
		if err != nil {
			return err
		}
		keysRun := map[string]bool{}
		for _, o := range outcomes {
			keysRun[o.AllocationKey] = true
			if o.Reason == "" {
				bad("%s: run %s of key %s has outcome %q without a reason", name, o.RunID, o.AllocationKey, o.Outcome)
			}
			switch o.Outcome {
			case allot.OutcomeSkipped:
				sum.Skipped++
			case allot.OutcomeFailed:
				r.logf("note: run %s of %s failed: %s", o.RunID, o.AllocationKey, o.Reason)
			}
			if o.EpisodeID != "" {
				ep, ok := byID[o.EpisodeID]
				switch {
				case !ok:
					bad("%s: run %s of key %s names episode %s, which the ledger does not have", name, o.RunID, o.AllocationKey, o.EpisodeID)
				case ep.AllocationKey != o.AllocationKey:
					bad("%s: run %s of key %s got episode %s, which is key %s's", name, o.RunID, o.AllocationKey, o.EpisodeID, ep.AllocationKey)
				}
			}
		}
		sum.Keys += len(keysRun)
		r.mu.Lock()
		for key := range r.expected[name] {
			if !keysRun[key] {
				bad("%s: key %s was started but has no run outcome", name, key)
			}
		}
		r.mu.Unlock()
		for key := range byKey {
			if !keysRun[key] {
				bad("%s: episode key %s has no run outcome", name, key)
			}
		}
		// Paid tasks against the vendors' bills.
		for _, ep := range eps {
			tasks, err := r.led.PaidTasks(ctx, name, ep.ID)
			if err != nil {
				return err
			}
			for _, t := range tasks {
				// Paid tasks the vendor accepted; a budget's refusals
				// (planned, then abandoned) are counted apart.
				if t.RemoteRef != "" {
					sum.PaidTasks++
				}
				if t.IdempotencyKey != "" {
					ledgerKeys[t.IdempotencyKey] = true
				}
				chs := chargesByKey[t.IdempotencyKey]
				switch t.State {
				case allot.PaidSubmitted, allot.PaidSucceeded, allot.PaidFailed:
					if planted.dropped[t.RemoteRef] {
						if len(chs) != 0 {
							bad("%s/%s step %s r%d (%s): its charge was planted as dropped, yet the bill charges its key %d times", name, ep.ID, t.Step, t.Revision, t.RemoteRef, len(chs))
						}
					} else if len(chs) != 1 {
						bad("%s/%s step %s r%d (%s, %s): %d vendor charges under its key, want 1", name, ep.ID, t.Step, t.Revision, t.State, t.RemoteRef, len(chs))
					} else if chs[0].TaskID != t.RemoteRef {
						bad("%s/%s step %s r%d: the ledger's reference %s is not the charged task %s", name, ep.ID, t.Step, t.Revision, t.RemoteRef, chs[0].TaskID)
					}
				default:
					if len(chs) > 0 {
						bad("%s/%s step %s r%d is %s, yet the vendor charged its key %d times", name, ep.ID, t.Step, t.Revision, t.State, len(chs))
					}
				}
			}
		}
		costs, err := r.led.Costs(ctx, name, "")
		if err != nil {
			return err
		}
		for _, c := range costs {
			costByRef[c.RemoteRef] = c
			costTotal += c.Amount
		}
	}
	// Every charge is the ledger's, and the ledger's costs are the bills.
	for key, chs := range chargesByKey {
		if !ledgerKeys[key] {
			bad("vendor charged key %s (task %s), which no paid task of the ledger has", key, chs[0].TaskID)
		}
	}
	for ref, ch := range chargesByRef {
		c, ok := costByRef[ref]
		switch {
		case !ok:
			bad("vendor charge %s (%d %s) has no cost in the ledger", ref, ch.Amount, ch.Currency)
		case c.Amount != ch.Amount || c.Currency != ch.Currency:
			bad("cost of %s is %d %s in the ledger, %d %s at the vendor", ref, c.Amount, c.Currency, ch.Amount, ch.Currency)
		}
	}
	// A dropped charge's cost stands in the ledger, charged nothing.
	var droppedTotal int64
	for ref, c := range costByRef {
		if planted.dropped[ref] {
			droppedTotal += c.Amount
			sum.Charges++
			continue
		}
		if _, ok := chargesByRef[ref]; !ok {
			bad("ledger cost %s (%s/%s step %s, %d %s) was never charged", ref, c.Pipeline, c.EpisodeID, c.Step, c.Amount, c.Currency)
		}
	}
	if costTotal != chargedTotal+droppedTotal {
		bad("ledger costs total %d, vendor charges total %d (and %d dropped from the bill as planted)", costTotal, chargedTotal, droppedTotal)
	}
	// The bill as it should have been: a dropped charge at its cost.
	sum.Bill, sum.Costs = chargedTotal+droppedTotal, costTotal

	// Budgets (invariant 20): every (budget, period) settled within its
	// limit, to the minor unit, with nothing left reserved; and a period
	// that ran out has less free than its largest episode asks (a
	// reservation not released promptly would leave it short).
	if err := r.checkCatchUp(ctx, sum, bad); err != nil {
		return err
	}
	if err := r.checkBudgets(ctx, sum, bad); err != nil {
		return err
	}
	if err := r.checkDeadlines(ctx, sum, bad); err != nil {
		return err
	}
	for _, b := range bills {
		if b.name == BatchVendor {
			if err := r.checkBatches(ctx, sum, b.charges, bad); err != nil {
				return err
			}
		}
	}

	// The reconciler, once more, against the planted faults; then the
	// planted drift items are acknowledged, so check reports the rest.
	if err := r.checkDrift(ctx, sum, planted, bad); err != nil {
		return err
	}

	// report.Audit: what `starter check --vendor` runs, and Temporal's
	// side (every unsettled episode has its workflow).
	audit, err := report.Audit(ctx, r.led, report.CheckInput{
		StaleIntent: time.Nanosecond, Vendors: vendors, Pipelines: r.pipelines,
		Workflows: &report.WorkflowCheckInput{Client: r.st.client, LedgerID: r.led.ID()},
	})
	if err != nil {
		return err
	}
	for _, v := range audit.Violations {
		bad("audit: %s", v)
	}
	if audit.Incomplete != "" {
		bad("audit: %s", audit.Incomplete)
	}
	// And the real `starter check --vendor`, as an operator runs it.
	out, err := r.starter(ctx, "check", "--vendor", "--json")
	var res report.CheckResult
	if derr := decodeJSON(out, &res); derr != nil {
		bad("starter check --vendor: %v (%v)", err, derr)
	} else {
		// It reads the bill as the vendor serves it, planted faults and
		// all: their lines are acknowledged drift items by now; what
		// remains is a budget the raw bill charged over its limit through
		// a planted double charge or wrong amount.
		kinds := map[string]int{}
		for _, v := range res.Violations {
			if !r.chargedOverBudget(ctx, planted, v) {
				kinds[v.Kind]++
			}
		}
		if len(kinds) > 0 || res.Incomplete != "" || err != nil && len(res.Violations) == 0 {
			bad("starter check --vendor: ok=%v (%v), %d violations %v, incomplete %q", res.OK, err, len(res.Violations), kinds, res.Incomplete)
		}
	}

	// Temporal: every Episode workflow is a ledger episode's, all closed.
	runs, err := listWorkflows(ctx, r.st.client, `WorkflowType = "ScheduledRun"`)
	if err != nil {
		return err
	}
	sum.Runs = len(runs)
	episodes, err := listWorkflows(ctx, r.st.client, `WorkflowType = "Episode"`)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, name := range r.pipelines.Names() {
		eps, err := r.led.ListEpisodes(ctx, name, "")
		if err != nil {
			return err
		}
		for _, ep := range eps {
			known[allot.EpisodeWorkflowID(name, ep.ID)] = true
		}
	}
	for _, e := range episodes {
		if !known[e.ID] {
			bad("Episode workflow %s (run %s) has no episode in the ledger", e.ID, e.RunID)
		}
		if e.Close.IsZero() {
			bad("Episode workflow %s (run %s) still runs after the drain", e.ID, e.RunID)
		}
	}
	times := episodeTimes(episodes)
	sum.EpisodeP50, sum.EpisodeP95 = percentile(times, 0.5), percentile(times, 0.95)
	// The same without the episodes that waited for a person.
	var unattended []*workflowExecution
	r.mu.Lock()
	for _, e := range episodes {
		if !r.humans[e.ID] {
			unattended = append(unattended, e)
		}
	}
	r.mu.Unlock()
	sum.EpisodeP95NoHuman = percentile(episodeTimes(unattended), 0.95)
	return nil
}

func (r *run) checkBudgets(ctx context.Context, sum *Summary, bad func(string, ...any)) error {
	sum.BudgetUseMin = 1000
	for _, b := range r.pipelines.Budgets() {
		periods, err := r.led.BudgetPeriods(ctx, []ledger.BudgetLimit{{Budget: b.Name, Currency: b.Limit.Currency, Limit: b.Limit.Amount}})
		if err != nil {
			return err
		}
		for _, p := range periods {
			sum.BudgetPeriods++
			if p.Settled > p.Limit {
				sum.BudgetsOverLimit++
				bad("budget %s period %s settled %d, over its limit of %d", b.Name, p.Period, p.Settled, p.Limit)
			}
			if p.Reserved != 0 || p.Held != 0 {
				bad("budget %s period %s still holds %d reserved for %d tasks after the drain", b.Name, p.Period, p.Reserved, p.Held)
			}
			r.mu.Lock()
			exhausted := r.exhausted[[2]string{b.Name, p.Period}]
			r.mu.Unlock()
			if !exhausted {
				continue
			}
			sum.BudgetsExhausted++
			use := int(p.Settled * 1000 / p.Limit) // per mille, limits are far below 2^53
			sum.BudgetUseMin = min(sum.BudgetUseMin, use)
			// An episode is admitted whole (docs/design.md, "An episode is
			// paid for whole"): a refusal leaves less free than the
			// largest episode the budget covers asks, never more.
			if whole := r.largestEpisodePrice(b); p.Limit-p.Settled >= whole {
				bad("budget %s period %s refused an episode but settled only %d of its %d (%d.%d%%), leaving room for a whole episode (%d): a reservation was not released", b.Name, p.Period, p.Settled, p.Limit, use/10, use%10, whole)
			}
		}
	}
	if sum.BudgetsExhausted == 0 {
		sum.BudgetUseMin = 0
	}
	return nil
}

// largestEpisodePrice is the most one episode of a pipeline the budget
// covers asks of it: the max_cost of every step it covers, added.
func (r *run) largestEpisodePrice(b pipeline.Budget) int64 {
	var most int64
	for _, name := range r.pipelines.Names() {
		p, err := r.pipelines.Get(name)
		if err != nil {
			continue
		}
		var sum int64
		for _, st := range p.Steps {
			if b.Covers(p.Name, st) && st.MaxCost != nil {
				sum += st.MaxCost.Amount
			}
		}
		most = max(most, sum)
	}
	return most
}

// checkCatchUp: every time chaos-catchup's schedule matched while it ran
// has exactly one run outcome under its key, allocated or skipped as
// missed_catch_up (invariant 21), never both; and the workers outage made
// the latest policy skip some of them.
func (r *run) checkCatchUp(ctx context.Context, sum *Summary, bad func(string, ...any)) error {
	if r.catchUpFrom.IsZero() || r.catchUpUntil.IsZero() {
		bad("%s's schedule did not run (from %s until %s)", PipelineCatchUp, r.catchUpFrom, r.catchUpUntil)
		return nil
	}
	p, err := r.pipelines.Get(PipelineCatchUp)
	if err != nil {
		return err
	}
	spec, err := p.Schedule.Spec()
	if err != nil {
		return err
	}
	times, err := spec.Times(p.TimeZone, r.catchUpFrom, r.catchUpUntil, 0)
	if err != nil {
		return err
	}
	keys := make([]string, len(times))
	for i, t := range times {
		keys[i] = allot.AllocationKey(PipelineCatchUp, t)
	}
	runs, err := r.led.RunOutcomesOfKeys(ctx, PipelineCatchUp, keys)
	if err != nil {
		return err
	}
	byKey := map[string][]ledger.RunOutcome{}
	for _, o := range runs {
		byKey[o.AllocationKey] = append(byKey[o.AllocationKey], o)
	}
	sum.CatchUpTimes = len(times)
	for _, k := range keys {
		var ran, skipped bool
		for _, o := range byKey[k] {
			switch {
			case o.Outcome == allot.OutcomeSkipped && o.Reason == allot.ReasonMissedCatchUp:
				skipped = true
			case o.Outcome == allot.OutcomeAllocated || o.Outcome == allot.OutcomeReused:
				ran = true
			}
		}
		switch {
		case len(byKey[k]) == 0:
			bad("%s: scheduled time %s has no run outcome (invariant 21)", PipelineCatchUp, k)
		case ran && skipped:
			bad("%s: scheduled time %s both ran and was skipped as missed_catch_up", PipelineCatchUp, k)
		case skipped:
			sum.MissedCatchUp++
		}
	}
	sum.WorkersOutages = int(r.workersOutages.Load())
	if sum.WorkersOutages > 0 && sum.MissedCatchUp == 0 {
		bad("%s: every worker was down across %d of its times, and catch_up = \"latest\" skipped none", PipelineCatchUp, int((3*CatchUpInterval+CatchUpGrace)/CatchUpInterval))
	}
	return nil
}
