package operator

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/ledger"
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
}

// EpisodeStartOptions starts (or joins) an episode's workflow: the running
// one is used, a finished one is started again and resumes from the ledger.
func EpisodeStartOptions(pipelineName, episodeID, taskQueue string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       workflows.EpisodeWorkflowID(pipelineName, episodeID),
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
		return CommandResult{}, errors.New("--episode is required: operator commands act on an existing episode and never allocate one")
	}
	if err := checkStep(p, in); err != nil {
		return CommandResult{}, err
	}
	if o.Ledger != nil {
		ep, err := o.Ledger.Episode(ctx, p.Name, in.EpisodeID)
		if err != nil {
			if errors.Is(err, ledger.ErrEpisodeNotFound) {
				return CommandResult{}, temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("pipeline %s has no episode %s: list them with `starter episodes --pipeline %s`", p.Name, in.EpisodeID, p.Name),
					allot.EpisodeNotFound, nil)
			}
			return CommandResult{}, err
		}
		if err := o.refuseWithoutRun(ctx, p.Name, ep, in.Update); err != nil {
			return CommandResult{}, err
		}
	}
	start := o.Client.NewWithStartWorkflowOperation(EpisodeStartOptions(p.Name, in.EpisodeID, o.TaskQueue),
		workflows.EpisodeWorkflow, workflows.EpisodeInput{Pipeline: p.Name, EpisodeID: in.EpisodeID})
	handle, err := o.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName:   in.Update,
			Args:         []any{in.Request},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return CommandResult{}, fmt.Errorf("send %s to episode %s: %w", in.Update, in.EpisodeID, err)
	}
	out := CommandResult{WorkflowID: handle.WorkflowID(), RunID: handle.RunID(), Update: in.Update}
	if err := handle.Get(ctx, &out.State); err != nil {
		return out, err
	}
	return out, nil
}

// refuseWithoutRun answers, from the ledger and without starting anything,
// a command that only a waiting or parked episode takes, when the episode's
// workflow is not running and the ledger says the episode is settled
// (completed or rejected): starting a run just to refuse would leave a new
// run behind for every refused command. Rework and reassemble reopen a
// settled episode, so they go through.
func (o *EpisodeCommands) refuseWithoutRun(ctx context.Context, pipelineName string, ep ledger.Episode, update string) error {
	if update == workflows.ReworkUpdate || update == workflows.ReassembleUpdate {
		return nil
	}
	outcome := allot.Outcome(ep.Outcome)
	if outcome == "" && ep.Status == ledger.EpisodeCompleted {
		outcome = allot.OutcomeCompleted
	}
	if outcome != allot.OutcomeCompleted && outcome != allot.OutcomeRejected {
		return nil
	}
	id := workflows.EpisodeWorkflowID(pipelineName, ep.ID)
	desc, err := o.Client.DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
	case err != nil:
		return fmt.Errorf("describe workflow %s: %w", id, err)
	case desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return nil
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("episode %s of %s is %s: there is nothing to %s; `starter episode rework` or `starter episode reassemble` reopens it", ep.ID, pipelineName, outcome, update),
		allot.NotReady, nil)
}

// checkStep refuses unknown or unfitting steps before anything is sent.
func checkStep(p *pipeline.Pipeline, in CommandInput) error {
	if in.Update != workflows.ReworkUpdate && in.Update != workflows.ResolveUpdate {
		return nil
	}
	s, ok := p.Step(in.Request.Step)
	// Rework is for paid steps; resolve for any step that can park.
	if !ok || s.Kind == pipeline.Approval || in.Update == workflows.ReworkUpdate && s.Kind != pipeline.Paid {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("pipeline %s has no paid step %q: its paid steps are %v", p.Name, in.Request.Step, p.PaidStepNames()),
			allot.StepNotFound, nil)
	}
	return nil
}

// ShowResult is everything the ledger knows about one episode, and what
// its workflow is doing.
type ShowResult struct {
	Episode   ledger.Episode            `json:"episode"`
	Steps     []ledger.StepRecord       `json:"steps"`
	PaidTasks []ledger.PaidTask         `json:"paid_tasks"`
	Costs     []ledger.CostEntry        `json:"costs"`
	Totals    map[string]int64          `json:"totals"` // by currency, minor units
	Decisions []ledger.OperatorDecision `json:"decisions"`
	Workflow  *WorkflowStatus           `json:"workflow,omitempty"`
}

// WorkflowStatus is the Episode workflow's status and, while it runs, its state.
type WorkflowStatus struct {
	WorkflowID string                  `json:"workflow_id"`
	RunID      string                  `json:"run_id"`
	Status     string                  `json:"status"`
	State      *workflows.EpisodeState `json:"state,omitempty"`
}

// Show reads one episode from the ledger, and its workflow from Temporal
// when a client is given.
func Show(ctx context.Context, led *ledger.Ledger, c client.Client, pipelineName, episodeID string) (ShowResult, error) {
	if err := pipeline.ValidateName(pipelineName); err != nil {
		return ShowResult{}, err
	}
	if episodeID == "" {
		return ShowResult{}, errors.New("--episode is required")
	}
	ep, err := led.Episode(ctx, pipelineName, episodeID)
	if err != nil {
		return ShowResult{}, err
	}
	out := ShowResult{Episode: ep, Totals: map[string]int64{}}
	if out.Steps, err = led.Steps(ctx, pipelineName, episodeID); err != nil {
		return ShowResult{}, err
	}
	if out.PaidTasks, err = led.PaidTasks(ctx, pipelineName, episodeID); err != nil {
		return ShowResult{}, err
	}
	if out.Decisions, err = led.Decisions(ctx, pipelineName, episodeID); err != nil {
		return ShowResult{}, err
	}
	costs, err := led.Costs(ctx, pipelineName, ep.Period)
	if err != nil {
		return ShowResult{}, err
	}
	for _, c := range costs {
		if c.EpisodeID == episodeID {
			out.Costs = append(out.Costs, c)
			out.Totals[c.Currency] += c.Amount
		}
	}
	if c != nil {
		if out.Workflow, err = episodeWorkflow(ctx, c, pipelineName, episodeID); err != nil {
			return ShowResult{}, err
		}
	}
	return out, nil
}

func episodeWorkflow(ctx context.Context, c client.Client, pipelineName, episodeID string) (*WorkflowStatus, error) {
	id := workflows.EpisodeWorkflowID(pipelineName, episodeID)
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describe workflow %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	ws := &WorkflowStatus{WorkflowID: id, RunID: info.GetExecution().GetRunId(), Status: info.GetStatus().String()}
	if v, err := c.QueryWorkflow(ctx, id, ws.RunID, workflows.StateQuery); err == nil {
		var st workflows.EpisodeState
		if v.Get(&st) == nil {
			ws.State = &st
		}
	}
	return ws, nil
}

// CostsInput selects a pipeline's costs, optionally one period.
type CostsInput struct {
	Pipeline string
	Period   string
}

// CostLine is the cost of one step of one episode (all its revisions).
type CostLine struct {
	EpisodeID string `json:"episode_id"`
	Period    string `json:"period"`
	Step      string `json:"step"`
	Revisions int    `json:"revisions"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
}

// CostsResult lists costs per episode and step, with totals per currency.
type CostsResult struct {
	Pipeline string           `json:"pipeline"`
	Period   string           `json:"period,omitempty"`
	Lines    []CostLine       `json:"lines"`
	Totals   map[string]int64 `json:"totals"`
}

// Costs sums the ledger's cost entries per episode and step.
func Costs(ctx context.Context, led *ledger.Ledger, in CostsInput) (CostsResult, error) {
	if err := pipeline.ValidateName(in.Pipeline); err != nil {
		return CostsResult{}, err
	}
	if in.Period != "" && !periodPattern.MatchString(in.Period) {
		return CostsResult{}, fmt.Errorf("period %q is not a period: use an ISO week like 2026-W32 or a day like 2026-08-07", in.Period)
	}
	entries, err := led.Costs(ctx, in.Pipeline, in.Period)
	if err != nil {
		return CostsResult{}, err
	}
	out := CostsResult{Pipeline: in.Pipeline, Period: in.Period, Lines: []CostLine{}, Totals: map[string]int64{}}
	index := map[[3]string]int{}
	for _, e := range entries {
		k := [3]string{e.EpisodeID, e.Step, e.Currency}
		i, ok := index[k]
		if !ok {
			i = len(out.Lines)
			index[k] = i
			out.Lines = append(out.Lines, CostLine{EpisodeID: e.EpisodeID, Period: e.Period, Step: e.Step, Currency: e.Currency})
		}
		out.Lines[i].Revisions++
		out.Lines[i].Amount += e.Amount
		out.Totals[e.Currency] += e.Amount
	}
	return out, nil
}
