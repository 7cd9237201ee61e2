package activities

import (
	"context"
	"errors"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// EpisodeRef names an existing episode. Paid and local work always take one;
// nothing but Allocate ever creates an episode.
type EpisodeRef struct {
	Pipeline  string `json:"pipeline"`
	EpisodeID string `json:"episode_id"`
	// LedgerID is the ledger the workflow belongs to; "" for workflows
	// started before ledgers had one. A worker on another ledger refuses.
	LedgerID string `json:"ledger_id,omitempty"`
}

// StepState is one step of an episode as the ledger knows it. For a paid
// step it describes the latest revision.
type StepState struct {
	Name   string           `json:"name"`
	Kind   string           `json:"kind"`
	Action string           `json:"action"`
	Status allot.StepStatus `json:"status"`
	// TaskState is a paid step's latest paid-task state ("" before its
	// first intent): what the operator command table is keyed by.
	TaskState    allot.PaidTaskState `json:"task_state,omitempty"`
	Artifact     string              `json:"artifact,omitempty"`
	SHA256       string              `json:"sha256,omitempty"`
	Revision     int                 `json:"revision,omitempty"`
	RemoteRef    string              `json:"remote_ref,omitempty"`
	CostAmount   int64               `json:"cost_amount,omitempty"`
	CostCurrency string              `json:"cost_currency,omitempty"`
	Error        string              `json:"error,omitempty"`
	// Run says how the workflow runs the step where it is more than one
	// activity of this worker: exec and go steps' timeouts, an activity
	// step's activity, a paid or effect step's activity adapter.
	Run *StepRun `json:"run,omitempty"`
}

// StepRun is what the Episode needs to run a step: timeouts, and the
// activities of other workers it calls.
type StepRun struct {
	// Timeout bounds one run of a go, exec or activity step.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Activity, TaskQueue, Heartbeat and Retry are an activity step's.
	Activity  string            `json:"activity,omitempty"`
	TaskQueue string            `json:"task_queue,omitempty"`
	Heartbeat time.Duration     `json:"heartbeat,omitempty"`
	Retry     *pipeline.Retry   `json:"retry,omitempty"`
	Vendor    *VendorActivities `json:"vendor,omitempty"`
	// SendTimeout is a paid or effect step's vendor's send_timeout where
	// it is not the default: a short one makes a killed sender's attempt
	// be retried sooner (the submit's heartbeat timeout).
	SendTimeout time.Duration `json:"send_timeout,omitempty"`
	// Batch: a paid step in batch mode (SubmitBatchItem, then the
	// vendor's batch).
	Batch bool `json:"batch,omitempty"`
}

// VendorActivities are a vendor's activity adapter: its queue, its
// activity types (Lookup may be empty) and the timeout of one call.
type VendorActivities struct {
	Name        string        `json:"name"`
	TaskQueue   string        `json:"task_queue"`
	Submit      string        `json:"submit"`
	Lookup      string        `json:"lookup,omitempty"`
	Status      string        `json:"status,omitempty"`
	Fetch       string        `json:"fetch,omitempty"`
	Quote       string        `json:"quote,omitempty"`
	CallTimeout time.Duration `json:"call_timeout"`
}

// LoadEpisodeResult is the episode and its steps, in pipeline order.
type LoadEpisodeResult struct {
	Pipeline    string      `json:"pipeline"`
	EpisodeID   string      `json:"episode_id"`
	Period      string      `json:"period"`
	Sequence    int         `json:"sequence"`
	Key         string      `json:"key"`
	NominalTime time.Time   `json:"nominal_time"`
	Status      string      `json:"status"`
	CompletedAt time.Time   `json:"completed_at,omitzero"`
	AutoApprove bool        `json:"auto_approve,omitempty"`
	Steps       []StepState `json:"steps"`
}

// LoadEpisode reads the episode from the ledger; allot.EpisodeNotFound if missing.
func (a *Activities) LoadEpisode(ctx context.Context, in EpisodeRef) (LoadEpisodeResult, error) {
	p, ep, err := a.episode(ctx, in)
	if err != nil {
		return LoadEpisodeResult{}, err
	}
	records, err := a.Ledger.Steps(ctx, p.Name, ep.ID)
	if err != nil {
		return LoadEpisodeResult{}, classify(err)
	}
	done := map[string]ledger.StepRecord{}
	for _, r := range records {
		done[r.Step] = r
	}
	out := LoadEpisodeResult{
		Pipeline:    ep.Pipeline,
		EpisodeID:   ep.ID,
		Period:      ep.Period,
		Sequence:    ep.Sequence,
		Key:         ep.AllocationKey,
		NominalTime: ep.NominalTime,
		Status:      string(ep.Status),
		CompletedAt: ep.CompletedAt,
		AutoApprove: p.AutoApprove,
	}
	for _, s := range p.Steps {
		st := StepState{Name: s.Name, Kind: string(s.Kind), Action: s.Action, Status: allot.StepPending}
		switch {
		case s.Kind == allot.KindPaid:
			if st, err = a.paidStepState(ctx, p.Name, ep.ID, s, st); err != nil {
				return LoadEpisodeResult{}, err
			}
		case s.Kind == allot.KindEffect:
			// An effect's revision is its step's: a reset (after a rework
			// or reassembly) acts again, under a new key.
			if st, err = a.effectStepState(ctx, p.Name, ep.ID, s, done[s.Name].Revision); err != nil {
				return LoadEpisodeResult{}, err
			}
		default:
			r, ok := done[s.Name]
			if !ok {
				break
			}
			st = recordState(s, r)
		}
		st.Run = a.stepRun(s)
		out.Steps = append(out.Steps, st)
	}
	return out, nil
}

// stepRun is how the workflow runs s: nil for steps that are one activity
// of this worker with the default timeouts.
func (a *Activities) stepRun(s pipeline.Step) *StepRun {
	switch s.Kind {
	case allot.KindGo, allot.KindExec:
		return &StepRun{Timeout: s.TimeoutDuration()}
	case allot.KindActivity:
		r := &StepRun{Timeout: s.TimeoutDuration(), Activity: s.Activity, TaskQueue: s.TaskQueue, Retry: s.Retry}
		if d, err := time.ParseDuration(s.Heartbeat); err == nil {
			r.Heartbeat = d
		}
		return r
	case allot.KindPaid, allot.KindEffect:
		if s.Batch {
			return &StepRun{Batch: true}
		}
		v, ok := a.Pipelines.Vendor(s.Vendor)
		if !ok || v.Adapter != pipeline.AdapterActivity {
			if d := a.sendTimeout(vendorOf(s)); d != pipeline.DefaultSendTimeout {
				return &StepRun{SendTimeout: d}
			}
			return nil
		}
		return &StepRun{Vendor: &VendorActivities{
			Name: v.Name, TaskQueue: v.TaskQueue, Submit: v.Activities.Submit, Lookup: v.Activities.Lookup,
			Status: v.Activities.Status, Fetch: v.Activities.Fetch, Quote: v.Activities.Quote, CallTimeout: v.CallTimeout(),
		}}
	}
	return nil
}

func (a *Activities) effectStepState(ctx context.Context, pipelineName, episodeID string, s pipeline.Step, revision int) (StepState, error) {
	st := StepState{Name: s.Name, Kind: string(s.Kind), Action: s.Action, Status: allot.StepPending, Revision: revision}
	t, err := a.Ledger.PaidTask(ctx, ledger.PaidTaskRef{Pipeline: pipelineName, EpisodeID: episodeID, Step: s.Name, Revision: revision})
	if errors.Is(err, ledger.ErrPaidTaskNotFound) {
		return st, nil
	}
	if err != nil {
		return st, classify(err)
	}
	res, err := a.paidResult(ctx, t, s.Kind)
	if err != nil {
		return st, err
	}
	return res.stepState(s), nil
}

func (a *Activities) paidStepState(ctx context.Context, pipelineName, episodeID string, s pipeline.Step, st StepState) (StepState, error) {
	t, err := a.Ledger.LatestPaidTask(ctx, pipelineName, episodeID, s.Name)
	if errors.Is(err, ledger.ErrPaidTaskNotFound) {
		return st, nil
	}
	if err != nil {
		return st, classify(err)
	}
	res, err := a.paidResult(ctx, t, s.Kind)
	if err != nil {
		return st, err
	}
	return res.stepState(s), nil
}

// stepState shows a paid task as its step's state.
func (r PaidTaskResult) stepState(s pipeline.Step) StepState {
	return StepState{
		Name: s.Name, Kind: string(s.Kind), Action: s.Action, Status: r.StepStatus(), TaskState: r.State,
		Artifact: r.Artifact, SHA256: r.SHA256, Revision: r.Revision, RemoteRef: r.RemoteRef,
		CostAmount: r.CostAmount, CostCurrency: r.CostCurrency, Error: r.Error,
	}
}

// StepStatus is the paid task's state as its step's status: a verified
// result is completed, a planned revision is pending.
func (r PaidTaskResult) StepStatus() allot.StepStatus {
	switch {
	case r.State == allot.PaidSucceeded:
		return allot.StepCompleted
	case r.State == allot.PaidSubmitted && r.Kind == allot.KindEffect:
		// An effect is done when the downstream took it.
		return allot.StepCompleted
	case r.State == allot.PaidPlanned:
		return allot.StepPending
	}
	return allot.StepStatus(r.State)
}

// CompleteEpisodeInput marks an episode done at a time the workflow chose.
type CompleteEpisodeInput struct {
	Pipeline    string    `json:"pipeline"`
	EpisodeID   string    `json:"episode_id"`
	CompletedAt time.Time `json:"completed_at"`
	// LedgerID is the ledger the workflow belongs to; "" for workflows
	// started before ledgers had one. A worker on another ledger refuses.
	LedgerID string `json:"ledger_id,omitempty"`
}

// CompleteEpisode marks the episode completed; the first completion time wins.
func (a *Activities) CompleteEpisode(ctx context.Context, in CompleteEpisodeInput) (time.Time, error) {
	if _, _, err := a.episode(ctx, EpisodeRef{Pipeline: in.Pipeline, EpisodeID: in.EpisodeID, LedgerID: in.LedgerID}); err != nil {
		return time.Time{}, err
	}
	ep, err := a.Ledger.CompleteEpisode(ctx, in.Pipeline, in.EpisodeID, in.CompletedAt.UTC())
	if err != nil {
		return time.Time{}, classify(err)
	}
	return ep.CompletedAt, nil
}

// episode resolves the pipeline and loads an existing episode. It is the first
// thing every episode activity does, so a missing episode stops all work.
func (a *Activities) episode(ctx context.Context, ref EpisodeRef) (*pipeline.Pipeline, ledger.Episode, error) {
	if err := a.checkLedger(ref.LedgerID); err != nil {
		return nil, ledger.Episode{}, err
	}
	p, err := a.pipeline(ref.Pipeline)
	if err != nil {
		return nil, ledger.Episode{}, err
	}
	if ref.EpisodeID == "" {
		return nil, ledger.Episode{}, nonRetryable(allot.EpisodeNotFound, "no episode given for pipeline %q: name an existing episode explicitly", p.Name)
	}
	ep, err := a.Ledger.Episode(ctx, p.Name, ref.EpisodeID)
	if err != nil {
		return nil, ledger.Episode{}, classify(err)
	}
	if p, err = a.pinnedPlan(ctx, p, ep); err != nil {
		return nil, ledger.Episode{}, err
	}
	return p, ep, nil
}

// pinnedPlan is the pipeline as the episode runs it: with the step plan
// pinned in the ledger (invariant 14), not the steps configured now. An
// episode allocated before plans were pinned pins the plan it sees first; if
// it had completed by then, only the steps it ran, so that a step added to
// the pipeline later never runs (and charges) for an old episode.
func (a *Activities) pinnedPlan(ctx context.Context, p *pipeline.Pipeline, ep ledger.Episode) (*pipeline.Pipeline, error) {
	plan, err := a.Ledger.EpisodePlan(ctx, p.Name, ep.ID)
	if err != nil {
		return nil, classify(err)
	}
	if plan == "" {
		candidate := p
		if ep.Status == ledger.EpisodeCompleted {
			if candidate, err = a.stepsRun(ctx, p, ep); err != nil {
				return nil, err
			}
		}
		if plan, err = a.Ledger.PinPlan(ctx, p.Name, ep.ID, candidate.Plan()); err != nil {
			return nil, classify(err)
		}
	}
	pinned, err := p.WithPlan(plan)
	if err != nil {
		return nil, nonRetryable(allot.InvalidInput, "episode %s: %v", ep.ID, err)
	}
	return pinned, nil
}

// stepsRun is the pipeline cut to the steps the ledger has a record or a
// paid task of, for an episode that completed before plans were pinned.
func (a *Activities) stepsRun(ctx context.Context, p *pipeline.Pipeline, ep ledger.Episode) (*pipeline.Pipeline, error) {
	records, err := a.Ledger.Steps(ctx, p.Name, ep.ID)
	if err != nil {
		return nil, classify(err)
	}
	tasks, err := a.Ledger.PaidTasks(ctx, p.Name, ep.ID)
	if err != nil {
		return nil, classify(err)
	}
	ran := map[string]bool{}
	for _, r := range records {
		ran[r.Step] = true
	}
	for _, t := range tasks {
		ran[t.Step] = true
	}
	cp := *p
	cp.Steps = nil
	for _, s := range p.Steps {
		if ran[s.Name] {
			cp.Steps = append(cp.Steps, s)
		}
	}
	if len(cp.Steps) == 0 {
		return p, nil
	}
	return &cp, nil
}

// EpisodeOutcomeInput is an episode's outcome as its workflow reports it.
type EpisodeOutcomeInput struct {
	Pipeline  string        `json:"pipeline"`
	EpisodeID string        `json:"episode_id"`
	Outcome   allot.Outcome `json:"outcome"`
	Reason    string        `json:"reason,omitempty"`
	At        time.Time     `json:"at"`
	// LedgerID is the ledger the workflow belongs to; "" for workflows
	// started before ledgers had one. A worker on another ledger refuses.
	LedgerID string `json:"ledger_id,omitempty"`
}

// RecordEpisodeOutcome keeps the episode's current outcome in the ledger, so
// outcomes are counted (starter stats, metrics) without asking Temporal.
func (a *Activities) RecordEpisodeOutcome(ctx context.Context, in EpisodeOutcomeInput) error {
	if _, _, err := a.episode(ctx, EpisodeRef{Pipeline: in.Pipeline, EpisodeID: in.EpisodeID, LedgerID: in.LedgerID}); err != nil {
		return err
	}
	return classify(a.Ledger.RecordEpisodeOutcome(ctx, in.Pipeline, in.EpisodeID, in.Outcome, in.Reason, in.At.UTC()))
}
