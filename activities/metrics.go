package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
)

// allot's counters, emitted through the worker's Temporal metrics handler.
// On Prometheus they carry a _total suffix and the SDK's activity tags.
const (
	MetricRuns              = "allot_runs"               // pipeline, outcome, reason
	MetricAllocations       = "allot_allocations"        // pipeline, decision
	MetricVendorSubmissions = "allot_vendor_submissions" // pipeline, step, result
	MetricCost              = "allot_cost_minor_units"   // pipeline, currency
)

// Results of a paid submission, as MetricVendorSubmissions counts them.
const (
	SubmissionAccepted = "accepted" // the vendor accepted it now
	SubmissionAdopted  = "adopted"  // an earlier, unanswered submission was found and adopted
	SubmissionRefused  = "refused"  // the vendor said no; nothing was accepted
	SubmissionUnknown  = "unknown"  // the vendor cannot tell: the episode waits for an operator
	SubmissionError    = "error"    // no answer: the retry asks the vendor by idempotency key
)

func count(ctx context.Context, name string, n int64, tags map[string]string) {
	activity.GetMetricsHandler(ctx).WithTags(tags).Counter(name).Inc(n)
}

func countSubmission(ctx context.Context, pipeline, step, result string) {
	count(ctx, MetricVendorSubmissions, 1, map[string]string{"pipeline": pipeline, "step": step, "result": result})
}

func countCost(ctx context.Context, pipeline string, amount int64, currency string) {
	if amount > 0 && currency != "" {
		count(ctx, MetricCost, amount, map[string]string{"pipeline": pipeline, "currency": currency})
	}
}
