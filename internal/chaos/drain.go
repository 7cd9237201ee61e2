package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/workflows"
)

// drainState is where the run stands while it drains.
type drainState struct {
	pendingKeys []string // acknowledged keys without a recorded run
	runningRuns int      // ScheduledRun executions still running
	inFlight    []string // episodes neither settled nor parked
	parked      []ledger.Episode
	failed      []ledger.Episode // episodes whose workflow failed
	settled     int
}

func (d drainState) String() string {
	return fmt.Sprintf("runs pending %d (keys without outcome %d), episodes in flight %d, parked %d, failed %d, settled %d",
		d.runningRuns, len(d.pendingKeys), len(d.inFlight), len(d.parked), len(d.failed), d.settled)
}

func (d drainState) quiet() bool {
	return len(d.pendingKeys) == 0 && d.runningRuns == 0 && len(d.inFlight) == 0
}

func (r *run) status(ctx context.Context) (drainState, error) {
	var d drainState
	running, err := listWorkflows(ctx, r.st.client, `WorkflowType = "ScheduledRun" AND ExecutionStatus = "Running"`)
	if err != nil {
		return d, err
	}
	d.runningRuns = len(running)
	for _, name := range r.pipelines.Names() {
		outcomes, err := r.led.RunOutcomes(ctx, name, time.Time{})
		if err != nil {
			return d, err
		}
		seen := map[string]bool{}
		for _, o := range outcomes {
			seen[o.AllocationKey] = true
		}
		r.mu.Lock()
		for k := range r.expected[name] {
			if !seen[k] {
				d.pendingKeys = append(d.pendingKeys, k)
			}
		}
		r.mu.Unlock()
		eps, err := r.led.ListEpisodes(ctx, name, "")
		if err != nil {
			return d, err
		}
		for _, ep := range eps {
			switch o := allot.Outcome(ep.Outcome); {
			case ep.Status == ledger.EpisodeCompleted || o == allot.OutcomeCompleted || o == allot.OutcomeRejected:
				d.settled++
			case o == allot.OutcomeNeedsAttention:
				d.parked = append(d.parked, ep)
			case o == allot.OutcomeFailed:
				d.failed = append(d.failed, ep)
			default:
				d.inFlight = append(d.inFlight, name+"/"+ep.ID+" ("+ep.Outcome+")")
			}
		}
	}
	sort.Strings(d.pendingKeys)
	sort.Strings(d.inFlight)
	return d, nil
}

// drain waits until every run has its outcome and every episode is
// completed or parked, has a person resolve the parked ones with the
// commands their state prints, and waits again, until every episode is
// completed or the scale's drain time is up.
func (r *run) drain(ctx context.Context) error {
	deadline := time.Now().Add(r.sc.Drain)
	lastLog := time.Time{}
	lastChange, lastText := time.Now(), ""
	checkedWorkflows := time.Time{}
	for {
		d, err := r.status(ctx)
		if err != nil {
			r.logf("drain: %v", err)
			if time.Now().After(deadline) {
				return err
			}
			sleep(ctx, 2*time.Second)
			continue
		}
		if text := d.String(); text != lastText {
			lastText, lastChange = text, time.Now()
		}
		if time.Since(lastLog) > 10*time.Second {
			r.logf("drain: %s", d)
			lastLog = time.Now()
		}
		if d.quiet() {
			if len(d.parked) == 0 && len(d.failed) == 0 {
				r.logf("drained: %s", d)
				return nil
			}
			// Everything that can move on by itself has: now a person.
			for _, ep := range d.parked {
				r.resolve(ctx, ep)
			}
			for _, ep := range d.failed {
				r.resume(ctx, ep, "its workflow failed")
			}
			lastChange = time.Now()
		} else if time.Since(lastChange) > 45*time.Second && time.Since(checkedWorkflows) > 45*time.Second {
			// Nothing moved for a while: is an episode without a workflow?
			checkedWorkflows = time.Now()
			r.resumeOrphans(ctx)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not drained after %s: %s; in flight %v, keys without outcome %v", r.sc.Drain, d, head(d.inFlight, 10), head(d.pendingKeys, 10))
		}
		sleep(ctx, 2*time.Second)
	}
}

func head(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("... %d more", len(s)-n))
	}
	return s
}

// resolve is what an operator does with a parked episode: read its state
// (`starter episode show`), and run the remedies it prints, as printed,
// with the starter binary: the look-up first (it prints the exact adopt
// command when the vendor has the task), else a resubmit with the same
// idempotency key, else a retry; abandoning is the last resort.
func (r *run) resolve(ctx context.Context, ep ledger.Episode) {
	out, err := r.starter(ctx, "episode", "show", "--pipeline", ep.Pipeline, "--episode", ep.ID, "--json")
	if err != nil {
		r.logf("human: %v", err)
		return
	}
	var show report.ShowResult
	if err := decodeJSON(out, &show); err != nil {
		r.logf("human: episode show %s/%s: %v", ep.Pipeline, ep.ID, err)
		return
	}
	if show.Workflow == nil || show.Workflow.State == nil || show.Workflow.State.Attention == nil {
		return // moved on meanwhile
	}
	a := show.Workflow.State.Attention
	r.logf("human: %s/%s parked (%s on %s: %s); remedies %q", ep.Pipeline, ep.ID, a.ErrorType, a.Step, a.Reason, a.Remedies)
	r.mu.Lock()
	r.humans[allot.EpisodeWorkflowID(ep.Pipeline, ep.ID)] = true
	r.mu.Unlock()
	if a.ErrorType == allot.BudgetExhausted {
		r.resolveBudget(ctx, ep, a)
		return
	}
	if lookup := remedyWith(a.Remedies, "starter episode lookup"); lookup != "" {
		out, err := r.runRemedy(ctx, lookup, "--json")
		var res operator.LookupResult
		if err == nil && decodeJSON(out, &res) == nil && res.Next != "" {
			if _, err := r.runRemedy(ctx, res.Next); err == nil {
				return
			}
		}
	}
	for _, pick := range []string{" --resubmit", " --retry", "starter episode rework", " --abandon"} {
		if cmd := remedyWith(a.Remedies, pick); cmd != "" {
			if _, err := r.runRemedy(ctx, cmd); err == nil {
				return
			}
		}
	}
	r.logf("human: no remedy of %s/%s went through", ep.Pipeline, ep.ID)
}

func remedyWith(remedies []string, part string) string {
	for _, c := range remedies {
		if strings.Contains(c, part) {
			return c
		}
	}
	return ""
}

// runRemedy runs a printed `starter ...` command with the starter binary.
func (r *run) runRemedy(ctx context.Context, command string, extra ...string) (string, error) {
	args, err := workflows.SplitCommand(command)
	if err != nil || len(args) == 0 || args[0] != "starter" {
		return "", fmt.Errorf("remedy %q is not a starter command line (%v)", command, err)
	}
	r.humanCommands.Add(1)
	out, err := r.starter(ctx, append(args[1:], extra...)...)
	if err != nil {
		r.logf("human: %s: %v", command, err)
	} else {
		r.logf("human: ran %s", command)
	}
	return out, err
}

// resume starts the workflow of an unsettled episode that has none, as
// `starter episode resume` does.
func (r *run) resume(ctx context.Context, ep ledger.Episode, why string) {
	r.mu.Lock()
	r.humans[allot.EpisodeWorkflowID(ep.Pipeline, ep.ID)] = true
	r.mu.Unlock()
	r.logf("human: %s/%s: %s", ep.Pipeline, ep.ID, why)
	_, _ = r.runRemedy(ctx, allot.ResumeCommand(ep.Pipeline, ep.ID))
}

// resumeOrphans asks Temporal about every unsettled episode's workflow
// (check's workflow_missing and workflow_ended) and resumes those without
// one.
func (r *run) resumeOrphans(ctx context.Context) {
	vs, err := report.CheckWorkflows(ctx, r.led, r.pipelines.Names(), report.WorkflowCheckInput{
		Client: r.st.client, LedgerID: r.led.ID(), Grace: 30 * time.Second})
	if err != nil {
		r.logf("drain: check workflows: %v", err)
		return
	}
	for _, v := range vs {
		if v.Kind != report.KindWorkflowMissing && v.Kind != report.KindWorkflowEnded {
			continue
		}
		// The fix check prints is `starter episode resume ...`: run it as
		// printed.
		r.mu.Lock()
		r.humans[allot.EpisodeWorkflowID(v.Pipeline, v.Episode)] = true
		r.mu.Unlock()
		r.logf("human: %s/%s: %s: %s", v.Pipeline, v.Episode, v.Kind, v.Detail)
		_, _ = r.runRemedy(ctx, v.Fix)
	}
}

// resolveBudget is what a finance-minded operator does with an episode a
// budget refused: the budget is not raised (its limit is the point). If
// every budget has room for the step now (`starter budget list`), the
// printed retry asks again; else the printed abandon gives the step up.
func (r *run) resolveBudget(ctx context.Context, ep ledger.Episode, a *workflows.Attention) {
	r.mu.Lock()
	r.budgetRefusals++
	if ep.Pipeline == PipelineDaily {
		r.activityRefusals++
	}
	for _, b := range a.Budgets {
		r.exhausted[[2]string{b.Budget, b.Period}] = true
	}
	r.mu.Unlock()
	room := len(a.Budgets) > 0
	for _, b := range a.Budgets {
		out, err := r.starter(ctx, "budget", "list", b.Budget, "--json")
		var list report.BudgetsResult
		if err != nil || decodeJSON(out, &list) != nil || len(list.Budgets) != 1 {
			r.logf("human: budget list %s: %v", b.Budget, err)
			room = false
			continue
		}
		free := int64(-1)
		for _, p := range list.Budgets[0].Periods {
			if p.Period == b.Period {
				free = p.Free
			}
		}
		room = room && free >= b.Asked
	}
	pick := " --abandon"
	if room {
		pick = " --retry"
	}
	if cmd := remedyWith(a.Remedies, pick); cmd != "" {
		if _, err := r.runRemedy(ctx, cmd); err == nil {
			return
		}
	}
	r.logf("human: no remedy of %s/%s went through", ep.Pipeline, ep.ID)
}
