package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/activities"
)

// EpisodeInput names an existing episode. The Episode workflow never allocates.
type EpisodeInput struct {
	Pipeline  string `json:"pipeline"`
	EpisodeID string `json:"episode_id"`
	// LedgerID is the identity of the ledger the episode is in; every
	// activity checks it, so that a worker of another ledger refuses the
	// work. "" for episodes started before ledgers had one.
	LedgerID string `json:"ledger_id,omitempty"`
}

// Update names of the Episode workflow: the operator's commands.
const (
	ApproveUpdate    = "approve"
	RejectUpdate     = "reject"
	ReworkUpdate     = "rework"
	ReassembleUpdate = "reassemble"
	ResolveUpdate    = "resolve"
)

// Attention says why an episode waits for an operator, and what the
// operator can run to move it on.
type Attention struct {
	Step      string              `json:"step"`
	Revision  int                 `json:"revision"`
	ErrorType string              `json:"error_type"`
	Reason    string              `json:"reason"`
	Since     time.Time           `json:"since"`
	TaskState allot.PaidTaskState `json:"task_state,omitempty"`
	// Remedy is the first of Remedies (kept for older readers).
	Remedy string `json:"remedy"`
	// Remedies are complete commands, one per action the command table
	// allows here (adopting goes through the lookup command, which prints
	// the exact adopt command with the vendor's reference); for
	// BudgetExhausted, first the raise of each budget that refused.
	Remedies []string `json:"remedies,omitempty"`
	// Budgets are, for BudgetExhausted, the budgets that refused the step
	// and what each has (as last asked).
	Budgets []allot.BudgetShortfall `json:"budgets,omitempty"`
}

// Retrying says that a step's activity keeps failing with errors a retry may
// fix (a vendor that does not answer, a busy database): the last error, how
// many attempts so far, and since when.
type Retrying struct {
	Step      string    `json:"step"`
	Activity  string    `json:"activity"`
	ErrorType string    `json:"error_type"`
	Error     string    `json:"error"`
	Attempts  int       `json:"attempts"`
	Since     time.Time `json:"since"`
}

// EpisodeState is what the state query answers.
type EpisodeState struct {
	Pipeline    string                 `json:"pipeline"`
	EpisodeID   string                 `json:"episode_id"`
	Period      string                 `json:"period"`
	Sequence    int                    `json:"sequence"`
	Key         string                 `json:"allocation_key"`
	NominalTime time.Time              `json:"nominal_time"`
	Stage       allot.Stage            `json:"stage"`
	CurrentStep string                 `json:"current_step,omitempty"`
	Steps       []activities.StepState `json:"steps"`
	Attention   *Attention             `json:"attention,omitempty"`
	Retrying    *Retrying              `json:"retrying,omitempty"`
	// Waiting: a paid or effect step waits for its vendor (stage
	// waiting_vendor).
	Waiting *WaitingVendor `json:"waiting,omitempty"`
	// Batch: a paid step in batch mode waits for the vendor's batch
	// (stage waiting_batch).
	Batch       *WaitingBatch `json:"batch,omitempty"`
	CompletedAt time.Time     `json:"completed_at,omitzero"`
	Error       string        `json:"error,omitempty"`
}

// EpisodeResult is the episode's final state.
type EpisodeResult = EpisodeState

// DecisionRequest is the argument of every operator update.
type DecisionRequest struct {
	Step      string       `json:"step,omitempty"`
	Resolve   allot.Action `json:"resolve,omitempty"` // resolve: adopt | resubmit | retry | abandon
	RemoteRef string       `json:"remote_ref,omitempty"`
	Reason    string       `json:"reason,omitempty"`
	// By is who sent the command (allot.Actor), recorded with the
	// decision; "" from commands sent before it existed.
	By string `json:"by,omitempty"`
}

type episode struct {
	input       EpisodeInput
	state       EpisodeState
	autoApprove bool

	loaded  bool
	loadErr error // why loading failed; commands waiting for the load return it
	// idle: the main loop waits for an operator or has finished, so a
	// command may change the steps. busy: a command is being applied.
	idle, busy bool
	// generation counts applied commands; waits end when it changes.
	generation int
	// recordsOutcomes: this run records outcomes in the ledger (version 1).
	recordsOutcomes bool
	// budgetNudged: a BudgetRaisedSignal came since the budgets were last
	// asked.
	budgetNudged bool
	// localBookkeeping: the ledger's bookkeeping runs as local activities
	// (localBookkeepingChange).
	localBookkeeping bool
	// lean: no search attribute is upserted to the value it already has
	// (leanRunVersion).
	lean bool
	// waitingStep: the main loop waits for this step's vendor
	// (waitForVendor), where resolve --abandon may end the wait; stopWait
	// is that command's handshake with the loop.
	waitingStep string
	stopWait    *waitStop
}

// Episode is the execution phase of one episode: paid steps, local steps, an
// approval gate, and operator commands as Updates. It is a function of the
// ledger: started again for an episode, it resumes from what the ledger has.
func Episode(ctx workflow.Context, in EpisodeInput) (EpisodeResult, error) {
	e := &episode{input: in}
	if err := e.setup(ctx); err != nil {
		return EpisodeResult{}, err
	}
	return e.run(ctx)
}

func (e *episode) setup(ctx workflow.Context) error {
	// One episode, one workflow ID: Temporal runs at most one execution per
	// ID, which is what keeps two runs from working on one episode's paid
	// tasks at once. A start under any other ID is refused.
	if id, want := workflow.GetInfo(ctx).WorkflowExecution.ID, allot.EpisodeWorkflowID(e.input.Pipeline, e.input.EpisodeID); id != want {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the Episode of %s/%s runs under workflow ID %q, but an episode's workflow ID is %q: start it under that ID (starter's episode commands do)",
				e.input.Pipeline, e.input.EpisodeID, id, want),
			allot.InvalidInput, nil)
	}
	e.state = EpisodeState{Pipeline: e.input.Pipeline, EpisodeID: e.input.EpisodeID, Sequence: -1, Stage: allot.StageLoading}
	workflow.SetCurrentDetails(ctx, "Loading the episode from the ledger.")
	if err := workflow.SetQueryHandler(ctx, StateQuery, func() (EpisodeState, error) { return e.state, nil }); err != nil {
		return err
	}
	handlers := map[string]func(workflow.Context, DecisionRequest) (EpisodeState, error){
		ApproveUpdate:    e.approve(allot.ActionApprove),
		RejectUpdate:     e.approve(allot.ActionReject),
		ReworkUpdate:     e.rework,
		ReassembleUpdate: e.reassemble,
		ResolveUpdate:    e.resolve,
	}
	for _, name := range []string{ApproveUpdate, RejectUpdate, ReworkUpdate, ReassembleUpdate, ResolveUpdate} {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, name, handlers[name], workflow.UpdateHandlerOptions{
			Validator: e.validator(name),
		}); err != nil {
			return err
		}
	}
	// A raise nudges an episode parked on its budget; at any other time the
	// signal only sets the flag (it adds no command, so histories without
	// it replay unchanged).
	raised := workflow.GetSignalChannel(ctx, BudgetRaisedSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for raised.Receive(ctx, nil) {
			e.budgetNudged = true
		}
	})
	return nil
}

func (e *episode) run(ctx workflow.Context) (EpisodeResult, error) {
	var a *activities.Activities
	// The lean version implies the others, so a new run records one
	// version marker; histories that recorded two replay the same (version
	// markers are not matched by position).
	v := workflow.GetVersion(ctx, localBookkeepingChange, workflow.DefaultVersion, leanRunVersion)
	e.localBookkeeping, e.lean = v >= localBookkeepingVersion, v >= leanRunVersion
	e.recordsOutcomes = e.lean || workflow.GetVersion(ctx, recordOutcomeChange, workflow.DefaultVersion, recordOutcomeVersion) == recordOutcomeVersion

	var loaded activities.LoadEpisodeResult
	if err := e.bookkeep(ctx, ledgerActivityOptions(), a.LoadEpisode, activities.EpisodeRef{
		Pipeline: e.input.Pipeline, EpisodeID: e.input.EpisodeID, LedgerID: e.input.LedgerID,
	}).Get(ctx, &loaded); err != nil {
		e.loadErr = err
		res, err := e.fail(ctx, err)
		// Commands that came with the start (Update-With-Start) get the
		// same error instead of being dropped.
		if aerr := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); aerr != nil {
			return res, aerr
		}
		return res, err
	}
	e.state.Period, e.state.Sequence, e.state.Key = loaded.Period, loaded.Sequence, loaded.Key
	e.state.NominalTime, e.state.Steps, e.state.CompletedAt = loaded.NominalTime, loaded.Steps, loaded.CompletedAt
	e.autoApprove = loaded.AutoApprove
	e.loaded = true
	if err := e.showLoaded(ctx, loaded); err != nil {
		return EpisodeResult{}, err
	}
	if !(loaded.Status == string(allot.OutcomeCompleted) && e.nextStep() < 0) {
		if err := e.setStage(ctx, allot.StageRunning); err != nil {
			return EpisodeResult{}, err
		}
	}
	for {
		i := e.nextStep()
		if i >= 0 {
			if err := e.runStep(ctx, i); err != nil {
				return e.fail(ctx, err)
			}
			continue
		}
		res, err := e.finish(ctx)
		if err != nil {
			return res, err
		}
		// Finished: commands may run now (also those that came with an
		// Update-With-Start); one that reopened work sends the loop round.
		if err := e.waitIdle(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
			return EpisodeResult{}, err
		}
		if e.nextStep() < 0 {
			return e.state, nil
		}
		if err := e.setStage(ctx, allot.StageRunning); err != nil {
			return EpisodeResult{}, err
		}
	}
}

// showLoaded sets the episode's search attributes from its ledger row. The
// lean version upserts only those the start did not give (a ScheduledRun's
// start gives them all): each upsert is a visibility write (issue 18).
func (e *episode) showLoaded(ctx workflow.Context, loaded activities.LoadEpisodeResult) error {
	have := workflow.GetTypedSearchAttributes(ctx)
	var attrs []temporal.SearchAttributeUpdate
	keyword := func(key temporal.SearchAttributeKeyKeyword, want string) {
		if got, _ := have.GetKeyword(key); !e.lean || got != want {
			attrs = append(attrs, key.ValueSet(want))
		}
	}
	keyword(PipelineAttr, loaded.Pipeline)
	keyword(EpisodeAttr, loaded.EpisodeID)
	keyword(PeriodAttr, loaded.Period)
	if got, ok := have.GetInt64(SequenceAttr); !e.lean || !ok || got != int64(loaded.Sequence) {
		attrs = append(attrs, SequenceAttr.ValueSet(int64(loaded.Sequence)))
	}
	if len(attrs) == 0 {
		return nil
	}
	return workflow.UpsertTypedSearchAttributes(ctx, attrs...)
}

// waitIdle lets operator commands run until done() holds and no command is
// being applied.
func (e *episode) waitIdle(ctx workflow.Context, done func() bool) error {
	e.idle = true
	defer func() { e.idle = false }()
	return workflow.Await(ctx, func() bool { return !e.busy && done() })
}

// nextStep is the first step that is not settled, or -1. A rejected
// approval settles the rest of the episode.
func (e *episode) nextStep() int {
	for i, s := range e.state.Steps {
		switch s.Status {
		case allot.StepCompleted, allot.StepApproved, allot.StepAbandoned:
			continue
		case allot.StepRejected:
			return -1
		}
		return i
	}
	return -1
}

// finish marks the episode completed in the ledger, or shows it rejected.
func (e *episode) finish(ctx workflow.Context) (EpisodeResult, error) {
	var a *activities.Activities
	for _, s := range e.state.Steps {
		if s.Status == allot.StepRejected {
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("Rejected at step **%s**. `starter episode rework` or `starter episode reassemble` reopens it.", s.Name))
			return e.state, e.setStage(ctx, allot.StageRejected)
		}
	}
	if e.state.CompletedAt.IsZero() {
		if err := e.callBookkeeping(ctx, "", "CompleteEpisode", a.CompleteEpisode, activities.CompleteEpisodeInput{
			Pipeline: e.input.Pipeline, EpisodeID: e.input.EpisodeID, LedgerID: e.input.LedgerID, CompletedAt: workflow.Now(ctx),
		}, &e.state.CompletedAt); err != nil {
			return e.fail(ctx, err)
		}
	}
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Completed at %s.\n\n%s", e.state.CompletedAt.UTC().Format(time.RFC3339), stepTable(e.state.Steps)))
	return e.state, e.setStage(ctx, allot.StageCompleted)
}

// setStage moves the episode to stage: the search attribute shows the
// outcome, and (from version 1 on) the ledger records it with its reason so
// outcomes can be counted without Temporal.
func (e *episode) setStage(ctx workflow.Context, stage allot.Stage, reason ...string) error {
	if e.state.Stage == stage {
		return nil
	}
	e.state.Stage = stage
	if have, _ := workflow.GetTypedSearchAttributes(ctx).GetKeyword(OutcomeAttr); !e.lean || have != string(stage.Outcome()) {
		if err := workflow.UpsertTypedSearchAttributes(ctx, OutcomeAttr.ValueSet(string(stage.Outcome()))); err != nil {
			return err
		}
	}
	why := strings.Join(reason, "")
	if why == "" {
		why = stage.Reason()
	}
	return e.recordOutcome(ctx, stage.Outcome(), why)
}

func (e *episode) recordOutcome(ctx workflow.Context, outcome allot.Outcome, reason string) error {
	if !e.recordsOutcomes {
		return nil
	}
	var a *activities.Activities
	return e.bookkeep(ctx, ledgerActivityOptions(), a.RecordEpisodeOutcome, activities.EpisodeOutcomeInput{
		Pipeline: e.input.Pipeline, EpisodeID: e.input.EpisodeID, LedgerID: e.input.LedgerID, Outcome: outcome, Reason: reason, At: workflow.Now(ctx),
	}).Get(ctx, nil)
}

func (e *episode) fail(ctx workflow.Context, err error) (EpisodeResult, error) {
	e.state.Stage, e.state.Error = allot.StageFailed, err.Error()
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Failed (%s): %s", errorType(err), err.Error()))
	if uerr := workflow.UpsertTypedSearchAttributes(ctx, OutcomeAttr.ValueSet(string(allot.OutcomeFailed))); uerr != nil {
		workflow.GetLogger(ctx).Error("setting the failed outcome failed", "error", uerr)
	}
	// A missing episode has no ledger row to record on.
	if e.loaded {
		if rerr := e.recordOutcome(ctx, allot.OutcomeFailed, errorType(err)); rerr != nil {
			workflow.GetLogger(ctx).Error("recording the failed outcome failed", "error", rerr)
		}
	}
	return EpisodeResult{}, err
}

// stepTable shows the steps, with each paid step's reference and cost, as
// Markdown for the Web UI.
func stepTable(steps []activities.StepState) string {
	var b strings.Builder
	b.WriteString("| step | kind | status | revision | remote reference | cost |\n|---|---|---|---|---|---|\n")
	for _, s := range steps {
		ref, cost, rev := "", "", ""
		if allot.StepKind(s.Kind).Costs() {
			rev = fmt.Sprint(s.Revision)
			ref = "`" + s.RemoteRef + "`"
			if s.CostCurrency != "" {
				cost = allot.Money{Amount: s.CostAmount, Currency: s.CostCurrency}.String()
			}
		}
		b.WriteString(fmt.Sprintf("| %s | %s | %s | %s | %s | %s |\n", s.Name, s.Kind, s.Status, rev, ref, cost))
	}
	return b.String()
}
