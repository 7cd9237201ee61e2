// Package activities holds the side effects of allot's workflows:
//
//   - the ledger's side of a run: allocation, loading and completing
//     episodes, outcomes, operators' decisions (activities.go, episode.go,
//     decisions.go);
//   - the steps that run code (go, exec, activity) and their artifact
//     files (steps.go);
//   - the paid protocol's phases and its calls to vendors, with their
//     credentials (paid.go, protocol.go), the vendor gate every request
//     asks first (vendor_gate.go) and the budgets' room (budgets.go);
//   - vendor batches: open, create once per key, poll, and settle each
//     item once (batch.go);
//   - the catch-up sweep's decision and the period deadlines' plan and
//     judgement (catchup.go, deadlines.go);
//   - the errors' classification at the activity boundary (errors.go) and
//     allot's metrics (metrics.go).
//
// Each activity is a method of Activities, registered once under its
// method name (saved histories name them); workflows name them through a
// nil pointer.
package activities

import (
	"context"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"allot"
	"allot/internal/deadline"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/pipeline"
	"allot/step"
)

// Activities holds what the activities depend on.
type Activities struct {
	Ledger       *ledger.Ledger
	Pipelines    *pipeline.Set
	ArtifactsDir string

	// Credentials and NewVendor reach the paid vendor. They are used only
	// inside paid activities, after the episode check.
	Credentials  paidvendor.CredentialsSource
	NewVendor    paidvendor.ClientFactory
	PollInterval time.Duration // between vendor status polls; default 2s
	// BatchLookOnly, when set, overrides every vendor's batch_list_lag
	// (how long after a batch create whose outcome is unknown only the
	// vendor's list is read): for tests.
	BatchLookOnly time.Duration
	// EnqueueBatch hands a queued batch item to its vendor's collector
	// (the worker sets it to workflows.EnqueueBatchItem); nil: this
	// worker runs no batch steps.
	EnqueueBatch func(ctx context.Context, e BatchEnqueue) error
	// BatchPollEvery, when set, overrides every vendor's batch_poll_every
	// (how often a collector asks the vendor about a batch it waits on):
	// for tests.
	BatchPollEvery time.Duration

	// Temporal, when set, lets VerifyEpisodeLedger describe workflows.
	Temporal client.Client

	// Vendors are the named vendors this worker calls itself (http and go
	// adapters), by name; steps without a vendor use Credentials and
	// NewVendor.
	Vendors map[string]Vendor

	// Steps are the Go steps this worker runs (kind "go", and "local" for
	// the built-in ones it does not override), by name.
	Steps map[string]step.Func
	// SecretEnv names environment variables that hold credentials (the
	// vendors' api_key_env): exec steps never see them.
	SecretEnv []string

	// Deadlines plans and judges the periods of the pipelines that
	// declare a deadline, for the DeadlineWatch workflow.
	Deadlines *deadline.Watcher
}

// AllocateInput asks for the episode owned by one logical run.
type AllocateInput struct {
	Pipeline    string    `json:"pipeline"`
	Key         string    `json:"key"`
	NominalTime time.Time `json:"nominal_time"`
	// LedgerID is the ledger the workflow belongs to; "" for workflows
	// started before ledgers had one. A worker on another ledger refuses.
	LedgerID string `json:"ledger_id,omitempty"`
	// RunID is the asking ScheduledRun's run ID: the run that allocates an
	// episode gets its own answer again if the first reply was lost (a
	// retry of the activity is the same run); "" asks anonymously.
	RunID string `json:"run_id,omitempty"`
}

// AllocateResult is the ledger's decision for a key.
type AllocateResult struct {
	Decision  allot.Outcome `json:"decision"` // allocated | reused | skipped
	Reason    string        `json:"reason"`
	EpisodeID string        `json:"episode_id,omitempty"`
	Period    string        `json:"period"`
	Sequence  int           `json:"sequence"`
	// LedgerID is the identity of the ledger that decided: the workflows
	// started for the episode carry it.
	LedgerID string `json:"ledger_id,omitempty"`
	// Input is the reference of the input the episode claimed, for
	// pipelines that consume inputs.
	Input string `json:"input,omitempty"`
}

// Allocate binds the key to an episode (or finds the one it is bound to) in
// one ledger transaction under the pipeline's lock.
func (a *Activities) Allocate(ctx context.Context, in AllocateInput) (AllocateResult, error) {
	if err := a.checkLedger(in.LedgerID); err != nil {
		return AllocateResult{}, err
	}
	p, err := a.pipeline(in.Pipeline)
	if err != nil {
		return AllocateResult{}, err
	}
	if err := allot.ValidateAllocationKey(in.Key); err != nil {
		return AllocateResult{}, classify(err)
	}
	if in.NominalTime.IsZero() {
		return AllocateResult{}, nonRetryable(allot.InvalidInput, "allocation for key %q has no nominal time", in.Key)
	}
	if err := p.CheckNominalTime(in.NominalTime, time.Now()); err != nil {
		return AllocateResult{}, nonRetryable(allot.InvalidInput, "allocation for key %q: %v", in.Key, err)
	}
	period := p.PeriodOf(in.NominalTime)
	res, err := a.Ledger.Allocate(ctx, ledger.AllocateInput{
		Pipeline:     p.Name,
		Key:          in.Key,
		Period:       period,
		NominalTime:  in.NominalTime.UTC(),
		MaxPerPeriod: p.MaxPerPeriod,
		RunID:        in.RunID,
		ClaimInput:   p.ClaimsInputs(),
	})
	if err != nil {
		return AllocateResult{}, classify(err)
	}
	out := AllocateResult{
		Decision:  allot.Outcome(res.Decision),
		Reason:    res.Reason,
		EpisodeID: res.Episode.ID,
		Period:    period,
		Sequence:  -1,
		LedgerID:  a.Ledger.ID(),
	}
	if res.Decision != ledger.DecisionSkipped {
		out.Period = res.Episode.Period
		out.Sequence = res.Episode.Sequence
	}
	if res.Input != nil {
		out.Input = res.Input.Ref
	}
	count(ctx, MetricAllocations, 1, map[string]string{"pipeline": p.Name, "decision": string(out.Decision)})
	activity.GetLogger(ctx).Info("allocation decided",
		"pipeline", p.Name, "key", in.Key, "decision", out.Decision, "reason", out.Reason, "episode", out.EpisodeID)
	return out, nil
}

// RecordRunOutcomeInput is how one ScheduledRun ended.
type RecordRunOutcomeInput struct {
	Pipeline          string                  `json:"pipeline"`
	Key               string                  `json:"key"`
	RunID             string                  `json:"run_id"`
	NominalTime       time.Time               `json:"nominal_time"`
	NominalTimeSource allot.NominalTimeSource `json:"nominal_time_source"`
	Outcome           allot.Outcome           `json:"outcome"`
	Reason            string                  `json:"reason"`
	EpisodeID         string                  `json:"episode_id,omitempty"`
	Period            string                  `json:"period,omitempty"`
	Sequence          int                     `json:"sequence"`
	RecordedAt        time.Time               `json:"recorded_at"`
	// LedgerID is the ledger the workflow belongs to; "" for workflows
	// started before ledgers had one. A worker on another ledger refuses.
	LedgerID string `json:"ledger_id,omitempty"`
}

// RecordRunOutcome stores the run's outcome; retries overwrite, never add.
// The run is counted in the metrics once, by the write that inserted it.
func (a *Activities) RecordRunOutcome(ctx context.Context, in RecordRunOutcomeInput) error {
	if err := a.checkLedger(in.LedgerID); err != nil {
		return err
	}
	inserted, err := a.Ledger.RecordRunOutcome(ctx, ledger.RunOutcome{
		Pipeline:          in.Pipeline,
		AllocationKey:     in.Key,
		RunID:             in.RunID,
		NominalTime:       in.NominalTime.UTC(),
		NominalTimeSource: in.NominalTimeSource,
		Outcome:           in.Outcome,
		Reason:            in.Reason,
		EpisodeID:         in.EpisodeID,
		Period:            in.Period,
		Sequence:          in.Sequence,
		RecordedAt:        in.RecordedAt.UTC(),
	})
	if err != nil {
		return classify(err)
	}
	if inserted {
		count(ctx, MetricRuns, 1, map[string]string{"pipeline": in.Pipeline, "outcome": string(in.Outcome), "reason": in.Reason})
	}
	return nil
}

func (a *Activities) pipeline(name string) (*pipeline.Pipeline, error) {
	if err := pipeline.ValidateName(name); err != nil {
		return nil, nonRetryable(allot.InvalidPipelineName, "%v", err)
	}
	p, err := a.Pipelines.Get(name)
	if err != nil {
		return nil, classify(err)
	}
	return p, nil
}

// VerifyEpisodeLedgerInput names an Episode workflow and the ledger it
// should belong to.
type VerifyEpisodeLedgerInput struct {
	WorkflowID string `json:"workflow_id"`
	LedgerID   string `json:"ledger_id"`
}

// VerifyEpisodeLedger checks that an Episode workflow that already exists
// was started for this ledger (its memo names the ledger): two ledgers on
// one namespace have episodes of the same IDs, and one of them would
// otherwise wait forever for an Episode the other runs. An Episode without
// the memo (started before ledgers had an identity) is accepted.
func (a *Activities) VerifyEpisodeLedger(ctx context.Context, in VerifyEpisodeLedgerInput) error {
	if a.Temporal == nil || in.LedgerID == "" {
		return nil
	}
	desc, err := a.Temporal.DescribeWorkflowExecution(ctx, in.WorkflowID, "")
	if err != nil {
		return fmt.Errorf("describe workflow %s: %w", in.WorkflowID, err)
	}
	owner := LedgerOfMemo(desc.GetWorkflowExecutionInfo().GetMemo().GetFields())
	if owner == "" || owner == in.LedgerID {
		return nil
	}
	return nonRetryable(allot.LedgerMismatch, "episode workflow %s belongs to ledger %s, not to this run's ledger %s: two ledgers serve one namespace and task queue, and the episode this ledger allocated will never run; give each ledger its own task queue (ALLOT_TASK_QUEUE) or namespace",
		in.WorkflowID, owner, in.LedgerID)
}

// LedgerOfMemo is the ledger a workflow's memo names (allot.LedgerMemo);
// "" for a workflow started before ledgers had one, or an unreadable memo.
func LedgerOfMemo(fields map[string]*commonpb.Payload) string {
	f, ok := fields[allot.LedgerMemo]
	if !ok {
		return ""
	}
	var owner string
	if err := converter.GetDefaultDataConverter().FromPayload(f, &owner); err != nil {
		return ""
	}
	return owner
}
