// Package allot is the vocabulary of allot: every word of the domain that
// more than one layer speaks (outcomes, stages, step statuses, paid-task
// states, operator actions, error types), defined once. The ledger stores
// these strings, the workflows put them in histories, search attributes and
// queries, and the CLI prints them, so their values never change: a renamed
// value would break saved histories and stored rows. See docs/design.md,
// "Vocabulary".
//
// Beside the names, the rules that go with them and that every layer must
// apply alike: what each step kind implies (stepkind.go), money and its
// currencies (money.go, currency.go), keys and their shapes (keys.go), the
// idempotency key of a paid task (idempotency.go), the limits of an
// operator's free text and who acted (actor.go), and every command line
// allot prints for an operator (commandlines.go, commands.go). It imports
// nothing of allot's, so every layer can import it; it reads nothing but
// the name of the user who acts.
package allot

// Stage is where an Episode workflow is, as its state query shows it.
type Stage string

// Episode stages. Every stage but StageLoading is also the episode's outcome
// (see Stage.Outcome).
const (
	StageLoading Stage = "loading"
	StageRunning Stage = "running"
	// StageRetrying: a step's activity keeps failing with errors a retry
	// may fix; the episode goes on trying and says since when.
	StageRetrying        Stage = "retrying"
	StageWaitingApproval Stage = "waiting_approval"
	// StageWaitingVendor: a paid or effect step waits for its vendor (an
	// operator's pause, an open breaker, its shared limits) and goes on
	// by itself when the vendor takes requests again; its reason is one
	// of the ReasonVendor* below.
	StageWaitingVendor Stage = "waiting_vendor"
	// StageWaitingBatch: a paid step in batch mode waits for the vendor's
	// batch that carries its task (hours, at the batch price); no worker
	// slot is held meanwhile.
	StageWaitingBatch   Stage = "waiting_batch"
	StageNeedsAttention Stage = "needs_attention"
	StageCompleted      Stage = "completed"
	StageRejected       Stage = "rejected"
	StageFailed         Stage = "failed"
)

// Outcome is how a ScheduledRun ended, or how an episode stands. It is the
// value of the AllotOutcome search attribute and of the ledger's outcome
// columns, always stored with a reason.
type Outcome string

// Outcomes of a ScheduledRun.
const (
	OutcomeAllocated Outcome = "allocated" // reason ReasonNewEpisode
	OutcomeReused    Outcome = "reused"    // reason ReasonKeyBound
	OutcomeSkipped   Outcome = "skipped"   // reason ReasonCapReached, ...
)

// Outcomes of an episode: its stages, as outcomes. OutcomeFailed is also a
// ScheduledRun's outcome (reason: the error type).
const (
	OutcomeRunning         = Outcome(StageRunning)
	OutcomeRetrying        = Outcome(StageRetrying)
	OutcomeWaitingApproval = Outcome(StageWaitingApproval)
	OutcomeWaitingVendor   = Outcome(StageWaitingVendor)
	OutcomeWaitingBatch    = Outcome(StageWaitingBatch)
	OutcomeNeedsAttention  = Outcome(StageNeedsAttention)
	OutcomeCompleted       = Outcome(StageCompleted)
	OutcomeRejected        = Outcome(StageRejected)
	OutcomeFailed          = Outcome(StageFailed)
)

// Outcome is the episode outcome a stage shows as; "" for StageLoading.
func (s Stage) Outcome() Outcome {
	if s == StageLoading {
		return ""
	}
	return Outcome(s)
}

// Reasons of an episode's outcome where no error gives one. A parked,
// retrying or failed episode's reason is its error type.
const (
	ReasonInProgress       = "in_progress"       // running: its steps are under way
	ReasonAwaitingApproval = "awaiting_approval" // waiting_approval: at the gate
	ReasonStepsCompleted   = "steps_completed"   // completed: every step of its plan
	ReasonApprovalRejected = "approval_rejected" // rejected: an operator rejected it at the gate
)

// Reasons of the waiting_vendor stage (docs/design.md, "Vendor controls"):
// why the vendor takes no request of the step now.
const (
	ReasonVendorPaused  = "vendor_paused"  // an operator paused it (starter vendor pause)
	ReasonVendorTripped = "vendor_tripped" // its breaker is open, or its one probe is under way
	ReasonVendorBusy    = "vendor_busy"    // max_in_flight requests are in flight at it
	ReasonVendorRate    = "vendor_rate"    // its rate's submissions are spent for now
	// ReasonVendorBatchQueue: its unfinished batches hold its
	// batch_max_queued_items items; a batch's create waits (its items'
	// episodes show waiting_batch, batch_queued).
	ReasonVendorBatchQueue = "vendor_batch_queue"
)

// Reasons of StageWaitingBatch: where the step's task is on its way
// through a vendor batch.
const (
	ReasonBatchQueued  = "batch_queued"  // it waits for a batch to close (batch_max_items or batch_max_wait)
	ReasonBatchRunning = "batch_running" // the vendor's batch that carries it runs
)

// Reason is the reason an episode at stage s stands there when no error
// names one; "" for the stages whose reason is an error type.
func (s Stage) Reason() string {
	switch s {
	case StageRunning:
		return ReasonInProgress
	case StageWaitingApproval:
		return ReasonAwaitingApproval
	case StageCompleted:
		return ReasonStepsCompleted
	case StageRejected:
		return ReasonApprovalRejected
	}
	return ""
}

// Reasons of a ScheduledRun's outcome. A failed run's reason is its error
// type (see the error types below).
const (
	ReasonNewEpisode = "new_episode" // allocated: the key got a new episode
	ReasonKeyBound   = "key_bound"   // reused: the key already had its episode
	ReasonCapReached = "cap_reached" // skipped: the period holds its cap of episodes
	// ReasonNoReadyInput: skipped, a pipeline that consumes inputs had
	// none ready to claim. Like cap_reached, a normal skip.
	ReasonNoReadyInput = "no_ready_input"
	// ReasonMissedCatchUp: skipped, the schedule's time passed while
	// nothing ran (workers or server down, or the schedule paused) and the
	// pipeline's catch_up policy does not run it (docs/design.md,
	// "Catch-up"). The key stays free: a later run of it allocates.
	ReasonMissedCatchUp = "missed_catch_up"
)

// Catch-up policies: what a pipeline's schedule runs of the times it
// missed (pipeline.CatchUp parses them; "up_to:N" carries its N).
const (
	CatchUpSkip   = "skip"   // none of them
	CatchUpLatest = "latest" // the latest only
	CatchUpAll    = "all"    // every one (the default)
	CatchUpUpTo   = "up_to"  // the latest N
)

// OutcomeStalled is how stats and the allot_episodes_stalled gauge show an
// episode whose step has been retrying longer than its pipeline's
// stall_after. It is a view, never stored: the ledger keeps "retrying" and
// since when.
const OutcomeStalled Outcome = "stalled"

// NominalTimeSource says where a ScheduledRun's nominal time came from.
type NominalTimeSource string

// Nominal time sources.
const (
	NominalFromInput     NominalTimeSource = "input"      // the start's input named it
	NominalFromSchedule  NominalTimeSource = "schedule"   // TemporalScheduledStartTime
	NominalFromKey       NominalTimeSource = "key"        // the key's own time (<pipeline>/scheduled-<time>)
	NominalFromStartTime NominalTimeSource = "start_time" // a Schedule's start without TemporalScheduledStartTime
)

// StepStatus is where one step of an episode is. A paid step shows its
// latest revision's paid-task state, except that succeeded shows as
// completed and planned as pending.
type StepStatus string

// Step statuses.
const (
	StepPending   StepStatus = "pending"
	StepCompleted StepStatus = "completed"
	StepIntent               = StepStatus(PaidIntent)    // paid: the outcome is unknown until the vendor is asked
	StepSubmitted            = StepStatus(PaidSubmitted) // paid: the vendor has it
	StepFailed               = StepStatus(PaidFailed)    // paid: the vendor says it failed
	StepAbandoned            = StepStatus(PaidAbandoned) // paid: an operator gave it up
	StepApproved  StepStatus = "approved"                // approval: approved
	StepRejected  StepStatus = "rejected"                // approval: rejected
	// StepReset: reopened by a rework or a reassembly; the step runs
	// again, with the next revision.
	StepReset StepStatus = "reset"
)

// PaidTaskState is where one paid task (episode, step, revision) is. The
// transitions between them are in internal/ledger/paid_tasks.go and docs/design.md.
type PaidTaskState string

// Paid-task states.
const (
	PaidPlanned   PaidTaskState = "planned"   // the revision exists; nothing sent
	PaidIntent    PaidTaskState = "intent"    // written before the vendor is called
	PaidSubmitted PaidTaskState = "submitted" // the vendor accepted; the remote reference is written
	PaidSucceeded PaidTaskState = "succeeded" // the result is downloaded and verified
	PaidFailed    PaidTaskState = "failed"    // the vendor reported failure, or the result did not verify
	PaidAbandoned PaidTaskState = "abandoned" // an operator gave it up
)

// BatchState is where one vendor batch is in the ledger (docs/design.md,
// "Batches"). The moves are in internal/ledger/batches.go.
type BatchState string

// Batch states.
const (
	BatchOpen       BatchState = "open"        // its key and items are written; no batch is known at the vendor yet
	BatchCreated    BatchState = "created"     // the vendor made it: its ID is written
	BatchEnded      BatchState = "ended"       // it ended at the vendor and every item's outcome is recorded
	BatchNotCreated BatchState = "not_created" // the vendor refused the create (its items went back to the queue), or no item was left to send
)

// BatchItemOutcome is what became of one item of an ended batch.
type BatchItemOutcome string

// Batch item outcomes.
const (
	BatchItemSucceeded    BatchItemOutcome = "succeeded"     // its result and cost are recorded
	BatchItemFailed       BatchItemOutcome = "failed"        // the vendor says it failed
	BatchItemNotProcessed BatchItemOutcome = "not_processed" // expired or cancelled before it ran: safe to send again under its key
	BatchItemResultLost   BatchItemOutcome = "result_lost"   // the files that would say are gone: it may have been billed, so it parks
)

// Action is an operator's command on an episode, as the ledger records it.
type Action string

// Operator actions.
const (
	ActionApprove    Action = "approve"
	ActionReject     Action = "reject"
	ActionRework     Action = "rework"
	ActionReassemble Action = "reassemble"
	ActionAdopt      Action = "adopt"
	ActionResubmit   Action = "resubmit"
	ActionAbandon    Action = "abandon"
	// ActionRetry runs a parked step again under the paid protocol once its
	// cause is fixed: a task that may have reached the vendor is looked up
	// by its idempotency key before anything is sent again.
	ActionRetry Action = "retry"
)

// Actions lists every operator action.
var Actions = []Action{ActionApprove, ActionReject, ActionRework, ActionReassemble, ActionAdopt, ActionResubmit, ActionAbandon, ActionRetry}

// StepAction reports whether a acts on one paid step and so must name it.
func (a Action) StepAction() bool {
	switch a {
	case ActionRework, ActionAdopt, ActionResubmit, ActionAbandon, ActionRetry:
		return true
	}
	return false
}

// LedgerMemo is the memo field of the workflows allot starts that names the
// identity of their ledger, so that ScheduledRun and `starter check` can
// tell an episode of another ledger on the same namespace.
const LedgerMemo = "allot_ledger"
