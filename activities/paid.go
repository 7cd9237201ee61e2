package activities

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"

	"allot"
	"allot/artifacts"
	"allot/ledger"
	"allot/paidvendor"
	"allot/pipeline"
)

// PaidTaskInput names one paid task: (episode, step, revision).
type PaidTaskInput struct {
	Pipeline  string `json:"pipeline"`
	EpisodeID string `json:"episode_id"`
	Step      string `json:"step"`
	Revision  int    `json:"revision"`
}

// PaidTaskResult is the ledger's view of a paid task after the activity.
type PaidTaskResult struct {
	Step           string              `json:"step"`
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

// SubmitPaidTask sends a paid task to the vendor at most once (invariant 7).
// In order:
//
//  1. The episode must exist, before any credential is read or client built.
//  2. The intent is written, owned by this attempt (WriteIntent). A task the
//     vendor has already accepted (a reference is written) is returned as is.
//  3. If another attempt owns the intent, or a send may have reached the
//     vendor (MaybeSent), the vendor is asked by idempotency key: a task it
//     has is adopted; if it has none, this attempt takes the intent over;
//     if it cannot tell and a send may have reached it, the activity fails
//     with OutcomeUnknown and the episode parks. Only an operator's resubmit
//     lets a send go without that answer.
//  4. The send is marked (MaybeSent) and the vendor called; its reference
//     and cost are written before anything else happens.
//
// A definite refusal (4xx) puts the intent back to planned and parks the
// episode (VendorRejected, or VendorNotConfigured when the key was refused);
// any other failure leaves the outcome unknown, and the retry starts at 3.
func (a *Activities) SubmitPaidTask(ctx context.Context, in PaidTaskInput) (PaidTaskResult, error) {
	p, ep, step, err := a.paidStep(ctx, in)
	if err != nil {
		return PaidTaskResult{}, err
	}
	ref := ledger.PaidTaskRef{Pipeline: p.Name, EpisodeID: ep.ID, Step: step.Name, Revision: in.Revision}
	key := paidvendor.IdempotencyKey(p.Name, ep.ID, step.Name, in.Revision)
	owner := attemptToken(ctx)
	log := activity.GetLogger(ctx)

	task, err := a.Ledger.WriteIntent(ctx, ref, key, owner)
	if err != nil {
		return PaidTaskResult{}, classify(err)
	}
	if task.State != allot.PaidIntent {
		return a.paidResult(ctx, task)
	}
	vendor, err := a.vendor(ctx)
	if err != nil {
		return PaidTaskResult{}, err
	}
	askedAbsent := false
	if task.Owner != owner || task.MaybeSent {
		// Another attempt wrote the intent, or a send may have reached the
		// vendor: ask before anything is sent. While an earlier send may
		// still arrive, the vendor's answer proves nothing: wait for it.
		if task.MaybeSent && time.Now().Before(task.SendingUntil) {
			return PaidTaskResult{}, fmt.Errorf("an earlier attempt's send of paid task %s/%s step %s may reach the vendor until %s; asking then",
				p.Name, ep.ID, step.Name, task.SendingUntil.Format(time.RFC3339))
		}
		found, err := withHeartbeat(ctx, func(ctx context.Context) (paidvendor.Task, error) {
			return vendor.LookupByIdempotencyKey(ctx, key)
		})
		switch {
		case err == nil:
			log.Info("adopting the vendor task found by idempotency key", "step", step.Name, "revision", in.Revision, "remote_ref", found.ID)
			res, err := a.recordSubmission(ctx, ref, found)
			if err == nil {
				countSubmission(ctx, p.Name, step.Name, SubmissionAdopted)
			}
			return res, err
		case errors.Is(err, paidvendor.ErrNotFound):
			askedAbsent = true
		case errors.Is(err, paidvendor.ErrLookupUnsupported):
			if task.MaybeSent && task.ResubmitRequest == "" {
				countSubmission(ctx, p.Name, step.Name, SubmissionUnknown)
				return PaidTaskResult{}, nonRetryable(allot.OutcomeUnknown,
					"paid task %s/%s step %s revision %d: an earlier send may have reached the vendor, and the vendor cannot look tasks up by idempotency key %s",
					p.Name, ep.ID, step.Name, in.Revision, key)
			}
			// Never sent (its writer died before sending), or an operator
			// allowed this send: go on without the answer.
		case errors.Is(err, paidvendor.ErrUnauthorized):
			return PaidTaskResult{}, nonRetryable(allot.VendorNotConfigured, "the vendor refused this worker's API key while looking up paid task %s/%s step %s: %v", p.Name, ep.ID, step.Name, err)
		default:
			return PaidTaskResult{}, fmt.Errorf("look up paid task by idempotency key: %w", err)
		}
		if task.Owner != owner {
			if _, err := a.Ledger.TakeIntent(ctx, task, owner, time.Now()); err != nil {
				// Another attempt took it, or began a send, after we read
				// it: the retry asks the vendor again.
				return PaidTaskResult{}, classify(err)
			}
		}
	}
	prior := task.MaybeSent
	until := time.Now().Add(sendWindow)
	if _, err := a.Ledger.MarkSending(ctx, ref, owner, until); err != nil {
		return PaidTaskResult{}, classify(err)
	}
	sendCtx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	params := map[string]string{"pipeline": p.Name, "episode": ep.ID, "step": step.Name, "revision": strconv.Itoa(in.Revision)}
	for k, v := range step.Params {
		params[k] = v
	}
	accepted, err := withHeartbeat(sendCtx, func(ctx context.Context) (paidvendor.Task, error) {
		return vendor.Submit(ctx, paidvendor.SubmitRequest{IdempotencyKey: key, Kind: step.Action, Params: params})
	})
	if err != nil {
		if refused(err) {
			// The vendor said no: this send was not accepted. What may have
			// been sent before stays unknown unless the vendor was asked.
			countSubmission(ctx, p.Name, step.Name, SubmissionRefused)
			if _, rerr := a.Ledger.ReleaseIntent(ctx, ref, owner, prior && !askedAbsent); rerr != nil {
				return PaidTaskResult{}, classify(rerr)
			}
			errType := allot.VendorRejected
			if errors.Is(err, paidvendor.ErrUnauthorized) {
				errType = allot.VendorNotConfigured
			}
			return PaidTaskResult{}, nonRetryable(errType, "vendor refused paid task %s/%s step %s revision %d: %v", p.Name, ep.ID, step.Name, in.Revision, err)
		}
		// The outcome is unknown; the retry asks the vendor by idempotency
		// key. This send is over: the vendor decides on a request before it
		// answers, so from now on asking it settles what it did.
		countSubmission(ctx, p.Name, step.Name, SubmissionError)
		if _, eerr := a.Ledger.EndSend(context.WithoutCancel(ctx), ref, owner, time.Now()); eerr != nil {
			activity.GetLogger(ctx).Warn("recording the end of a send failed; the retry waits for its deadline", "error", eerr)
		}
		return PaidTaskResult{}, fmt.Errorf("submit paid task (the retry will look it up by idempotency key): %w", err)
	}
	log.Info("paid task accepted", "step", step.Name, "revision", in.Revision, "remote_ref", accepted.ID,
		"cost", accepted.Cost.Amount, "currency", accepted.Cost.Currency)
	res, err := a.recordSubmission(ctx, ref, accepted)
	if err == nil {
		countSubmission(ctx, p.Name, step.Name, SubmissionAccepted)
	}
	return res, err
}

// sendWindow bounds one send to the vendor: the request is given up at its
// deadline, which the ledger keeps (SendingUntil), so that after it no
// earlier send can still arrive and a look-up that finds nothing means
// nothing was accepted.
const sendWindow = 30 * time.Second

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
// counted in the metrics only when this write recorded it first.
func (a *Activities) recordSubmission(ctx context.Context, ref ledger.PaidTaskRef, t paidvendor.Task) (PaidTaskResult, error) {
	task, err := a.Ledger.RecordSubmission(ctx, ledger.Submission{
		PaidTaskRef: ref, RemoteRef: t.ID, Amount: t.Cost.Amount, Currency: t.Cost.Currency,
	})
	if err != nil {
		return PaidTaskResult{}, classify(err)
	}
	countCost(ctx, ref.Pipeline, t.Cost.Amount, t.Cost.Currency)
	return a.paidResult(ctx, task)
}

// AwaitPaidTask polls the vendor by reference, heartbeating, until the task
// ends; then it downloads the result to the episode's artifact folder
// (temporary file, fsync, rename, directory fsync), checks its sha256 against
// the vendor's, and records it.
func (a *Activities) AwaitPaidTask(ctx context.Context, in PaidTaskInput) (PaidTaskResult, error) {
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
			return a.paidResult(ctx, task)
		}
		// The recorded file is gone or damaged: fetch it again below.
	case allot.PaidSubmitted:
	case allot.PaidFailed:
		return PaidTaskResult{}, nonRetryable(allot.VendorTaskFailed, "vendor task %s for step %s revision %d failed: %s", task.RemoteRef, step.Name, in.Revision, task.Error)
	default:
		return PaidTaskResult{}, nonRetryable(allot.InvalidInput, "paid task %s/%s step %s revision %d is %s, not submitted: submit it first", p.Name, ep.ID, step.Name, in.Revision, task.State)
	}
	vendor, err := a.vendor(ctx)
	if err != nil {
		return PaidTaskResult{}, err
	}
	for {
		vt, err := vendor.Task(ctx, task.RemoteRef)
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
			return a.download(ctx, ref, task, vt, vendor)
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

func (a *Activities) download(ctx context.Context, ref ledger.PaidTaskRef, task ledger.PaidTask, vt paidvendor.Task, vendor paidvendor.Client) (PaidTaskResult, error) {
	body, err := vendor.Result(ctx, vt.ID)
	switch {
	case errors.Is(err, paidvendor.ErrUnauthorized):
		return PaidTaskResult{}, nonRetryable(allot.VendorNotConfigured, "the vendor refused this worker's API key while downloading task %s of step %s: %v", vt.ID, ref.Step, err)
	case err != nil:
		return PaidTaskResult{}, fmt.Errorf("download result of vendor task %s: %w", vt.ID, err)
	}
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
	return a.paidResult(ctx, done)
}

// maxResultBytes bounds one downloaded result.
const maxResultBytes = 1 << 30

func (a *Activities) paidResult(ctx context.Context, t ledger.PaidTask) (PaidTaskResult, error) {
	out := PaidTaskResult{
		Step: t.Step, Revision: t.Revision, State: t.State, IdempotencyKey: t.IdempotencyKey,
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

// paidStep resolves a paid step of an existing episode. The episode check
// comes first: a missing episode stops before credentials or a client.
func (a *Activities) paidStep(ctx context.Context, in PaidTaskInput) (*pipeline.Pipeline, ledger.Episode, pipeline.Step, error) {
	p, ep, err := a.episode(ctx, EpisodeRef{Pipeline: in.Pipeline, EpisodeID: in.EpisodeID})
	if err != nil {
		return nil, ledger.Episode{}, pipeline.Step{}, err
	}
	step, ok := p.Step(in.Step)
	if !ok {
		return nil, ledger.Episode{}, pipeline.Step{}, nonRetryable(allot.StepNotFound, "pipeline %q has no step %q: its steps are %v", p.Name, in.Step, p.StepNames())
	}
	if step.Kind != pipeline.Paid {
		return nil, ledger.Episode{}, pipeline.Step{}, nonRetryable(allot.StepNotFound, "step %q of pipeline %q is %s, not paid: paid commands take one of %v", step.Name, p.Name, step.Kind, p.PaidStepNames())
	}
	if in.Revision < 0 {
		return nil, ledger.Episode{}, pipeline.Step{}, nonRetryable(allot.InvalidInput, "revision %d is negative", in.Revision)
	}
	return p, ep, step, nil
}

// vendor reads the credentials and builds a client; called only after the
// episode check.
func (a *Activities) vendor(ctx context.Context) (paidvendor.Client, error) {
	if a.Credentials == nil || a.NewVendor == nil {
		return nil, nonRetryable(allot.VendorNotConfigured, "this worker has no paid vendor configured: set %s (and %s or %s)", EnvVendorURL, EnvVendorAPIKey, EnvVendorAPIKeyFile)
	}
	key, err := a.Credentials.VendorAPIKey(ctx)
	if err != nil {
		return nil, nonRetryable(allot.VendorNotConfigured, "%v", err)
	}
	c, err := a.NewVendor(key)
	if err != nil {
		return nil, nonRetryable(allot.VendorNotConfigured, "build the vendor client: %v", err)
	}
	return c, nil
}

func (a *Activities) pollInterval() time.Duration {
	if a.PollInterval > 0 {
		return a.PollInterval
	}
	return 2 * time.Second
}
