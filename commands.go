package allot

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A PaidCommandRule says which operator actions a paid step takes while its
// latest revision is in State and the episode is parked on it for Attention
// (an error type above; "" when the step is not the reason the episode is
// parked). This table is the one place that decides it: the Episode
// workflow's update validators refuse everything else at once, before
// anything is written, and the table in docs/operating.md is rendered from it (see
// docs/design.md, "Every parked state has an exit").
type PaidCommandRule struct {
	State     PaidTaskState
	Attention string
	Allowed   []Action
}

// PaidCommandTable lists every (state, attention) pair that can occur. A pair
// that is not listed allows nothing: the step is running, or nothing an
// operator does can help it.
var PaidCommandTable = []PaidCommandRule{
	{PaidPlanned, VendorRejected, []Action{ActionRetry, ActionAbandon}},
	{PaidPlanned, VendorNotConfigured, []Action{ActionRetry, ActionAbandon}},
	// Refused by a budget: nothing was sent. Raising the budget resumes the
	// episode by itself; retry asks the budget again at once.
	{PaidPlanned, BudgetExhausted, []Action{ActionRetry, ActionAbandon}},
	{PaidIntent, OutcomeUnknown, []Action{ActionAdopt, ActionResubmit, ActionRetry, ActionAbandon}},
	// Past the vendor's idempotency horizon a retry would only park again:
	// a person checks the vendor, then adopts, resends or gives up.
	{PaidIntent, IdempotencyHorizonPassed, []Action{ActionAdopt, ActionResubmit, ActionAbandon}},
	{PaidIntent, VendorNotConfigured, []Action{ActionAdopt, ActionRetry, ActionAbandon}},
	// A batch item whose result files are gone may have been billed: it is
	// not sent again, and the vendor has no task to adopt by key.
	{PaidIntent, BatchResultLost, []Action{ActionAbandon}},
	{PaidSubmitted, VendorNotConfigured, []Action{ActionRetry, ActionAbandon}},
	{PaidSubmitted, InvalidRemoteRef, []Action{ActionRetry, ActionAbandon}},
	// A step that waits for its vendor (paused, its breaker open) may wait
	// for good: abandon is its exit (docs/design.md, "Vendor controls").
	{PaidPlanned, AttentionWaitingVendor, []Action{ActionAbandon}},
	{PaidIntent, AttentionWaitingVendor, []Action{ActionAbandon}},
	{PaidSubmitted, AttentionWaitingVendor, []Action{ActionAbandon}},
	{PaidFailed, VendorTaskFailed, []Action{ActionRework, ActionAbandon}},
	{PaidFailed, ResultHashMismatch, []Action{ActionRework, ActionAbandon}},
	// A go, exec or activity step that failed for good shows as failed.
	{PaidFailed, StepFailure, []Action{ActionRetry, ActionAbandon}},
	{PaidFailed, "", []Action{ActionRework}},
	{PaidSucceeded, "", []Action{ActionRework}},
	{PaidAbandoned, "", []Action{ActionRework}},
}

// ActionEffects says what each paid-step action does, for the docs'
// table and the refusal messages.
var ActionEffects = map[Action]string{
	ActionAdopt:    "the vendor's task with this step's idempotency key becomes the step's submission (checked with the vendor first); nothing is charged again",
	ActionResubmit: "sends the task once more with the same idempotency key without asking the vendor first (it cannot be asked); a vendor that honours keys returns the first task",
	ActionRetry:    "runs the step again under the protocol: a task that may have been sent is looked up by its key before anything is sent",
	ActionAbandon:  "gives the task up (abandoned, with the reason); the episode goes on without the step's result",
	ActionRework:   "plans a new revision with a new idempotency key: one more charge",
}

// AttentionWaitingVendor stands, in PaidCommandTable, for a step that is not
// parked but waits for its vendor (stage waiting_vendor).
const AttentionWaitingVendor = string(StageWaitingVendor)

// PaidActionsAllowed lists the actions a paid step takes in state with
// attention; nil if none.
func PaidActionsAllowed(state PaidTaskState, attention string) []Action {
	for _, r := range PaidCommandTable {
		if r.State == state && r.Attention == attention {
			return r.Allowed
		}
	}
	return nil
}

// CheckPaidAction refuses an action the table does not allow, with a
// message that names the step's state and what it does allow.
func CheckPaidAction(action Action, step string, state PaidTaskState, attention string) error {
	allowed := PaidActionsAllowed(state, attention)
	if slices.Contains(allowed, action) {
		return nil
	}
	where := fmt.Sprintf("step %s is %s", step, state)
	if attention == AttentionWaitingVendor {
		where += " and waits for its vendor"
	} else if attention != "" {
		where += " and the episode is parked on it (" + attention + ")"
	} else if state == PaidPlanned || state == PaidIntent || state == PaidSubmitted {
		where += " and running"
	}
	if len(allowed) == 0 {
		return fmt.Errorf("%s: it takes no operator command now; wait until it finishes or parks", where)
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return fmt.Errorf("%s: %s is not allowed; it takes %s", where, action, strings.Join(names, ", "))
}

// EpisodeActionAllowed says whether an episode-wide action (approve, reject,
// reassemble) fits the episode's stage: approve and reject only at the
// approval gate; reassemble whenever the episode is idle. approvals are the
// statuses of the episode's approval steps in plan order (nil if unknown):
// they only shape the refusal, so that an approve after the gate says the
// episode is past approval instead of asking to wait for a gate that will
// not come.
func EpisodeActionAllowed(action Action, stage Stage, approvals []StepStatus) error {
	switch action {
	case ActionApprove, ActionReject:
		if stage == StageWaitingApproval {
			return nil
		}
		if decided := pastApproval(approvals); decided != "" {
			return fmt.Errorf("the episode is already %s and past approval (it is %s): there is nothing to %s", decided, stage, action)
		}
		return fmt.Errorf("the episode is %s, not waiting for approval: %s it once it reaches the approval step", stage, action)
	case ActionReassemble:
		switch stage {
		case StageWaitingApproval, StageNeedsAttention, StageCompleted, StageRejected:
			return nil
		}
		return fmt.Errorf("the episode is %s: reassemble it once it is idle (waiting for approval, needing attention, completed or rejected)", stage)
	}
	return fmt.Errorf("%s is not an episode-wide action", action)
}

// CheckReassemble refuses a reassemble that means nothing: it runs the
// episode's assembly (its pipeline's assemble step, "" if it has none) and
// the steps after it again, so the assembly must have run (status is the
// assemble step's). An episode parked before its assembly gets nothing from
// it but a recorded decision.
func CheckReassemble(assembleStep string, status StepStatus) error {
	if assembleStep == "" {
		return errors.New("its pipeline has no assemble step: there is nothing to reassemble")
	}
	switch status {
	case "", StepPending, StepReset:
		return fmt.Errorf("its step %s has not run yet, so nothing was assembled: reassemble runs the assembly again once it has run", assembleStep)
	}
	return nil
}

// pastApproval is the last decision of approvals when every approval step
// is decided (approved or rejected), else "": an approval is still to come.
func pastApproval(approvals []StepStatus) StepStatus {
	var last StepStatus
	for _, s := range approvals {
		if s != StepApproved && s != StepRejected {
			return ""
		}
		last = s
	}
	return last
}

// PaidCommandTableMarkdown renders the command table for docs/operating.md (a test
// keeps that copy equal to it).
func PaidCommandTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| paid task state | parked for | commands allowed |\n|---|---|---|\n")
	for _, r := range PaidCommandTable {
		attention := r.Attention
		switch attention {
		case "":
			attention = "(not parked)"
		case AttentionWaitingVendor:
			attention = "(waiting for its vendor: `waiting_vendor`)"
		}
		names := make([]string, len(r.Allowed))
		for i, a := range r.Allowed {
			names[i] = "`" + string(a) + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.State, attention, strings.Join(names, ", "))
	}
	b.WriteString("| `planned`, `intent`, `submitted` | (not parked) | none: the step is running |\n")
	b.WriteString("\n| command | what it does |\n|---|---|\n")
	for _, a := range []Action{ActionAdopt, ActionResubmit, ActionRetry, ActionAbandon, ActionRework} {
		fmt.Fprintf(&b, "| `%s` | %s |\n", a, ActionEffects[a])
	}
	return b.String()
}

// ShellQuote quotes s as one word for a POSIX shell, for the commands allot
// prints (workflows.SplitCommand reads it back).
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
