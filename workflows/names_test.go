package workflows

import (
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"allot"
)

func TestStartOptionsAttachToRunningAndNeverRerunFinished(t *testing.T) {
	nominal := time.Date(2026, 8, 3, 2, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	key := allot.AllocationKey("weekly", nominal)
	o := ScheduledRunStartOptions(enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY, ScheduledRunStart{Pipeline: "weekly", Run: allot.RunKey{Key: key, Nominal: nominal}, TaskQueue: "allot"})
	if o.ID != key || o.TaskQueue != "allot" {
		t.Errorf("ID %q, task queue %q", o.ID, o.TaskQueue)
	}
	if o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING ||
		o.WorkflowIDReusePolicy != enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY ||
		!o.WorkflowExecutionErrorWhenAlreadyStarted {
		t.Errorf("policies: conflict %v, reuse %v, error when started %v", o.WorkflowIDConflictPolicy, o.WorkflowIDReusePolicy, o.WorkflowExecutionErrorWhenAlreadyStarted)
	}
	if o.StaticSummary != "weekly run for 2026-08-03T00:00:00Z" {
		t.Errorf("summary %q, want the nominal time in UTC", o.StaticSummary)
	}
	if v, ok := o.TypedSearchAttributes.GetKeyword(PipelineAttr); !ok || v != "weekly" || o.TypedSearchAttributes.Size() != 1 {
		t.Errorf("search attributes %v, want only AllotPipeline=weekly", o.TypedSearchAttributes)
	}
	if s := ScheduledRunStartOptions(enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, ScheduledRunStart{Pipeline: "weekly", Run: allot.RunKey{Key: "weekly/manual"}, TaskQueue: "allot"}).StaticSummary; s != "weekly run" {
		t.Errorf("summary without a nominal time %q", s)
	}
}

// The reuse policy is the caller's: the builder passes it through, and
// every other option is the same for allot's own starts of a missed time.
func TestScheduledRunStartOptionsTakeTheReusePolicyGiven(t *testing.T) {
	nominal := time.Date(2026, 8, 3, 0, 0, 0, 0, time.UTC)
	run := allot.RunKey{Key: allot.AllocationKey("weekly", nominal), Nominal: nominal}
	o := ScheduledRunStartOptions(enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, ScheduledRunStart{Pipeline: "weekly", Run: run, TaskQueue: "allot", Priority: 4, Summary: "weekly missed run (catch-up)"})
	if o.WorkflowIDReusePolicy != enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE || o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING {
		t.Errorf("policies: conflict %v, reuse %v", o.WorkflowIDConflictPolicy, o.WorkflowIDReusePolicy)
	}
	if o.ID != run.Key || o.Priority.PriorityKey != 4 || o.StaticSummary != "weekly missed run (catch-up)" {
		t.Errorf("options %+v", o)
	}
}
