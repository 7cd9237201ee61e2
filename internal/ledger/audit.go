package ledger

// Audit: everything Check verifies, and the rest of what the ledger promises
// about itself (starter check): paid tasks and their costs, episodes and
// their outcomes and plans, runs and their outcomes, import metadata. It
// reads, in one read-only transaction, and lists the files the ledger names
// so that the caller can hash them, and the costs so that it can reconcile
// them with a vendor's bill.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"allot"
)

// DefaultStaleAfter is how old an intent without a reference (and an
// episode without an outcome or a recorded run) must be before Audit
// reports it: younger, its workflow may still be writing it.
const DefaultStaleAfter = time.Hour

// AuditOptions selects what Audit covers.
type AuditOptions struct {
	Pipeline string // "" = every pipeline
	// StaleAfter: an intent without a remote reference older than this is
	// an unknown outcome; an episode older than this without an outcome
	// or a recorded run is reported. Zero means DefaultStaleAfter.
	StaleAfter time.Duration
	Now        time.Time // zero: now
	// WithRefs fills Audit.Tasks with every paid task of every pipeline
	// that has a reference or a key, to reconcile a vendor's charges.
	WithRefs bool
	// Budgets are the pipeline file's budgets, whose limits the periods'
	// settled costs are checked against (a raise overrides one period's).
	// Budget entries are audited with or without them.
	Budgets []BudgetLimit
	// Horizon gives a vendor's idempotency_horizon ("" is the default
	// vendor; 0: it keeps keys forever): an intent older than its step's
	// vendor's is reported. Nil checks none.
	Horizon func(vendor string) time.Duration
}

// Audit is what the ledger says about itself.
type Audit struct {
	Violations []Violation
	// Artifacts are the files the ledger names with their sha256: paid
	// tasks' results and steps' outputs.
	Artifacts []AuditArtifact
	// Costs are the cost entries, each with its step's vendor and kind
	// as the episode's pinned plan names them.
	Costs []AuditCost
	// Tasks are, with WithRefs, the paid tasks of every pipeline that
	// have a remote reference or an idempotency key.
	Tasks []PaidTask
}

// AuditArtifact is one file the ledger names.
type AuditArtifact struct {
	Pipeline  string `json:"pipeline"`
	EpisodeID string `json:"episode_id"`
	Step      string `json:"step"`
	Revision  int    `json:"revision"`
	Path      string `json:"path"`
	SHA256    string `json:"sha256"`
	// Paid: a paid task's result; otherwise a step record's output.
	Paid bool `json:"paid"`
}

// AuditCost is a cost entry with what the episode's plan says of its step.
type AuditCost struct {
	CostEntry
	// Vendor is the step's vendor ("" = the default vendor); StepKind is
	// "" when the plan is not pinned or does not name the step.
	Vendor   string `json:"vendor"`
	StepKind string `json:"step_kind"`
}

// LegacyKey is the allocation key of an imported old run that was not its
// pipeline's scheduled run: "legacy/<old id>" under the pipeline's prefix,
// which allot.PlaceKey reserves (an operator's --key cannot take it). An
// imported scheduled run has allot.AllocationKey of its nominal time instead.

// Audit runs Check and every other check of the ledger over one pipeline
// or all, in one read-only transaction, so that what it reports is one
// consistent state. Beyond Check:
//
//   - paid tasks: a paid step's reference has its cost entry, an effect
//     step's has none (kinds from the pinned plan), and an intent without
//     a reference older than StaleAfter is an unknown outcome;
//   - episodes: each has an outcome (once older than StaleAfter), a parked
//     every outcome its reason, and a completed one every step of its
//     pinned plan done (completed, approved, abandoned; paid tasks
//     succeeded or abandoned; effects submitted too);
//   - runs: each run outcome has a reason and names an existing episode;
//     each episode older than StaleAfter that was not imported has a run
//     outcome for its key, and exactly one run recorded as allocated (a
//     run that allocated it and then failed counts instead);
//   - costs: every entry is at most allot.MaxAmount, and every total per
//     currency fits int64;
//   - imports: the metadata's episode exists, with its nominal time's
//     scheduled key if it was a scheduled run, else <pipeline>/legacy/<old
//     id>; and an episode with a legacy key and no run has metadata;
//   - budgets (invariant 20): a reservation is held only by an intent and
//     settled only at its task's recorded cost, a cost above its
//     reservation is reported, and each (budget, period) has settled no
//     more than its limit (opts.Budgets, or a raise).
//
// Files are not read here: Artifacts lists them for the caller to hash.
func (l *Ledger) Audit(ctx context.Context, opts AuditOptions) (Audit, error) {
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = DefaultStaleAfter
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	var out Audit
	err := l.readTx(ctx, func(tx *sql.Tx) error {
		vs, err := l.checkInvariants(ctx, tx, opts.Pipeline)
		if err != nil {
			return err
		}
		out.Violations = vs
		pipelines := []string{opts.Pipeline}
		if opts.Pipeline == "" {
			if pipelines, err = l.auditPipelines(ctx, tx); err != nil {
				return err
			}
		}
		for _, p := range pipelines {
			if err := l.auditPipeline(ctx, tx, p, opts, &out); err != nil {
				return err
			}
		}
		if err := l.auditBudgetsTx(ctx, tx, opts, &out); err != nil {
			return err
		}
		if opts.WithRefs {
			out.Tasks, err = l.queryPaidTasks(ctx, tx, `SELECT `+paidTaskCols+` FROM paid_tasks
				WHERE remote_ref <> '' OR idempotency_key <> '' ORDER BY pipeline, episode_id, step, revision`)
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Audit{}, err
	}
	SortViolations(out.Violations)
	return out, nil
}

func (l *Ledger) auditPipelines(ctx context.Context, tx *sql.Tx) ([]string, error) {
	return l.queryStrings(ctx, tx, "list pipelines", `SELECT pipeline FROM episodes UNION SELECT pipeline FROM run_outcomes
		UNION SELECT pipeline FROM imports UNION SELECT pipeline FROM cost_entries ORDER BY 1`)
}

// auditEpisode is an episode as the audit reads it.
type auditEpisode struct {
	id, key, status, outcome, reason, plan string
	created, nominal                       time.Time
	steps                                  map[string]planStep // nil: no plan pinned, or not a plan
}

// planStep is what the audit reads of a pinned plan's step (the JSON of
// pipeline.Step).
type planStep struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Vendor string `json:"vendor"`
}

// Step kinds as pinned plans name them (allot.StepKind).
const (
	planPaid     = "paid"
	planEffect   = "effect"
	planApproval = "approval"
)

type auditRun struct {
	key, runID, outcome, reason, episode string
}

func (l *Ledger) auditPipeline(ctx context.Context, tx *sql.Tx, pipeline string, opts AuditOptions, out *Audit) error {
	stale := opts.Now.Add(-opts.StaleAfter)
	add := func(kind, episode, fix, format string, args ...any) {
		out.Violations = append(out.Violations, Violation{Kind: kind, Pipeline: pipeline, Episode: episode, Detail: fmt.Sprintf(format, args...), Fix: fix})
	}

	// Episodes, with their pinned plans.
	eps := map[string]*auditEpisode{}
	var order []string
	rows, err := tx.QueryContext(ctx, l.d.q(`SELECT episode_id, allocation_key, status, outcome, outcome_reason, created_at, plan, nominal_time
		FROM episodes WHERE pipeline = ? ORDER BY period, sequence, episode_id`), pipeline)
	if err != nil {
		return fmt.Errorf("ledger %s: audit episodes of %s: %w", l.where, pipeline, err)
	}
	for rows.Next() {
		e := &auditEpisode{}
		if err := rows.Scan(&e.id, &e.key, &e.status, &e.outcome, &e.reason, dbTime{&e.created}, &e.plan, dbTime{&e.nominal}); err != nil {
			rows.Close()
			return fmt.Errorf("ledger %s: audit episodes of %s: %w", l.where, pipeline, err)
		}
		eps[e.id] = e
		order = append(order, e.id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger %s: audit episodes of %s: %w", l.where, pipeline, err)
	}
	for _, id := range order {
		e := eps[id]
		if e.plan == "" {
			continue
		}
		var steps []planStep
		if err := json.Unmarshal([]byte(e.plan), &steps); err != nil || len(steps) == 0 {
			add(KindPlanInvalid, id, "", "the pinned plan is not a list of steps (%v): the episode cannot run; compare it with the pipeline's steps", err)
			continue
		}
		e.steps = map[string]planStep{}
		for _, s := range steps {
			e.steps[s.Name] = s
		}
	}

	tasks, err := l.queryPaidTasks(ctx, tx, `SELECT `+paidTaskCols+` FROM paid_tasks WHERE pipeline = ? ORDER BY episode_id, step, revision`, pipeline)
	if err != nil {
		return err
	}
	costs, err := l.auditCosts(ctx, tx, pipeline)
	if err != nil {
		return err
	}
	steps, err := l.auditSteps(ctx, tx, pipeline)
	if err != nil {
		return err
	}
	runs, err := l.auditRuns(ctx, tx, pipeline)
	if err != nil {
		return err
	}
	imports, err := l.queryImports(ctx, tx, pipeline)
	if err != nil {
		return err
	}

	// Costs, with the vendor and kind of their step. An amount beyond the
	// bound (only data written around the ledger's checks, or imported
	// before v10, can hold one) would make every total wrong.
	costByRef := map[string]CostEntry{}
	totals, overflowed := map[string]int64{}, map[string]bool{}
	for _, c := range costs {
		costByRef[c.RemoteRef] = c
		money := allot.Money{Amount: c.Amount, Currency: c.Currency}
		if c.Amount < 0 || c.Amount > allot.MaxAmount {
			add(KindCostOutOfRange, c.EpisodeID, "",
				"the cost entry of remote reference %q (%s) is %s (%d minor units), outside 0..%s: no vendor charges that; compare it with the vendor's bill (starter check --vendor) and correct the entry",
				c.RemoteRef, describe(PaidTaskRef{Pipeline: c.Pipeline, EpisodeID: c.EpisodeID, Step: c.Step, Revision: c.Revision}),
				money, c.Amount, allot.Money{Amount: allot.MaxAmount, Currency: c.Currency})
		}
		if err := allot.AddTo(totals, money); err != nil && !overflowed[c.Currency] { // reported once per currency
			overflowed[c.Currency] = true
			add(KindCostOutOfRange, c.EpisodeID, "",
				"the costs of pipeline %s in %s no longer sum in 64 bits at remote reference %q (%v): every total would be wrong; correct the absurd entries this check lists",
				pipeline, c.Currency, c.RemoteRef, err)
		}
		ac := AuditCost{CostEntry: c}
		if e := eps[c.EpisodeID]; e != nil {
			ac.Vendor, ac.StepKind = e.steps[c.Step].Vendor, e.steps[c.Step].Kind
		}
		out.Costs = append(out.Costs, ac)
	}

	// Paid tasks.
	latest := map[string]PaidTask{} // episode \x00 step -> its latest revision
	for _, t := range tasks {
		k := t.EpisodeID + "\x00" + t.Step
		if cur, ok := latest[k]; !ok || t.Revision > cur.Revision {
			latest[k] = t
		}
		kind := ""
		if e := eps[t.EpisodeID]; e != nil {
			kind = e.steps[t.Step].Kind
		}
		if t.State == allot.PaidIntent && t.RemoteRef == "" && t.UpdatedAt.Before(stale) {
			fix := allot.LookupCommand(pipeline, t.EpisodeID, t.Step)
			if kind == planEffect {
				fix = "" // lookup asks a paid step's vendor; an effect's downstream is asked by a person
			}
			add(KindUnknownOutcome, t.EpisodeID, fix,
				"%s has been an intent without a remote reference since %s (over %s): the vendor may have accepted it; ask it by idempotency key %q and adopt what it has, or retry",
				describe(t.PaidTaskRef), t.UpdatedAt.Format(time.RFC3339), opts.StaleAfter, t.IdempotencyKey)
		}
		if t.State == allot.PaidIntent && opts.Horizon != nil {
			vendor := ""
			if e := eps[t.EpisodeID]; e != nil {
				vendor = e.steps[t.Step].Vendor
			}
			// The horizon counts from the first send: the vendor cannot
			// forget a key it was never given (docs/design.md, "Vendor
			// controls", idempotency horizon).
			if h := opts.Horizon(vendor); h > 0 && !t.FirstSentAt.IsZero() && t.FirstSentAt.Before(opts.Now.Add(-h)) {
				fix := allot.LookupCommand(pipeline, t.EpisodeID, t.Step)
				if kind == planEffect {
					fix = ""
				}
				add(KindPastHorizon, t.EpisodeID, fix,
					"%s is an intent first sent %s, longer ago than its vendor keeps idempotency keys (idempotency_horizon %s): the vendor may have forgotten key %q, so nothing is sent or looked up by itself; check the vendor's side for the task, then adopt it (the lookup command prints the adopt command when the vendor still knows the key), resubmit or abandon the step",
					describe(t.PaidTaskRef), t.FirstSentAt.Format(time.RFC3339), h, t.IdempotencyKey)
			}
		}
		if t.RemoteRef != "" {
			_, costed := costByRef[t.RemoteRef]
			switch {
			case kind == planPaid && !costed:
				add(KindCostMissing, t.EpisodeID, "",
					"%s has remote reference %q but no cost entry: every paid submission books what the vendor charged; compare with the vendor's bill (starter check --vendor) and correct the ledger",
					describe(t.PaidTaskRef), t.RemoteRef)
			case kind == planEffect && costed:
				add(KindCostOnEffect, t.EpisodeID, "",
					"%s is an effect step's task but remote reference %q has a cost entry (%s): an effect costs nothing; check what booked it and remove the entry",
					describe(t.PaidTaskRef), t.RemoteRef, allot.Money{Amount: costByRef[t.RemoteRef].Amount, Currency: costByRef[t.RemoteRef].Currency})
			}
		}
		if t.State == allot.PaidSucceeded && t.Artifact != "" {
			out.Artifacts = append(out.Artifacts, AuditArtifact{Pipeline: pipeline, EpisodeID: t.EpisodeID, Step: t.Step, Revision: t.Revision,
				Path: t.Artifact, SHA256: t.SHA256, Paid: true})
		}
	}

	// Step records' outputs.
	records := map[string]StepRecord{} // episode \x00 step
	for _, r := range steps {
		records[r.EpisodeID+"\x00"+r.Step] = r
		files := r.Outputs
		if len(files) == 0 && r.Artifact != "" {
			files = []StepOutput{{Path: r.Artifact, SHA256: r.SHA256}}
		}
		for _, f := range files {
			out.Artifacts = append(out.Artifacts, AuditArtifact{Pipeline: pipeline, EpisodeID: r.EpisodeID, Step: r.Step, Revision: r.Revision,
				Path: f.Path, SHA256: f.SHA256})
		}
	}

	// Imports.
	importedEp := map[string]bool{}
	byKey := map[string]string{}         // allocation key -> episode
	bySecond := map[time.Time][]string{} // nominal time to the second -> old IDs imported for it
	for _, id := range order {
		byKey[eps[id].key] = id
	}
	for _, m := range imports {
		importedEp[m.EpisodeID] = true
		if e := eps[m.EpisodeID]; e != nil {
			t := e.nominal.Truncate(time.Second)
			bySecond[t] = append(bySecond[t], m.OldID)
		}
	}
	for _, m := range imports {
		e := eps[m.EpisodeID]
		if e == nil {
			add(KindImportEpisode, m.EpisodeID, "",
				"old ID %s was imported (from %s, at %s) as episode %s, which the ledger does not have: restore the episode from a backup, or import the old run again after removing its metadata",
				m.OldID, m.Source, m.ImportedAt.Format(time.RFC3339), m.EpisodeID)
			continue
		}
		want, legacy := allot.LegacyKey(pipeline, m.OldID), allot.LegacyKey(pipeline, m.OldID)
		if m.Scheduled {
			want = allot.AllocationKey(pipeline, e.nominal)
		}
		when := e.nominal.Format(time.RFC3339)
		switch {
		case e.key == want:
		case m.Scheduled && e.key == legacy && byKey[want] != "":
			// Imported before v10, and a run took the time's key first.
			add(KindImportKey, m.EpisodeID, "",
				"episode %s was imported from old ID %s as the scheduled run of %s before imports bound their times, so it kept key %q; episode %s now holds that time's key %q: a run allocated it after the import and may have paid again for work the import already had. Compare the two (%s; %s) and settle any second charge with the vendor",
				m.EpisodeID, m.OldID, when, e.key, byKey[want], want, allot.ShowCommand(pipeline, m.EpisodeID), allot.ShowCommand(pipeline, byKey[want]))
		case m.Scheduled && e.key == legacy:
			// Imported before v10 with other old runs of the same time.
			add(KindImportKey, m.EpisodeID, "",
				"episode %s was imported from old ID %s as the scheduled run of %s before imports bound their times, so it kept key %q; old IDs %s were imported for the same time and the ledger does not guess which was the scheduled run, so none holds its key %q: a run or backfill for %s allocates a new episode and pays again",
				m.EpisodeID, m.OldID, when, e.key, strings.Join(bySecond[e.nominal.Truncate(time.Second)], ", "), want, when)
		default:
			add(KindImportKey, m.EpisodeID, "",
				"episode %s was imported from old ID %s but its allocation key is %q, not %q: the key was changed after the import; restore it",
				m.EpisodeID, m.OldID, e.key, want)
		}
	}

	// Runs.
	runsByKey := map[string][]auditRun{}
	allocatedBy := map[string]int{}
	failedAfter := map[string]bool{}
	for _, r := range runs {
		runsByKey[r.key] = append(runsByKey[r.key], r)
		if r.reason == "" {
			add(KindRunNoReason, r.episode, "",
				"run %s of key %q ended %s without a reason: every run says why; look at its workflow: temporal workflow show --workflow-id %s --run-id %s",
				r.runID, r.key, r.outcome, allot.ShellQuote(r.key), r.runID)
		}
		if r.episode != "" && eps[r.episode] == nil {
			add(KindRunEpisodeMissing, r.episode, "",
				"run %s of key %q ended %s with episode %s, which the ledger does not have: look at its workflow: temporal workflow show --workflow-id %s --run-id %s",
				r.runID, r.key, r.outcome, r.episode, allot.ShellQuote(r.key), r.runID)
		}
		switch allot.Outcome(r.outcome) {
		case allot.OutcomeAllocated:
			allocatedBy[r.episode]++
		case allot.OutcomeFailed:
			if r.episode != "" {
				failedAfter[r.episode] = true
			}
		}
	}

	// Episodes.
	for _, id := range order {
		e := eps[id]
		old := e.created.Before(stale)
		switch {
		case e.outcome == "" && old:
			add(KindNoOutcome, id, "",
				"episode %s (created %s) has no outcome: its Episode workflow never reported one; look at workflow %s/episode/%s (%s)",
				id, e.created.Format(time.RFC3339), pipeline, id, allot.ShowCommand(pipeline, id))
		case e.outcome != "" && e.reason == "":
			add(KindNoReason, id, "",
				"episode %s is %s without a reason: look at workflow %s/episode/%s (%s)", id, e.outcome, pipeline, id, allot.ShowCommand(pipeline, id))
		}
		completed := e.outcome == string(allot.OutcomeCompleted) || e.outcome == "" && e.status == string(EpisodeCompleted)
		if completed && e.steps != nil {
			auditCompleteness(pipeline, e, latest, records, add)
		}
		if importedEp[id] || !old {
			continue
		}
		if len(runsByKey[e.key]) == 0 {
			if strings.HasPrefix(e.key, allot.LegacyKey(pipeline, "")) {
				add(KindImportMetadata, id, "",
					"episode %s has the legacy key %q but neither import metadata nor a recorded run: it was written outside starter import (which refuses a key already bound), so nothing says where it came from; look at it (%s) and at how it was written",
					id, e.key, allot.ShowCommand(pipeline, id))
				continue
			}
			add(KindRunLost, id, "",
				"episode %s (key %q) has no recorded run outcome: the run that allocated it ended without saying how; look at its workflow: temporal workflow show --workflow-id %s",
				id, e.key, allot.ShellQuote(e.key))
			continue
		}
		if n := allocatedBy[id]; n > 1 || n == 0 && !failedAfter[id] {
			add(KindAllocatedRuns, id, "",
				"episode %s is recorded as allocated by %d runs, want exactly 1: look at the runs of key %q: temporal workflow list --query %s",
				id, n, e.key, allot.ShellQuote(fmt.Sprintf("WorkflowId = %q", e.key)))
		}
	}
	return nil
}

// auditCompleteness reports each step of a completed episode's plan that is
// not done.
func auditCompleteness(pipeline string, e *auditEpisode, latest map[string]PaidTask, records map[string]StepRecord, add func(kind, episode, fix, format string, args ...any)) {
	var names []string
	for _, s := range e.steps {
		names = append(names, s.Name)
	}
	// The plan's order is not kept in the map; report in name order.
	slices.Sort(names)
	for _, name := range names {
		s := e.steps[name]
		var (
			done  bool
			state string
		)
		switch s.Kind {
		case planPaid, planEffect:
			t, ok := latest[e.id+"\x00"+name]
			state = "without a paid task"
			if ok {
				state = fmt.Sprintf("%s at revision %d", t.State, t.Revision)
				done = t.State == allot.PaidSucceeded || t.State == allot.PaidAbandoned || s.Kind == planEffect && t.State == allot.PaidSubmitted
			}
		default:
			r, ok := records[e.id+"\x00"+name]
			state = "without a step record"
			if ok {
				state = string(r.Status)
				done = r.Status == allot.StepCompleted || r.Status == allot.StepAbandoned || s.Kind == planApproval && r.Status == allot.StepApproved
			}
		}
		if !done {
			add(KindStepIncomplete, e.id, "",
				"episode %s is completed but its %s step %s is %s: every step of its plan must be done; look at the episode (%s)",
				e.id, s.Kind, name, state, allot.ShowCommand(pipeline, e.id))
		}
	}
}

func (l *Ledger) auditCosts(ctx context.Context, tx *sql.Tx, pipeline string) ([]CostEntry, error) {
	rows, err := tx.QueryContext(ctx, l.d.q(costSelect+` WHERE c.pipeline = ? ORDER BY c.remote_ref`), pipeline)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: audit costs of %s: %w", l.where, pipeline, err)
	}
	defer rows.Close()
	var out []CostEntry
	for rows.Next() {
		var c CostEntry
		if err := rows.Scan(&c.RemoteRef, &c.Pipeline, &c.EpisodeID, &c.Period, &c.Step, &c.Revision,
			&c.Amount, &c.Currency, dbTime{&c.RecordedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: audit costs of %s: %w", l.where, pipeline, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: audit costs of %s: %w", l.where, pipeline, err)
	}
	// Orphan entries (their episode gone) are Check's; their period is
	// unknown, so they are read apart.
	orphans, err := tx.QueryContext(ctx, l.d.q(`SELECT c.remote_ref, c.pipeline, c.episode_id, c.step, c.revision, c.amount, c.currency, c.recorded_at
		FROM cost_entries c WHERE c.pipeline = ? AND NOT EXISTS
			(SELECT 1 FROM episodes e WHERE e.pipeline = c.pipeline AND e.episode_id = c.episode_id) ORDER BY c.remote_ref`), pipeline)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: audit costs of %s: %w", l.where, pipeline, err)
	}
	defer orphans.Close()
	for orphans.Next() {
		var c CostEntry
		if err := orphans.Scan(&c.RemoteRef, &c.Pipeline, &c.EpisodeID, &c.Step, &c.Revision, &c.Amount, &c.Currency, dbTime{&c.RecordedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: audit costs of %s: %w", l.where, pipeline, err)
		}
		out = append(out, c)
	}
	return out, orphans.Err()
}

func (l *Ledger) auditSteps(ctx context.Context, tx *sql.Tx, pipeline string) ([]StepRecord, error) {
	rows, err := tx.QueryContext(ctx, l.d.q(`SELECT `+stepCols+` FROM step_records WHERE pipeline = ? ORDER BY episode_id, step`), pipeline)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: audit step records of %s: %w", l.where, pipeline, err)
	}
	defer rows.Close()
	var out []StepRecord
	for rows.Next() {
		var (
			s                       StepRecord
			status, outputs, result string
		)
		if err := rows.Scan(&s.Pipeline, &s.EpisodeID, &s.Step, &status, &s.Revision, &s.Artifact, &s.SHA256,
			&outputs, &result, dbTime{&s.CompletedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: audit step records of %s: %w", l.where, pipeline, err)
		}
		s.Status = allot.StepStatus(status)
		if outputs != "" {
			if err := json.Unmarshal([]byte(outputs), &s.Outputs); err != nil {
				return nil, fmt.Errorf("ledger %s: step %s of episode %s of %s has outputs that are not JSON: %w", l.where, s.Step, s.EpisodeID, pipeline, err)
			}
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: audit step records of %s: %w", l.where, pipeline, err)
	}
	return out, nil
}

func (l *Ledger) auditRuns(ctx context.Context, tx *sql.Tx, pipeline string) ([]auditRun, error) {
	rows, err := tx.QueryContext(ctx, l.d.q(`SELECT allocation_key, run_id, outcome, reason, episode_id
		FROM run_outcomes WHERE pipeline = ? ORDER BY allocation_key, run_id`), pipeline)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: audit runs of %s: %w", l.where, pipeline, err)
	}
	defer rows.Close()
	var out []auditRun
	for rows.Next() {
		var r auditRun
		if err := rows.Scan(&r.key, &r.runID, &r.outcome, &r.reason, &r.episode); err != nil {
			return nil, fmt.Errorf("ledger %s: audit runs of %s: %w", l.where, pipeline, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: audit runs of %s: %w", l.where, pipeline, err)
	}
	return out, nil
}
