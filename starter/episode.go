package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"allot"
	"allot/activities"
	"allot/app"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/paidvendor"
	"allot/pipeline"
	"allot/workflows"
)

// episodeCommand dispatches `starter episode <subcommand>`.
func episodeCommand(ctx context.Context, c *cli, args []string) error {
	return dispatch(ctx, c, "episode", episodeSubcommands, args)
}

// episodeSubcommands are `starter episode`'s subcommands.
var episodeSubcommands = map[string]subcommand{
	"show":       episodeShow,
	"lookup":     episodeLookup,
	"approve":    episodeUpdate(workflows.ApproveUpdate),
	"reject":     episodeUpdate(workflows.RejectUpdate),
	"rework":     episodeUpdate(workflows.ReworkUpdate),
	"reassemble": episodeUpdate(workflows.ReassembleUpdate),
	"resolve":    episodeUpdate(workflows.ResolveUpdate),
	"resume":     episodeResume,
}

func episodeShow(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("episode show", true)
	var pipelineName, episodeID string
	fs.StringVar(&pipelineName, "pipeline", "", "pipeline (required)")
	fs.StringVar(&episodeID, "episode", "", "episode ID, e.g. 2026-W32-0 (required)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if pipelineName == "" || episodeID == "" {
		return usageError{errors.New("--pipeline and --episode are required")}
	}
	led, err := c.openLedgerReadOnly(ctx)
	if err != nil {
		return err
	}
	defer led.Close()
	// Temporal is optional for show: the ledger alone answers.
	cl, _ := c.dial(ctx)
	if cl != nil {
		defer cl.Close()
	}
	res, err := report.Show(ctx, led, cl, pipelineName, episodeID)
	if err != nil {
		return err
	}
	hint := ""
	if wf := res.Workflow; wf != nil && wf.NoWorker != nil {
		wf.NoWorker.Namespace = c.resolvedNamespace
		hint = c.noWorkerHint(*wf.NoWorker)
	}
	c.print(res, func(w io.Writer) {
		printShow(w, res)
		if hint != "" {
			fmt.Fprintf(w, "\nno worker\t%s\n", strings.ReplaceAll(hint, "\n", "\n\t"))
		}
	})
	return nil
}

// printShow writes `episode show` for people.
func printShow(w io.Writer, res report.ShowResult) {
	e := res.Episode
	fmt.Fprintf(w, "episode\t%s/%s (period %s, sequence %d)\n", e.Pipeline, e.ID, e.Period, e.Sequence)
	fmt.Fprintf(w, "status\t%s\n", e.Status)
	fmt.Fprintf(w, "key\t%s\n", e.AllocationKey)
	fmt.Fprintf(w, "nominal time\t%s\n", e.NominalTime.Format(time.RFC3339))
	if res.Workflow != nil {
		stage := ""
		if res.Workflow.State != nil {
			stage = " / " + string(res.Workflow.State.Stage)
			if a := res.Workflow.State.Attention; a != nil {
				stage += fmt.Sprintf(" (%s on %s: %s)", a.ErrorType, a.Step, a.Reason)
				for _, r := range a.Remedies {
					stage += "\n\tremedy: " + r
				}
			}
			if r := res.Workflow.State.Retrying; r != nil {
				stage += fmt.Sprintf(" (%s of %s retrying: %d attempts since %s; last error %s: %s)",
					r.Activity, r.Step, r.Attempts, r.Since.Format(time.RFC3339), r.ErrorType, r.Error)
			}
			if b := res.Workflow.State.Batch; b != nil {
				stage += fmt.Sprintf(" (%s waits for a vendor batch since %s, %s", b.Step, b.Since.Format(time.RFC3339), b.Reason)
				if b.VendorBatchID != "" {
					stage += fmt.Sprintf(": batch %s, %s, %d items", b.VendorBatchID, b.Status, b.Items)
				}
				stage += ")"
			}
			if v := res.Workflow.State.Waiting; v != nil {
				stage += fmt.Sprintf(" (%s waits for vendor %s since %s, %s: %s)", v.Step, v.Vendor, v.Since.Format(time.RFC3339), v.Reason, v.Message)
				// The recorded wait is as of Since; what the workers act
				// on now is the ledger's.
				if n := res.VendorNow; n != nil {
					stage += fmt.Sprintf("\n\tvendor %s now (%s): %s", n.Vendor, n.At.Format(time.RFC3339), n.Message)
				}
			}
		}
		fmt.Fprintf(w, "workflow\t%s %s%s\n", res.Workflow.WorkflowID, res.Workflow.Status, stage)
		for _, a := range res.Workflow.PendingActivities {
			line := fmt.Sprintf("%s %s, attempt %d", a.ActivityType, a.State, a.Attempt)
			if a.LastFailure != "" {
				failure := a.LastFailure
				if a.LastFailureType != "" {
					failure = a.LastFailureType + ": " + failure
				}
				line += "; last failure: " + failure
			}
			if !a.NextAttempt.IsZero() && a.Attempt > 1 {
				line += "; next attempt " + a.NextAttempt.Format(time.RFC3339)
			}
			fmt.Fprintf(w, "pending\t%s\n", line)
		}
	}
	for _, next := range res.Next {
		fmt.Fprintf(w, "next\t%s\n", next)
	}
	for _, b := range res.Batches {
		id := b.VendorBatchID
		if id == "" {
			id = "(not created)"
		}
		outcome := ""
		if b.Outcome != "" {
			outcome = ", this task " + string(b.Outcome)
		}
		fmt.Fprintf(w, "batch\t%s revision %d: vendor batch %s (key %s) %s %s, %d of %d items settled%s\n\t%s\n",
			b.Step, b.Revision, id, b.Key, b.State, b.Status, b.Settled, b.Items, outcome, b.Next)
	}
	costs := map[string]string{}
	for _, c := range res.Costs {
		costs[c.RemoteRef] = money(c.Amount, c.Currency)
	}
	// Paid steps' tasks, then effect steps' (which cost nothing and
	// fetch nothing).
	var paid, effects []ledger.PaidTask
	for _, t := range res.PaidTasks {
		if res.StepKinds[t.Step] == allot.KindEffect {
			effects = append(effects, t)
		} else {
			paid = append(paid, t)
		}
	}
	if len(paid) > 0 || len(effects) == 0 {
		fmt.Fprintln(w, "\nPAID STEP\tREV\tSTATE\tREMOTE REF\tCOST\tSHA256")
		for _, t := range paid {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\n", t.Step, t.Revision, t.State, dash(t.RemoteRef), dash(costs[t.RemoteRef]), dash(t.SHA256))
		}
	}
	if len(effects) > 0 {
		fmt.Fprintln(w, "\nEFFECT STEP\tREV\tSTATE\tREMOTE REF")
		for _, t := range effects {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", t.Step, t.Revision, t.State, dash(t.RemoteRef))
		}
	}
	fmt.Fprintln(w, "\nSTEP\tSTATUS\tSHA256")
	for _, s := range res.Steps {
		fmt.Fprintf(w, "%s\t%s\t%s\n", s.Step, s.Status, dash(s.SHA256))
	}
	if len(res.Decisions) > 0 {
		fmt.Fprintln(w, "\nDECISION\tSTEP\tREV\tREF\tBY\tREASON\tAT")
		for _, d := range res.Decisions {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.Action, dash(d.Step), d.Revision, dash(d.RemoteRef), dash(d.By), dash(d.Reason), d.At.Format(time.RFC3339))
		}
	}
	for cur, amount := range res.Totals {
		fmt.Fprintf(w, "\ntotal\t%s\n", money(amount, cur))
	}
}

func episodeUpdate(update string) func(context.Context, *cli, []string) error {
	return func(ctx context.Context, c *cli, args []string) error {
		fs := c.flags("episode "+update, true)
		var (
			in                       = operator.CommandInput{Update: update}
			adopt                    string
			resubmit, retry, abandon bool
		)
		fs.StringVar(&in.Pipeline, "pipeline", "", "pipeline (required)")
		fs.StringVar(&in.EpisodeID, "episode", "", "episode ID, e.g. 2026-W32-0 (required; commands never allocate)")
		fs.StringVar(&in.Request.Reason, "reason", "", "why, recorded in the ledger (required to reject)")
		fs.StringVar(&in.Request.By, "by", "", "who decides, recorded with the decision (default $USER, else the operating system's user name)")
		var waiting bool
		if update == workflows.ApproveUpdate {
			fs.BoolVar(&waiting, "waiting", false, "approve every episode of the pipeline that waits for approval, each with its own decision (in place of --episode)")
		}
		if update == workflows.ReworkUpdate || update == workflows.ResolveUpdate {
			fs.StringVar(&in.Request.Step, "step", "", "paid step (required)")
		}
		if update == workflows.ResolveUpdate {
			fs.StringVar(&adopt, "adopt", "", "adopt this vendor task reference")
			fs.BoolVar(&resubmit, "resubmit", false, "send again with the same idempotency key without asking the vendor first (only for an unknown outcome the vendor cannot look up)")
			fs.BoolVar(&retry, "retry", false, "run the step again under the protocol, once its cause is fixed (a task that may have been sent is looked up first)")
			fs.BoolVar(&abandon, "abandon", false, "give the task up (needs --reason)")
		}
		if err := c.parse(fs, args); err != nil {
			return err
		}
		if waiting {
			return approveWaiting(ctx, c, in)
		}
		if in.Pipeline == "" || in.EpisodeID == "" {
			return usageError{errors.New("--pipeline and --episode are required: operator commands never allocate an episode")}
		}
		if update == workflows.ReworkUpdate && in.Request.Step == "" {
			return usageError{errors.New("--step is required")}
		}
		// Refused before anything is opened or dialled.
		if err := operator.CheckRejectReason(in); err != nil {
			return usageError{errors.New(allot.ErrorMessage(err))}
		}
		if update == workflows.ResolveUpdate {
			// The operator page resolves through the same choice.
			if err := (operator.ResolveChoice{Adopt: adopt, Resubmit: resubmit, Retry: retry, Abandon: abandon}).Apply(&in.Request); err != nil {
				return usageError{err}
			}
		}
		cmds, done, err := c.episodeCommands(ctx)
		if err != nil {
			return err
		}
		defer done()
		res, err := cmds.Send(ctx, in)
		return emit(c, res, err, func(w io.Writer, res operator.CommandResult) { printSent(w, update, in.Request.Step, res) })
	}
}

// approveWaiting is `episode approve --waiting`: every episode of the
// pipeline at its approval gate, one decision each.
func approveWaiting(ctx context.Context, c *cli, in operator.CommandInput) error {
	if in.Pipeline == "" || in.EpisodeID != "" {
		return usageError{errors.New("--waiting takes --pipeline and no --episode: it approves every episode of the pipeline that waits for approval")}
	}
	cmds, done, err := c.episodeCommands(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := cmds.ApproveEach(ctx, operator.ApproveEachInput{Pipeline: in.Pipeline, Reason: in.Request.Reason, By: in.Request.By})
	if err != nil {
		return err
	}
	c.print(res, func(w io.Writer) {
		for _, a := range res.Approved {
			fmt.Fprintf(w, "approve\t%s\t%s\n", a.WorkflowID, a.State.Stage)
		}
		for _, r := range res.Refused {
			fmt.Fprintf(w, "refused\t%s\t%s\n", allot.EpisodeWorkflowID(res.Pipeline, r.EpisodeID), r.Message)
		}
	})
	if len(res.Refused) > 0 {
		return allot.Errorf(allot.NotReady, "%d of %d episodes of %s were not approved (above, with why); the rest were; see where each stands with `%s`",
			len(res.Refused), len(res.Refused)+len(res.Approved), res.Pipeline, allot.EpisodesCommand(res.Pipeline))
	}
	return nil
}

// printSent writes what an episode command did: the stage it left the
// episode in, or the budget that still refuses step.
func printSent(w io.Writer, update, step string, res operator.CommandResult) {
	fmt.Fprintf(w, "%s\t%s\n", update, res.WorkflowID)
	if len(res.BudgetShort) > 0 {
		// The stage right after a retry is a passing one (the
		// step runs, or waits for its vendor, then the budget
		// refuses it): the budget's answer is what happened.
		for i, b := range res.BudgetShort {
			short := b.Needed() - b.Limit
			fmt.Fprintf(w, "budget\tstill refuses step %s (%s): short %s; the step stays parked until it is raised: `%s`\n",
				step, b, money(short, b.Currency), res.BudgetRaises[i])
		}
		return
	}
	fmt.Fprintf(w, "stage\t%s\n", res.State.Stage)
	for _, s := range res.State.Steps {
		fmt.Fprintf(w, "  %s\t%s\trev %d\t%s\n", s.Name, s.Status, s.Revision, dash(s.RemoteRef))
	}
}

// episodeCommands connects what the commands on one episode need: the
// pipelines, the ledger (read-only: the Episode writes) and Temporal. done
// closes them.
func (c *cli) episodeCommands(ctx context.Context) (cmds *operator.EpisodeCommands, done func(), err error) {
	pipelines, err := c.pipelines()
	if err != nil {
		return nil, nil, err
	}
	led, err := c.openLedgerReadOnly(ctx)
	if err != nil {
		return nil, nil, err
	}
	cl, err := c.dial(ctx)
	if err != nil {
		led.Close()
		return nil, nil, err
	}
	done = func() {
		cl.Close()
		led.Close()
	}
	return &operator.EpisodeCommands{Client: cl, Pipelines: pipelines, TaskQueue: c.cfg.TaskQueue, Ledger: led}, done, nil
}

// stepVendor is the adapter of a paid or effect step's vendor, as far as
// the starter can reach it: the default vendor (ALLOT_VENDOR_URL) or a
// named http vendor with the key its api_key_env or api_key_file names. A
// go or activity adapter lives in a worker: nil, and the lookup says so.
func (c *cli) stepVendor(ctx context.Context, pipelines *pipeline.Set, pipelineName, stepName string) (paidvendor.Submitter, error) {
	p, err := pipelines.Get(pipelineName)
	if err != nil {
		return nil, err
	}
	st, ok := p.Step(stepName)
	if !ok || !st.Kind.Remote() {
		return nil, fmt.Errorf("pipeline %s has no paid or effect step %q: its paid steps are %v", p.Name, stepName, p.PaidStepNames())
	}
	if st.Vendor == "" || st.Vendor == pipeline.DefaultVendor {
		if c.cfg.VendorURL == "" {
			return nil, usageError{fmt.Errorf("no vendor to ask: set %s or pass --vendor-url, and the key in %s or %s", app.EnvVendorURL, paidvendor.EnvVendorAPIKey, paidvendor.EnvVendorAPIKeyFile)}
		}
		key, err := paidvendor.EnvCredentials{}.VendorAPIKey(ctx)
		if err != nil {
			return nil, err
		}
		return paidvendor.HTTPClientFactory(c.cfg.VendorURL)(key)
	}
	v, _ := pipelines.Vendor(st.Vendor)
	if v.Adapter != pipeline.AdapterHTTP {
		return nil, nil
	}
	key, err := activities.VendorKeyOf(v).VendorAPIKey(ctx)
	if err != nil {
		return nil, err
	}
	return paidvendor.HTTPClientFactory(v.URL)(key)
}

// episodeResume starts the workflow of an unsettled episode that has none
// running (check's workflow_missing and workflow_ended).
func episodeResume(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("episode resume", true)
	var pipelineName, episodeID string
	fs.StringVar(&pipelineName, "pipeline", "", "pipeline (required)")
	fs.StringVar(&episodeID, "episode", "", "episode ID, e.g. 2026-W32-0 (required; resume never allocates)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if pipelineName == "" || episodeID == "" {
		return usageError{errors.New("--pipeline and --episode are required: resume acts on an existing episode")}
	}
	cmds, done, err := c.episodeCommands(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := cmds.Resume(ctx, pipelineName, episodeID)
	return emit(c, res, err, printResumed)
}

func printResumed(w io.Writer, res operator.ResumeResult) {
	fmt.Fprintf(w, "%s\t%s\n", res.Action, res.WorkflowID)
	fmt.Fprintf(w, "run id\t%s\n", res.RunID)
}

func costsCommand(ctx context.Context, c *cli, args []string) error {
	if len(args) > 0 && args[0] == "export" {
		return costsExport(ctx, c, args[1:])
	}
	fs := c.flags("costs", false)
	var in report.CostsInput
	fs.StringVar(&in.Pipeline, "pipeline", "", "pipeline (required)")
	fs.StringVar(&in.Period, "period", "", "only this period, e.g. 2026-W32")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if in.Pipeline == "" {
		return usageError{errors.New("--pipeline is required")}
	}
	return ledgerCommand(ctx, c, viewLedger, func(set *pipeline.Set, led *ledger.Ledger) (report.CostsResult, error) {
		in.Pipelines = set
		return report.Costs(ctx, led, in)
	}, printCosts)
}

func printCosts(w io.Writer, res report.CostsResult) {
	fmt.Fprintln(w, "EPISODE\tSTEP\tREVISIONS\tCOST")
	for _, l := range res.Lines {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", l.EpisodeID, l.Step, l.Revisions, money(l.Amount, l.Currency))
	}
	for cur, amount := range res.Totals {
		fmt.Fprintf(w, "total\t\t\t%s\n", money(amount, cur))
	}
	printBudgetSpend(w, res.Budgets)
}

func statsCommand(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("stats", false)
	var (
		in    report.StatsInput
		since string
	)
	fs.StringVar(&in.Pipeline, "pipeline", "", "pipeline (required)")
	fs.StringVar(&since, "since", "", "only runs recorded (episodes allocated, periods due) at or after this time, RFC3339")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if in.Pipeline == "" {
		return usageError{errors.New("--pipeline is required")}
	}
	if since != "" {
		t, err := time.Parse(time.RFC3339, since)
		if err != nil {
			return usageError{fmt.Errorf("--since %q is not RFC3339: write it like 2026-08-03T00:00:00Z", since)}
		}
		in.Since = t
	}
	return ledgerCommand(ctx, c, viewLedger, func(set *pipeline.Set, led *ledger.Ledger) (report.StatsResult, error) {
		in.Pipelines = set
		return report.Stats(ctx, led, in)
	}, printStats)
}

func printStats(w io.Writer, res report.StatsResult) {
	fmt.Fprintf(w, "RUNS (%d)\tREASON\tCOUNT\n", res.RunsTotal)
	for _, r := range res.Runs {
		fmt.Fprintf(w, "%s\t%s\t%d\n", r.Outcome, dash(r.Reason), r.Count)
	}
	if len(res.WorthALook) > 0 {
		n := 0
		for _, r := range res.WorthALook {
			n += r.Count
		}
		fmt.Fprintf(w, "\nWORTH A LOOK (%d)\tREASON\tCOUNT\n", n)
		for _, r := range res.WorthALook {
			fmt.Fprintf(w, "%s\t%s\t%d\n", r.Outcome, dash(r.Reason), r.Count)
		}
	}
	fmt.Fprintf(w, "\nEPISODES (%d)\tREASON\tCOUNT\n", res.EpisodesTotal)
	for _, e := range res.Episodes {
		fmt.Fprintf(w, "%s\t%s\t%d\n", e.Outcome, dash(e.Reason), e.Count)
	}
	if len(res.Stalled) > 0 {
		fmt.Fprintf(w, "\nSTALLED (%d): retrying for more than %s\tREASON\tSINCE\n", len(res.Stalled), res.StallAfter)
		for _, e := range res.Stalled {
			fmt.Fprintf(w, "%s\t%s\t%s\n", e.EpisodeID, dash(e.Reason), e.Since.Format(time.RFC3339))
		}
	}
	if len(res.OnTime) > 0 {
		fmt.Fprintln(w, "\nON TIME\tJUDGED\tON TIME\tLATE\tCOMPLETED LATE\tRATIO")
		for _, m := range res.OnTime {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%s (%s)\n", m.Month, m.Judged, m.OnTime, m.Late, m.CompletedLate, m.Ratio, m.Percent)
		}
	}
	if len(res.LateOpen) > 0 {
		fmt.Fprintf(w, "\nLATE (%d): not completed since their deadline\tDUE\tCAUSE\tCOMMAND\n", len(res.LateOpen))
		for _, r := range res.LateOpen {
			cause := string(r.Cause)
			if r.Detail != "" {
				cause += ": " + r.Detail
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.Period, r.DueAt.Format(time.RFC3339), dash(cause), dash(r.Command))
		}
	}
	printBudgetSpend(w, res.Budgets)
}

func setupCommand(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("setup", true)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := workflows.EnsureSearchAttributes(ctx, cl, c.resolvedNamespace)
	return emit(c, res, err, printSetup)
}

func printSetup(w io.Writer, res workflows.RegisterResult) {
	fmt.Fprintf(w, "namespace\t%s\nadded\t%v\nalready there\t%v\n", res.Namespace, res.Added, res.Existing)
}

// episodeLookup asks the vendor, read-only, what it holds under the
// idempotency key of a paid step's latest task, and prints the command that
// moves the step on (the adopt command with the vendor's reference).
func episodeLookup(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("episode lookup", false)
	var in operator.LookupInput
	fs.StringVar(&in.Pipeline, "pipeline", "", "pipeline (required)")
	fs.StringVar(&in.EpisodeID, "episode", "", "episode ID, e.g. 2026-W32-0 (required)")
	fs.StringVar(&in.Step, "step", "", "paid step (required)")
	fs.StringVar(&c.cfg.VendorURL, "vendor-url", c.cfg.VendorURL, "the vendor's API (env "+app.EnvVendorURL+"); its key comes from "+paidvendor.EnvVendorAPIKey+" or "+paidvendor.EnvVendorAPIKeyFile)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if in.Pipeline == "" || in.EpisodeID == "" || in.Step == "" {
		return usageError{errors.New("--pipeline, --episode and --step are required")}
	}
	pipelines, err := c.pipelines()
	if err != nil {
		return err
	}
	vendor, err := c.stepVendor(ctx, pipelines, in.Pipeline, in.Step)
	if err != nil {
		return err
	}
	// Temporal is optional: the workflow's state says which step the
	// episode is parked on; without it the ledger's recorded outcome does.
	if cl, _ := c.dial(ctx); cl != nil {
		defer cl.Close()
		if v, err := cl.QueryWorkflow(ctx, allot.EpisodeWorkflowID(in.Pipeline, in.EpisodeID), "", workflows.StateQuery); err == nil {
			var st workflows.EpisodeState
			if v.Get(&st) == nil && st.Stage != "" {
				in.State = &st
			}
		}
	}
	return ledgerCommand(ctx, c, viewLedger, func(set *pipeline.Set, led *ledger.Ledger) (operator.LookupResult, error) {
		return operator.Lookup(ctx, led, vendor, set, in)
	}, printLookup)
}

func printLookup(w io.Writer, res operator.LookupResult) {
	fmt.Fprintf(w, "paid task\t%s/%s step %s revision %d (%s)\n", res.Pipeline, res.EpisodeID, res.Step, res.Revision, res.TaskState)
	fmt.Fprintf(w, "idempotency key\t%s\n", dash(res.IdempotencyKey))
	switch {
	case res.IdempotencyKey == "":
		fmt.Fprintln(w, "vendor\tnothing was sent under this revision yet")
	case res.Unreachable != "":
		fmt.Fprintf(w, "vendor\t%s\n", res.Unreachable)
	case !res.LookupSupported:
		fmt.Fprintln(w, "vendor\tcannot look tasks up by idempotency key: find the key in the vendor's console")
	case res.Found:
		t := res.VendorTask
		fmt.Fprintf(w, "vendor task\t%s (%s), cost %s\n", t.ID, t.Status, money(t.CostAmount, t.CostCurrency))
	case res.Attention == allot.IdempotencyHorizonPassed:
		// Past the horizon, not found does not mean not sent: the note says so.
		fmt.Fprintln(w, "vendor\thas no task with this key")
	default:
		fmt.Fprintln(w, "vendor\thas no task with this key: nothing was accepted")
	}
	if res.Note != "" {
		fmt.Fprintf(w, "note\t%s\n", res.Note)
	}
	if res.Next != "" {
		fmt.Fprintf(w, "next\t%s\n", res.Next)
	}
}
