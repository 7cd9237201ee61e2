package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/activities"
	"allot/internal/ledger"
	"allot/pipeline"
	"allot/workflows"
)

// EpisodeCommands sends operator commands to Episode workflows. None of them
// ever allocates: each names an existing episode explicitly.
type EpisodeCommands struct {
	Client    client.Client
	Pipelines *pipeline.Set
	TaskQueue string
	// Ledger, when set, is checked first: a missing episode is refused
	// before anything is sent to Temporal.
	Ledger *ledger.Ledger
}

// CommandInput is one operator command for one episode.
type CommandInput struct {
	Pipeline  string
	EpisodeID string
	Update    string // workflows.ApproveUpdate, ReworkUpdate, ...
	Request   workflows.DecisionRequest
}

// CommandResult is the episode's state after the command took effect.
type CommandResult struct {
	WorkflowID string                 `json:"workflow_id"`
	RunID      string                 `json:"run_id"`
	Update     string                 `json:"update"`
	State      workflows.EpisodeState `json:"state"`
	// BudgetShort are, after a retry of a step parked BudgetExhausted, the
	// budgets that still refuse it (the ledger's view right after the
	// command): the step parks again until they are raised. BudgetRaises
	// are the commands that admit it.
	BudgetShort  []ledger.BudgetShortfall `json:"budget_short,omitempty"`
	BudgetRaises []string                 `json:"budget_raises,omitempty"`
}

// EpisodeStartOptions starts (or joins) an episode's workflow: the running
// one is used, a finished one is started again and resumes from the ledger.
func EpisodeStartOptions(pipelineName, episodeID, taskQueue string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       allot.EpisodeWorkflowID(pipelineName, episodeID),
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            fmt.Sprintf("%s episode %s", pipelineName, episodeID),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.PipelineAttr.ValueSet(pipelineName),
			workflows.EpisodeAttr.ValueSet(episodeID),
		),
	}
}

// CheckRejectReason refuses a reject without a reason (InvalidInput): it
// ends the episode, and the ledger keeps why, as the page and a vendor's
// pause ask for one.
func CheckRejectReason(in CommandInput) error {
	if in.Update != workflows.RejectUpdate || strings.TrimSpace(in.Request.Reason) != "" {
		return nil
	}
	return allot.Errorf(allot.InvalidInput, "--reason is required: rejecting episode %s ends it, and the ledger keeps why: `%s`",
		in.EpisodeID, allot.RejectCommand(in.Pipeline, in.EpisodeID, "why it is rejected"))
}

// Send validates the command, checks that the episode exists, and delivers
// the command as an Update-With-Start, waiting for its result. A command
// for an episode whose workflow has finished starts a new run only if the
// episode needs one: the ledger answers approve, reject and resolve for a
// settled (completed or rejected) episode with NotReady, starting nothing.
func (o *EpisodeCommands) Send(ctx context.Context, in CommandInput) (CommandResult, error) {
	p, err := o.Pipelines.Get(in.Pipeline)
	if err != nil {
		return CommandResult{}, err
	}
	if in.EpisodeID == "" {
		return CommandResult{}, allot.Errorf(allot.InvalidInput, "--episode is required: operator commands act on an existing episode and never allocate one")
	}
	if err := checkTexts("--reason", in.Request.Reason); err != nil {
		return CommandResult{}, err
	}
	if err := CheckRejectReason(in); err != nil {
		return CommandResult{}, err
	}
	// The decision records who acted, resolved as every command does.
	if in.Request.By, err = allot.Actor(in.Request.By); err != nil {
		return CommandResult{}, &allot.Error{Type: allot.InvalidInput, Message: err.Error()}
	}
	if err := checkStep(p, in); err != nil {
		return CommandResult{}, err
	}
	if o.Ledger != nil {
		ep, err := o.Ledger.Episode(ctx, p.Name, in.EpisodeID)
		if err != nil {
			if errors.Is(err, ledger.ErrEpisodeNotFound) {
				return CommandResult{}, allot.Errorf(allot.EpisodeNotFound, "pipeline %s has no episode %s: list them with `%s`", p.Name, in.EpisodeID, allot.EpisodesCommand(p.Name))
			}
			return CommandResult{}, err
		}
		if err := o.refuseWithoutRun(ctx, p.Name, ep, in.Update); err != nil {
			return CommandResult{}, err
		}
	}
	refusedBy := o.budgetParked(ctx, p.Name, in)
	opts, ledgerID := EpisodeStartOptions(p.Name, in.EpisodeID, o.TaskQueue), ""
	if o.Ledger != nil {
		ledgerID = o.Ledger.ID()
		opts.Memo = map[string]any{allot.LedgerMemo: ledgerID}
	}
	start := o.Client.NewWithStartWorkflowOperation(opts,
		workflows.EpisodeWorkflow, workflows.EpisodeInput{Pipeline: p.Name, EpisodeID: in.EpisodeID, LedgerID: ledgerID})
	handle, err := o.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName:   in.Update,
			Args:         []any{in.Request},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		if endedFirst(err) {
			return CommandResult{}, o.endedBeforeCommand(ctx, p.Name, in)
		}
		return CommandResult{}, fmt.Errorf("send %s to episode %s: %w", in.Update, in.EpisodeID, err)
	}
	out := CommandResult{WorkflowID: handle.WorkflowID(), RunID: handle.RunID(), Update: in.Update}
	if err := handle.Get(ctx, &out.State); err != nil {
		if endedFirst(err) {
			return out, o.endedBeforeCommand(ctx, p.Name, in)
		}
		return out, err
	}
	// The update answers with the state the command left; the episode
	// moves on from it in the same workflow task (an approved episode
	// runs its next step). The state query, answered after that task, is
	// the state after the command took effect.
	if v, err := o.Client.QueryWorkflow(ctx, out.WorkflowID, out.RunID, workflows.StateQuery); err == nil {
		var st workflows.EpisodeState
		if v.Get(&st) == nil && st.Stage != "" {
			out.State = st
		}
	}
	out.BudgetShort, out.BudgetRaises, err = o.budgetAnswer(ctx, p.Name, in.EpisodeID, in.Request.Step, refusedBy)
	return out, err
}

// budgetAnswer is what a retry of a step that refused parked on budgets
// found: the budgets that still refuse it, and the raises that admit it.
func (o *EpisodeCommands) budgetAnswer(ctx context.Context, pipelineName, episodeID, step string, refused []ledger.BudgetShortfall) ([]ledger.BudgetShortfall, []string, error) {
	if len(refused) == 0 {
		return nil, nil, nil
	}
	short, err := o.stillShort(ctx, ledger.PaidTaskRef{Pipeline: pipelineName, EpisodeID: episodeID, Step: step}, refused)
	if err != nil {
		return nil, nil, err
	}
	return short, workflows.BudgetRemedies(pipelineName, episodeID, step, short), nil
}

// budgetParked are the budgets that refused the step a retry names, when
// the episode is parked on it BudgetExhausted (nil otherwise): the retry
// asks them again, and its answer says whether they still refuse.
func (o *EpisodeCommands) budgetParked(ctx context.Context, pipelineName string, in CommandInput) []ledger.BudgetShortfall {
	if in.Update != workflows.ResolveUpdate || in.Request.Resolve != allot.ActionRetry || o.Ledger == nil {
		return nil
	}
	v, err := o.Client.QueryWorkflow(ctx, allot.EpisodeWorkflowID(pipelineName, in.EpisodeID), "", workflows.StateQuery)
	if err != nil {
		return nil
	}
	var st workflows.EpisodeState
	if v.Get(&st) != nil || st.Attention == nil || st.Attention.Step != in.Request.Step || st.Attention.ErrorType != allot.BudgetExhausted {
		return nil
	}
	return st.Attention.Budgets
}

// stillShort asks the ledger, read-only, which of the budgets that refused
// the step of ref still would, with the limits it has now (raises
// included).
func (o *EpisodeCommands) stillShort(ctx context.Context, ref ledger.PaidTaskRef, refused []ledger.BudgetShortfall) ([]ledger.BudgetShortfall, error) {
	rs := make([]allot.Reservation, len(refused))
	for i, n := range refused {
		limit := n.Limit
		if b, ok := o.Pipelines.Budget(n.Budget); ok && b.Limit.Currency == n.Currency {
			limit = b.Limit.Amount
		}
		rs[i] = allot.Reservation{Budget: n.Budget, Period: n.Period, Currency: n.Currency, Limit: limit, Amount: n.Asked}
	}
	return o.Ledger.BudgetRoom(ctx, ref, rs)
}

// updateOnEndedWorkflow is the type of the failure Temporal gives an
// accepted update whose workflow ended before the update completed.
const updateOnEndedWorkflow = "AcceptedUpdateCompletedWorkflow"

func endedFirst(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == updateOnEndedWorkflow
}

// endedBeforeCommand is the plain refusal of a command whose episode's
// workflow ended before it could take it (an episode that fails again at
// the same step when started for the command): NotReady, with how the
// episode stands and where to look.
func (o *EpisodeCommands) endedBeforeCommand(ctx context.Context, pipelineName string, in CommandInput) error {
	ended := "ended"
	if desc, err := o.Client.DescribeWorkflowExecution(ctx, allot.EpisodeWorkflowID(pipelineName, in.EpisodeID), ""); err == nil {
		ended += " (" + strings.ToLower(strings.TrimPrefix(desc.GetWorkflowExecutionInfo().GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_")) + ")"
	}
	stands := ""
	if o.Ledger != nil {
		if ep, err := o.Ledger.Episode(ctx, pipelineName, in.EpisodeID); err == nil && ep.Outcome != "" {
			stands = fmt.Sprintf(", and the ledger has the episode %s (%s)", ep.Outcome, ep.OutcomeReason)
		}
	}
	return allot.Errorf(allot.NotReady, "episode %s of %s: its workflow %s before it could take the %s%s: there is nothing to %s; see why with `%s`",
		in.EpisodeID, pipelineName, ended, in.Update, stands, in.Update, allot.ShowCommand(pipelineName, in.EpisodeID))
}

// refuseWithoutRun answers, from the ledger and without starting anything,
// a command that only a waiting or parked episode takes, when the episode's
// workflow is not running and the ledger says the episode is settled
// (completed or rejected): starting a run just to refuse would leave a new
// run behind for every refused command. Rework and reassemble reopen a
// settled episode, so they go through (a reassemble once the episode's
// assembly has run: refuseReassembleWithoutRun).
func (o *EpisodeCommands) refuseWithoutRun(ctx context.Context, pipelineName string, ep ledger.Episode, update string) error {
	if update == workflows.ReassembleUpdate {
		return o.refuseReassembleWithoutRun(ctx, pipelineName, ep)
	}
	if update == workflows.ReworkUpdate {
		return nil
	}
	outcome := allot.Outcome(ep.Outcome)
	if outcome == "" && ep.Status == ledger.EpisodeCompleted {
		outcome = allot.OutcomeCompleted
	}
	if outcome != allot.OutcomeCompleted && outcome != allot.OutcomeRejected {
		return nil
	}
	if running, err := o.workflowRunning(ctx, pipelineName, ep.ID); err != nil || running {
		return err
	}
	stands := string(outcome)
	if update == workflows.ApproveUpdate || update == workflows.RejectUpdate {
		// A settled episode has passed its approval (issue 15: a second
		// approve said to wait for the approval step).
		decided := "approved"
		if outcome == allot.OutcomeRejected {
			decided = "rejected"
		}
		stands = fmt.Sprintf("%s, already %s and past approval", outcome, decided)
		if p, err := o.Pipelines.Get(pipelineName); err == nil && !slices.ContainsFunc(p.Steps, func(s pipeline.Step) bool { return s.Kind.Gate() }) {
			stands = fmt.Sprintf("%s and its pipeline has no approval step", outcome)
		}
	}
	return allot.Errorf(allot.NotReady, "episode %s of %s is %s: there is nothing to %s; reopen it with one of: %s", ep.ID, pipelineName, stands, update, o.reopenCommands(pipelineName, ep.ID))
}

// workflowRunning says whether the episode's workflow runs now: then its
// validators answer a command, not the ledger.
func (o *EpisodeCommands) workflowRunning(ctx context.Context, pipelineName, episodeID string) (bool, error) {
	id := allot.EpisodeWorkflowID(pipelineName, episodeID)
	desc, err := o.Client.DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("describe workflow %s: %w", id, err)
	}
	return desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// refuseReassembleWithoutRun answers, from the ledger and starting
// nothing, a reassemble of an episode whose assembly has not run
// (allot.CheckReassemble) when no workflow of it runs: a run started for it
// would record a decision that changes nothing. A running workflow's
// validator answers it, with the parked step's remedies.
func (o *EpisodeCommands) refuseReassembleWithoutRun(ctx context.Context, pipelineName string, ep ledger.Episode) error {
	p, err := o.Pipelines.Get(pipelineName)
	if err != nil {
		return err
	}
	assemble := ""
	for _, s := range p.Steps {
		if s.Kind == allot.KindLocal && s.Action == pipeline.ActionAssemble {
			assemble = s.Name
			break
		}
	}
	var status allot.StepStatus
	if assemble != "" {
		records, err := o.Ledger.Steps(ctx, pipelineName, ep.ID)
		if err != nil {
			return err
		}
		for _, r := range records {
			if r.Step == assemble {
				status = r.Status
			}
		}
	}
	refusal := allot.CheckReassemble(assemble, status)
	if refusal == nil {
		return nil
	}
	if running, err := o.workflowRunning(ctx, pipelineName, ep.ID); err != nil || running {
		return err
	}
	next := fmt.Sprintf("it has no workflow running: resume it with `%s`", allot.ResumeCommand(pipelineName, ep.ID))
	if ep.Settled() {
		var reworks []string
		for _, st := range p.PaidStepNames() {
			reworks = append(reworks, "`"+allot.ReworkCommand(pipelineName, ep.ID, st)+"`")
		}
		next = fmt.Sprintf("it is %s: a rework reopens it (%s)", ep.OutcomeOrStatus(), strings.Join(reworks, ", "))
	}
	return allot.Errorf(allot.NotReady, "episode %s of %s: %v; %s, and `%s` shows how it stands", ep.ID, pipelineName, refusal, next, allot.ShowCommand(pipelineName, ep.ID))
}

// checkStep refuses unknown or unfitting steps before anything is sent.
func checkStep(p *pipeline.Pipeline, in CommandInput) error {
	if in.Update != workflows.ReworkUpdate && in.Update != workflows.ResolveUpdate {
		return nil
	}
	s, ok := p.Step(in.Request.Step)
	// Rework is for paid steps; resolve for any step that can park.
	if !ok || s.Kind.Gate() || in.Update == workflows.ReworkUpdate && !s.Kind.Costs() {
		return allot.Errorf(allot.StepNotFound, "pipeline %s has no paid step %q: its paid steps are %v", p.Name, in.Request.Step, p.PaidStepNames())
	}
	return nil
}

// How Resume served a request.
const (
	ResumeStarted = "started" // the episode's workflow was started; it resumes from the ledger
	ResumeRunning = "running" // it already runs; nothing was started
)

// ResumeResult says what Resume did.
type ResumeResult struct {
	Action     string `json:"action"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
}

// Resume starts the Episode workflow of an unsettled episode that has none
// running: its ScheduledRun never started it, it ended abnormally, or its
// history is gone (check reports these as workflow_missing or
// workflow_ended). The workflow resumes from the ledger: steps done are not
// run again, and paid steps go through the protocol. A running workflow
// is left alone; a settled episode, or a workflow of another ledger under
// the episode's ID, is refused and nothing is started.
func (o *EpisodeCommands) Resume(ctx context.Context, pipelineName, episodeID string) (ResumeResult, error) {
	p, err := o.Pipelines.Get(pipelineName)
	if err != nil {
		return ResumeResult{}, err
	}
	if o.Ledger == nil {
		return ResumeResult{}, allot.Errorf(allot.InvalidInput, "resume needs the ledger: set ALLOT_LEDGER or pass --ledger")
	}
	ep, err := o.Ledger.Episode(ctx, p.Name, episodeID)
	if errors.Is(err, ledger.ErrEpisodeNotFound) {
		return ResumeResult{}, allot.Errorf(allot.EpisodeNotFound, "pipeline %s has no episode %s: list them with `%s`", p.Name, episodeID, allot.EpisodesCommand(p.Name))
	}
	if err != nil {
		return ResumeResult{}, err
	}
	id := allot.EpisodeWorkflowID(p.Name, ep.ID)
	desc, err := o.Client.DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
	case err != nil:
		return ResumeResult{}, fmt.Errorf("describe workflow %s: %w", id, err)
	default:
		info := desc.GetWorkflowExecutionInfo()
		if owner := activities.LedgerOfMemo(info.GetMemo().GetFields()); owner != "" && owner != o.Ledger.ID() {
			return ResumeResult{}, allot.Errorf(allot.LedgerMismatch, "workflow %s belongs to ledger %s, not to this ledger %s: give each ledger its own task queue (ALLOT_TASK_QUEUE) or namespace before resuming", id, owner, o.Ledger.ID())
		}
		if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return ResumeResult{Action: ResumeRunning, WorkflowID: id, RunID: info.GetExecution().GetRunId()}, nil
		}
	}
	if ep.Settled() {
		return ResumeResult{}, allot.Errorf(allot.NotReady, "episode %s of %s is %s: there is nothing to resume; reopen it with one of: %s", ep.ID, p.Name, ep.OutcomeOrStatus(), o.reopenCommands(p.Name, ep.ID))
	}
	opts := EpisodeStartOptions(p.Name, ep.ID, o.TaskQueue)
	opts.Memo = map[string]any{allot.LedgerMemo: o.Ledger.ID()}
	run, err := o.Client.ExecuteWorkflow(ctx, opts, workflows.EpisodeWorkflow, workflows.EpisodeInput{Pipeline: p.Name, EpisodeID: ep.ID, LedgerID: o.Ledger.ID()})
	if err != nil {
		return ResumeResult{}, fmt.Errorf("start workflow %s: %w", id, err)
	}
	return ResumeResult{Action: ResumeStarted, WorkflowID: id, RunID: run.GetRunID()}, nil
}

// reopenCommands lists, quoted for the message, the commands that reopen a
// settled episode of the pipeline.
func (o *EpisodeCommands) reopenCommands(pipelineName, episodeID string) string {
	var steps []string
	if p, err := o.Pipelines.Get(pipelineName); err == nil {
		steps = p.PaidStepNames()
	}
	cmds := workflows.ReopenCommands(pipelineName, episodeID, steps)
	for i, c := range cmds {
		cmds[i] = "`" + c + "`"
	}
	return strings.Join(cmds, ", ")
}
