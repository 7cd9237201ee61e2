package report

import (
	"context"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"allot"
	"allot/pipeline"
	"allot/workflows"
)

// DefaultRunsPageSize is how many executions one visibility request asks
// for. Small pages keep each request well inside the server's deadline
// (1,500 executions in one page of 1000 timed out on the embedded server);
// the listing follows the page tokens to the end.
const DefaultRunsPageSize = 100

// RunsInput selects the ScheduledRun and Episode executions of a pipeline.
type RunsInput struct {
	Pipeline string
	// Since keeps executions started at or after it (zero: all).
	Since time.Time
	// Status keeps executions in one status: running, completed, failed,
	// canceled, terminated, timed_out or continued_as_new ("" = all).
	Status string
	// PageSize is the visibility page size (0: DefaultRunsPageSize).
	PageSize int
}

// RunsResult lists the executions a visibility query found, in the
// server's order (newest first).
type RunsResult struct {
	Pipeline   string      `json:"pipeline"`
	Query      string      `json:"query"`
	Executions []Execution `json:"executions"`
	// Deadlines are the pipeline's deadline and its periods' records,
	// for a pipeline that declares one or has records (starter runs reads
	// them from the ledger; ListRuns leaves them unset).
	Deadlines *DeadlinesResult `json:"deadlines,omitempty"`
}

// Execution is one ScheduledRun or Episode execution.
type Execution struct {
	Type       string    `json:"type"`
	WorkflowID string    `json:"workflow_id"`
	RunID      string    `json:"run_id"`
	Status     string    `json:"status"`
	Outcome    string    `json:"outcome,omitempty"` // AllotOutcome
	Episode    string    `json:"episode,omitempty"` // AllotEpisode
	Period     string    `json:"period,omitempty"`  // AllotPeriod
	StartTime  time.Time `json:"start_time"`
	CloseTime  time.Time `json:"close_time,omitzero"`
}

// executionStatuses are the statuses --status takes, by their visibility
// names.
var executionStatuses = map[string]enumspb.WorkflowExecutionStatus{
	"running":          enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
	"completed":        enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
	"failed":           enumspb.WORKFLOW_EXECUTION_STATUS_FAILED,
	"canceled":         enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED,
	"terminated":       enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED,
	"timed_out":        enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
	"continued_as_new": enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW,
}

// ExecutionStatusNames lists the statuses --status takes.
var ExecutionStatusNames = []string{"running", "completed", "failed", "canceled", "terminated", "timed_out", "continued_as_new"}

// RunsQuery is the visibility query that lists the pipeline's executions;
// the same text works in the Web UI's search box.
func RunsQuery(in RunsInput) (string, error) {
	if err := pipeline.ValidateName(in.Pipeline); err != nil {
		return "", err
	}
	q := fmt.Sprintf(`%s = %q AND (WorkflowType = %q OR WorkflowType = %q)`,
		workflows.PipelineAttr.GetName(), in.Pipeline, workflows.ScheduledRunWorkflow, workflows.EpisodeWorkflow)
	if !in.Since.IsZero() {
		q += fmt.Sprintf(` AND StartTime >= %q`, in.Since.UTC().Format(time.RFC3339Nano))
	}
	if in.Status != "" {
		key := strings.ReplaceAll(strings.ToLower(in.Status), "-", "_")
		st, ok := executionStatuses[key]
		if !ok {
			return "", allot.Errorf(allot.InvalidInput, "status %q is not an execution status: use one of %s", in.Status, strings.Join(ExecutionStatusNames, ", "))
		}
		q += fmt.Sprintf(` AND ExecutionStatus = %q`, statusName(st))
	}
	return q, nil
}

// statusName is the visibility name of a status (Running, TimedOut, ...).
func statusName(st enumspb.WorkflowExecutionStatus) string {
	name := strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_")
	parts := strings.Split(strings.ToLower(name), "_")
	for i, p := range parts {
		parts[i] = strings.ToUpper(p[:1]) + p[1:]
	}
	return strings.Join(parts, "")
}

// ListRuns lists the pipeline's ScheduledRun and Episode executions through
// a visibility query, page by page to the end.
func ListRuns(ctx context.Context, c client.Client, in RunsInput) (RunsResult, error) {
	q, err := RunsQuery(in)
	if err != nil {
		return RunsResult{}, err
	}
	size := in.PageSize
	if size <= 0 {
		size = DefaultRunsPageSize
	}
	out := RunsResult{Pipeline: in.Pipeline, Query: q, Executions: []Execution{}}
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			PageSize: int32(size), NextPageToken: token, Query: q,
		})
		if err != nil {
			return RunsResult{}, fmt.Errorf("list the executions of %s (%s): %w", in.Pipeline, q, err)
		}
		for _, e := range resp.GetExecutions() {
			x := Execution{
				Type:       e.GetType().GetName(),
				WorkflowID: e.GetExecution().GetWorkflowId(),
				RunID:      e.GetExecution().GetRunId(),
				Status:     statusName(e.GetStatus()),
				Outcome:    keyword(e.GetSearchAttributes(), workflows.OutcomeAttr.GetName()),
				Episode:    keyword(e.GetSearchAttributes(), workflows.EpisodeAttr.GetName()),
				Period:     keyword(e.GetSearchAttributes(), workflows.PeriodAttr.GetName()),
			}
			if t := e.GetStartTime(); t != nil {
				x.StartTime = t.AsTime().UTC()
			}
			if t := e.GetCloseTime(); t != nil {
				x.CloseTime = t.AsTime().UTC()
			}
			out.Executions = append(out.Executions, x)
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return out, nil
		}
	}
}

// keyword decodes a Keyword search attribute; "" when absent.
func keyword(sa *commonpb.SearchAttributes, name string) string {
	p := sa.GetIndexedFields()[name]
	if p == nil {
		return ""
	}
	var v string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &v); err != nil {
		return ""
	}
	return v
}
