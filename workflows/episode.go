package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"allot/activities"
)

// EpisodeInput names an existing episode. The Episode workflow never allocates.
type EpisodeInput struct {
	Pipeline  string `json:"pipeline"`
	EpisodeID string `json:"episode_id"`
}

// Episode stages, as the state query and current details show them.
const (
	StageLoading   = "loading"
	StageRunning   = "running"
	StageCompleted = "completed"
	StageFailed    = "failed"
)

// EpisodeState is what the state query answers.
type EpisodeState struct {
	Pipeline    string                 `json:"pipeline"`
	EpisodeID   string                 `json:"episode_id"`
	Period      string                 `json:"period"`
	Sequence    int                    `json:"sequence"`
	Key         string                 `json:"allocation_key"`
	NominalTime time.Time              `json:"nominal_time"`
	Stage       string                 `json:"stage"`
	CurrentStep string                 `json:"current_step,omitempty"`
	Steps       []activities.StepState `json:"steps"`
	CompletedAt time.Time              `json:"completed_at,omitzero"`
	Error       string                 `json:"error,omitempty"`
}

// EpisodeResult is the episode's final state.
type EpisodeResult = EpisodeState

func episodeActivityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			NonRetryableErrorTypes: activities.NonRetryableErrorTypes,
		},
	}
}

type episode struct {
	input EpisodeInput
	state EpisodeState
}

// Episode is the execution phase of one episode. It is a function of the
// ledger: started again for an episode, it resumes from what the ledger has.
func Episode(ctx workflow.Context, in EpisodeInput) (EpisodeResult, error) {
	e := &episode{input: in}
	if err := e.setup(ctx); err != nil {
		return EpisodeResult{}, err
	}
	return e.run(ctx)
}

func (e *episode) setup(ctx workflow.Context) error {
	e.state = EpisodeState{Pipeline: e.input.Pipeline, EpisodeID: e.input.EpisodeID, Sequence: -1, Stage: StageLoading}
	workflow.SetCurrentDetails(ctx, "Loading the episode from the ledger.")
	return workflow.SetQueryHandler(ctx, StateQuery, func() (EpisodeState, error) { return e.state, nil })
}

func (e *episode) run(ctx workflow.Context) (EpisodeResult, error) {
	var a *activities.Activities
	actx := workflow.WithActivityOptions(ctx, episodeActivityOptions())

	var loaded activities.LoadEpisodeResult
	if err := workflow.ExecuteActivity(actx, a.LoadEpisode, activities.EpisodeRef{
		Pipeline: e.input.Pipeline, EpisodeID: e.input.EpisodeID,
	}).Get(ctx, &loaded); err != nil {
		return e.fail(ctx, err)
	}
	e.state.Period, e.state.Sequence, e.state.Key = loaded.Period, loaded.Sequence, loaded.Key
	e.state.NominalTime, e.state.Steps, e.state.CompletedAt = loaded.NominalTime, loaded.Steps, loaded.CompletedAt
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		PipelineAttr.ValueSet(loaded.Pipeline),
		EpisodeAttr.ValueSet(loaded.EpisodeID),
		PeriodAttr.ValueSet(loaded.Period),
		SequenceAttr.ValueSet(int64(loaded.Sequence)),
	); err != nil {
		return EpisodeResult{}, err
	}
	if loaded.Status == StageCompleted {
		return e.complete(ctx, actx)
	}

	e.state.Stage = StageRunning
	if err := workflow.UpsertTypedSearchAttributes(ctx, OutcomeAttr.ValueSet(OutcomeRunning)); err != nil {
		return EpisodeResult{}, err
	}
	for i := range e.state.Steps {
		step := &e.state.Steps[i]
		if step.Status == activities.StepCompleted {
			continue
		}
		e.state.CurrentStep = step.Name
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Running step **%s** (%s), %d of %d.", step.Name, step.Kind, i+1, len(e.state.Steps)))
		switch step.Kind {
		case "local":
			var done activities.StepState
			if err := workflow.ExecuteActivity(actx, a.RunLocalStep, activities.RunLocalStepInput{
				Pipeline: e.input.Pipeline, EpisodeID: e.input.EpisodeID, Step: step.Name,
			}).Get(ctx, &done); err != nil {
				return e.fail(ctx, err)
			}
			*step = done
		default:
			return e.fail(ctx, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("step %q has kind %q, which this worker cannot run", step.Name, step.Kind), activities.InvalidInput, nil))
		}
	}
	e.state.CurrentStep = ""
	return e.complete(ctx, actx)
}

func (e *episode) complete(ctx, actx workflow.Context) (EpisodeResult, error) {
	var a *activities.Activities
	if e.state.CompletedAt.IsZero() {
		if err := workflow.ExecuteActivity(actx, a.CompleteEpisode, activities.CompleteEpisodeInput{
			Pipeline: e.input.Pipeline, EpisodeID: e.input.EpisodeID, CompletedAt: workflow.Now(ctx),
		}).Get(ctx, &e.state.CompletedAt); err != nil {
			return e.fail(ctx, err)
		}
	}
	e.state.Stage = StageCompleted
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Completed at %s: %s.", e.state.CompletedAt.UTC().Format(time.RFC3339), stepSummary(e.state.Steps)))
	if err := workflow.UpsertTypedSearchAttributes(ctx, OutcomeAttr.ValueSet(OutcomeCompleted)); err != nil {
		return EpisodeResult{}, err
	}
	return e.state, nil
}

func (e *episode) fail(ctx workflow.Context, err error) (EpisodeResult, error) {
	e.state.Stage, e.state.Error = StageFailed, err.Error()
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("Failed (%s): %s", errorType(err), err.Error()))
	if uerr := workflow.UpsertTypedSearchAttributes(ctx, OutcomeAttr.ValueSet(OutcomeFailed)); uerr != nil {
		workflow.GetLogger(ctx).Error("setting the failed outcome failed", "error", uerr)
	}
	return EpisodeResult{}, err
}

func stepSummary(steps []activities.StepState) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = s.Name + " " + s.Status
	}
	return strings.Join(parts, ", ")
}
