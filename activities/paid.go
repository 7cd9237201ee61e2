package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"

	"allot"
	"allot/artifacts"
	"allot/internal/ledger"
	"allot/paidvendor"
)

// PaidTaskInput names one paid task: (episode, step, revision).
type PaidTaskInput struct {
	Pipeline  string `json:"pipeline"`
	EpisodeID string `json:"episode_id"`
	Step      string `json:"step"`
	Revision  int    `json:"revision"`
	// LedgerID is the ledger the workflow belongs to; "" for workflows
	// started before ledgers had one. A worker on another ledger refuses.
	LedgerID string `json:"ledger_id,omitempty"`
}

// PaidTaskResult is the ledger's view of a paid task after the activity.
type PaidTaskResult struct {
	Step           string              `json:"step"`
	Kind           allot.StepKind      `json:"kind,omitempty"` // paid (or "" from older workers) or effect
	Revision       int                 `json:"revision"`
	State          allot.PaidTaskState `json:"state"`
	IdempotencyKey string              `json:"idempotency_key"`
	RemoteRef      string              `json:"remote_ref,omitempty"`
	CostAmount     int64               `json:"cost_amount,omitempty"`
	CostCurrency   string              `json:"cost_currency,omitempty"`
	Artifact       string              `json:"artifact,omitempty"`
	SHA256         string              `json:"sha256,omitempty"`
	Error          string              `json:"error,omitempty"`
}

// attemptToken names this activity attempt: the owner of the intents it
// writes. A retry is another attempt, so it never mistakes an intent an
// earlier attempt wrote (and may have sent) for its own.
func attemptToken(ctx context.Context) string {
	info := activity.GetInfo(ctx)
	// The random part keeps two executions apart even if Temporal's
	// coordinates coincide (a zombie of the same attempt, a test).
	return fmt.Sprintf("%s/%s/%s#%d/%s", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID, info.Attempt, uuid.NewString())
}

// refused reports a definite refusal: the vendor did not accept the task.
func refused(err error) bool {
	if errors.Is(err, paidvendor.ErrUnauthorized) || errors.Is(err, paidvendor.ErrInvalidRequest) {
		return true
	}
	var he *paidvendor.HTTPError
	return errors.As(err, &he) && he.StatusCode >= 400 && he.StatusCode < 500 &&
		he.StatusCode != 409 && he.StatusCode != 429 && he.StatusCode != 408
}

// recordSubmission writes the vendor's reference and cost; the cost is
// counted in the metrics only by what this write added to the ledger (a
// retried or repeated write adds nothing).
func (a *Activities) recordSubmission(ctx context.Context, ref ledger.PaidTaskRef, t paidvendor.Task, kind allot.StepKind) (PaidTaskResult, error) {
	sub := ledger.Submission{PaidTaskRef: ref, RemoteRef: t.ID, Amount: t.Cost.Amount, Currency: t.Cost.Currency}
	if kind == allot.KindEffect {
		// An effect costs nothing; whatever the downstream reports is not
		// a charge.
		sub.Amount, sub.Currency = 0, ""
	}
	task, added, err := a.Ledger.RecordSubmissionAdded(ctx, sub)
	if err != nil {
		return PaidTaskResult{}, classify(err)
	}
	countCost(ctx, ref.Pipeline, added, sub.Currency)
	return a.paidResult(ctx, task, kind)
}

// AwaitPaidTask polls the vendor by reference, heartbeating, until the task
// ends; then it downloads the result to the episode's artifact folder
// (temporary file, fsync, rename, directory fsync), checks its sha256 against
// the vendor's, and records it.
func (a *Activities) AwaitPaidTask(ctx context.Context, in PaidTaskInput) (PaidTaskResult, error) {
	res, err := a.awaitPaidTask(ctx, in)
	return res, a.withTaskState(ctx, in.ref(), err)
}

// ref names the paid task of in.
func (in PaidTaskInput) ref() ledger.PaidTaskRef {
	return ledger.PaidTaskRef{Pipeline: in.Pipeline, EpisodeID: in.EpisodeID, Step: in.Step, Revision: in.Revision}
}

func (a *Activities) awaitPaidTask(ctx context.Context, in PaidTaskInput) (PaidTaskResult, error) {
	p, ep, step, err := a.paidStep(ctx, in)
	if err != nil {
		return PaidTaskResult{}, err
	}
	ref := ledger.PaidTaskRef{Pipeline: p.Name, EpisodeID: ep.ID, Step: step.Name, Revision: in.Revision}
	task, err := a.Ledger.PaidTask(ctx, ref)
	if err != nil {
		return PaidTaskResult{}, classify(err)
	}
	switch task.State {
	case allot.PaidSucceeded:
		if sum, err := artifacts.SHA256File(task.Artifact); err == nil && sum == task.SHA256 {
			return a.paidResult(ctx, task, allot.KindPaid)
		}
		// The recorded file is gone or damaged: fetch it again below.
	case allot.PaidSubmitted:
	case allot.PaidFailed:
		return PaidTaskResult{}, nonRetryable(allot.VendorTaskFailed, "vendor task %s for step %s revision %d failed: %s", task.RemoteRef, step.Name, in.Revision, task.Error)
	default:
		return PaidTaskResult{}, nonRetryable(allot.InvalidInput, "paid task %s/%s step %s revision %d is %s, not submitted: submit it first", p.Name, ep.ID, step.Name, in.Revision, task.State)
	}
	vendor, err := a.client(ctx, step.Vendor)
	if err != nil {
		return PaidTaskResult{}, err
	}
	// Each poll and the download pass the vendor's gate (vendor_gate.go).
	gate := vendorGateOf{a: a, vendor: vendorOf(step), holder: attemptToken(ctx) + "/poll"}
	for {
		pass, err := gate.enter(ctx)
		if err != nil {
			return PaidTaskResult{}, err
		}
		vt, err := vendor.Task(ctx, task.RemoteRef)
		pass.observe(err)
		pass.leave(ctx)
		switch {
		case errors.Is(err, paidvendor.ErrInvalidTaskID) || errors.Is(err, paidvendor.ErrNotFound):
			return PaidTaskResult{}, nonRetryable(allot.InvalidRemoteRef, "vendor has no task %q for step %s: %v", task.RemoteRef, step.Name, err)
		case errors.Is(err, paidvendor.ErrUnauthorized):
			return PaidTaskResult{}, nonRetryable(allot.VendorNotConfigured, "the vendor refused this worker's API key while polling task %s of step %s: %v", task.RemoteRef, step.Name, err)
		case err != nil:
			return PaidTaskResult{}, fmt.Errorf("poll vendor task %s: %w", task.RemoteRef, err)
		}
		activity.RecordHeartbeat(ctx, string(vt.Status))
		switch vt.Status {
		case paidvendor.StatusSucceeded:
			pass, err := gate.enter(ctx)
			if err != nil {
				return PaidTaskResult{}, err
			}
			res, err := a.download(ctx, ref, task, vt, vendor, pass)
			pass.leave(ctx)
			return res, err
		case paidvendor.StatusFailed:
			if _, err := a.Ledger.RecordPaidFailure(ctx, ref, task.RemoteRef, vt.Error); err != nil {
				return PaidTaskResult{}, classify(err)
			}
			return PaidTaskResult{}, nonRetryable(allot.VendorTaskFailed, "vendor task %s for step %s revision %d failed: %s", vt.ID, step.Name, in.Revision, vt.Error)
		}
		select {
		case <-ctx.Done():
			return PaidTaskResult{}, ctx.Err()
		case <-time.After(a.pollInterval()):
		}
	}
}

func (a *Activities) download(ctx context.Context, ref ledger.PaidTaskRef, task ledger.PaidTask, vt paidvendor.Task, vendor paidvendor.Client, pass *vendorPass) (PaidTaskResult, error) {
	body, err := vendor.Result(ctx, vt.ID)
	pass.observe(err)
	switch {
	case errors.Is(err, paidvendor.ErrUnauthorized):
		return PaidTaskResult{}, nonRetryable(allot.VendorNotConfigured, "the vendor refused this worker's API key while downloading task %s of step %s: %v", vt.ID, ref.Step, err)
	case err != nil:
		return PaidTaskResult{}, fmt.Errorf("download result of vendor task %s: %w", vt.ID, err)
	}
	return a.storeResult(ctx, ref, task, vt, body)
}

// storeResult writes a result to <step>-r<revision>.bin in the episode's
// directory through a temporary file, refuses it if its sha256 is not the
// vendor's (the revision fails, nothing is overwritten), and records it.
func (a *Activities) storeResult(ctx context.Context, ref ledger.PaidTaskRef, task ledger.PaidTask, vt paidvendor.Task, body io.ReadCloser) (PaidTaskResult, error) {
	defer body.Close()
	path := filepath.Join(artifacts.EpisodeDir(a.ArtifactsDir, ref.Pipeline, ref.EpisodeID), fmt.Sprintf("%s-r%d.bin", ref.Step, ref.Revision))
	// Heartbeats carry the bytes read so far: a slow download stays alive,
	// and a stalled one times out and resumes by reference.
	sum, err := artifacts.WriteVerified(path, heartbeatProgress(ctx, io.LimitReader(body, maxResultBytes)), vt.SHA256)
	var mismatch *artifacts.HashMismatchError
	if errors.As(err, &mismatch) {
		// The vendor's bytes are not what it promised: the revision failed;
		// a rework asks for a new one.
		if _, ferr := a.Ledger.RecordPaidFailure(ctx, ref, task.RemoteRef, "result sha256 mismatch: "+mismatch.Error()); ferr != nil {
			return PaidTaskResult{}, classify(ferr)
		}
		return PaidTaskResult{}, nonRetryable(allot.ResultHashMismatch, "result of vendor task %s for step %s: %v; nothing was written", vt.ID, ref.Step, err)
	}
	if err != nil {
		return PaidTaskResult{}, err
	}
	done, err := a.Ledger.RecordPaidResult(ctx, ref, task.RemoteRef, path, sum)
	if err != nil {
		return PaidTaskResult{}, classify(err)
	}
	activity.GetLogger(ctx).Info("paid result stored", "step", ref.Step, "revision", ref.Revision, "remote_ref", vt.ID, "sha256", sum)
	return a.paidResult(ctx, done, allot.KindPaid)
}

// maxResultBytes bounds one downloaded result.
const maxResultBytes = 1 << 30

func (a *Activities) paidResult(ctx context.Context, t ledger.PaidTask, kind allot.StepKind) (PaidTaskResult, error) {
	out := PaidTaskResult{
		Step: t.Step, Kind: kind, Revision: t.Revision, State: t.State, IdempotencyKey: t.IdempotencyKey,
		RemoteRef: t.RemoteRef, Artifact: t.Artifact, SHA256: t.SHA256, Error: t.Error,
	}
	if t.RemoteRef != "" {
		c, err := a.Ledger.Cost(ctx, t.RemoteRef)
		switch {
		case err == nil:
			out.CostAmount, out.CostCurrency = c.Amount, c.Currency
		case !errors.Is(err, ledger.ErrCostNotFound):
			return PaidTaskResult{}, classify(err)
		}
	}
	return out, nil
}

func (a *Activities) pollInterval() time.Duration {
	if a.PollInterval > 0 {
		return a.PollInterval
	}
	return 2 * time.Second
}

// PaidStoreResultInput is a succeeded task's result as an activity
// adapter's fetch returned it.
type PaidStoreResultInput struct {
	PaidTaskInput
	Task  paidvendor.ActivityTask        `json:"task"`
	Fetch paidvendor.ActivityFetchResult `json:"fetch"`
}

// PaidStoreResult writes a result an activity adapter fetched (its bytes,
// or what its URL serves) to the episode's directory, verifies its sha256
// against the task's, and records it; a mismatch fails the revision
// (ResultHashMismatch) and overwrites nothing.
func (a *Activities) PaidStoreResult(ctx context.Context, in PaidStoreResultInput) (PaidTaskResult, error) {
	p, ep, st, err := a.paidStep(ctx, in.PaidTaskInput)
	if err != nil {
		return PaidTaskResult{}, err
	}
	ref := ledger.PaidTaskRef{Pipeline: p.Name, EpisodeID: ep.ID, Step: st.Name, Revision: in.Revision}
	task, err := a.Ledger.PaidTask(ctx, ref)
	if err != nil {
		return PaidTaskResult{}, classify(err)
	}
	vt, err := in.Task.Task()
	if err != nil {
		return PaidTaskResult{}, nonRetryable(allot.InvalidRemoteRef, "step %s: %v", st.Name, err)
	}
	if vt.ID != task.RemoteRef {
		return PaidTaskResult{}, nonRetryable(allot.InvalidRemoteRef, "step %s: the adapter fetched task %s, but the step's task is %s", st.Name, vt.ID, task.RemoteRef)
	}
	var body io.ReadCloser
	switch {
	case in.Fetch.URL != "":
		body, err = fetchURL(ctx, in.Fetch.URL)
		if err != nil {
			return PaidTaskResult{}, fmt.Errorf("download the result of task %s: %w", vt.ID, err)
		}
	default:
		body = io.NopCloser(bytes.NewReader(in.Fetch.Data))
	}
	return a.storeResult(ctx, ref, task, vt, body)
}

// PaidRecordFailureInput is a failed task as an activity adapter reported it.
type PaidRecordFailureInput struct {
	PaidTaskInput
	RemoteRef string `json:"remote_ref"`
	Reason    string `json:"reason"`
}

// PaidRecordFailure records that the vendor reports the task failed.
func (a *Activities) PaidRecordFailure(ctx context.Context, in PaidRecordFailureInput) (PaidTaskResult, error) {
	p, ep, st, err := a.paidStep(ctx, in.PaidTaskInput)
	if err != nil {
		return PaidTaskResult{}, err
	}
	ref := ledger.PaidTaskRef{Pipeline: p.Name, EpisodeID: ep.ID, Step: st.Name, Revision: in.Revision}
	reason := in.Reason
	if reason == "" {
		reason = "the vendor reports the task failed"
	}
	t, err := a.Ledger.RecordPaidFailure(ctx, ref, in.RemoteRef, reason)
	if err != nil {
		return PaidTaskResult{}, classify(err)
	}
	return a.paidResult(ctx, t, st.Kind)
}

// fetchURL GETs a result an adapter points at.
func fetchURL(ctx context.Context, rawURL string) (io.ReadCloser, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("result URL %q is not an http(s) URL", rawURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", u.Redacted(), resp.Status)
	}
	return resp.Body, nil
}
