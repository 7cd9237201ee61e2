package activities

// Expected waits are not failures (docs/design.md, "Vendor controls"): the
// SDK logs them below ERROR and does not count them as failed activities,
// because their errors carry the benign category; a real failure still is
// an ERROR.

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"allot"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/pipeline"
)

// logBuffer collects the SDK's log lines of an activity environment.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// take returns the lines written since the last take.
func (b *logBuffer) take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	b.buf.Reset()
	return strings.Split(strings.TrimSpace(s), "\n")
}

// withLoggedEnv gives the fixture an activity environment whose SDK logger
// writes every level to the returned buffer.
func withLoggedEnv(f *fixture) *logBuffer {
	logs := &logBuffer{}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	f.env = suite.NewTestActivityEnvironment()
	f.env.RegisterActivity(f.acts)
	return logs
}

// activityErrorLevel is the level at which the SDK logged the activity's
// error of type errType ("" if it did not).
func activityErrorLevel(t *testing.T, lines []string, errType string) string {
	t.Helper()
	for _, l := range lines {
		if strings.Contains(l, `msg="Activity error."`) && strings.Contains(l, errType) {
			for _, f := range strings.Fields(l) {
				if lvl, ok := strings.CutPrefix(f, "level="); ok {
					return lvl
				}
			}
		}
	}
	t.Fatalf("the SDK did not log the %s activity error:\n%s", errType, strings.Join(lines, "\n"))
	return ""
}

// wantCategory asserts err's type and category: the SDK counts a failed
// activity unless the category is benign.
func wantCategory(t *testing.T, err error, errType string, want temporal.ApplicationErrorCategory) {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != errType {
		t.Fatalf("got %v, want %s", err, errType)
	}
	if appErr.Category() != want {
		t.Fatalf("%s has category %v, want %v", errType, appErr.Category(), want)
	}
}

// Issue 25 §3: a vendor wait (pause, breaker, max_in_flight, rate), an
// earlier send's deadline and a budget's refusal are logged at DEBUG with
// the benign category; a refused send is still an ERROR.
func TestExpectedWaitsAreNotLoggedAsErrors(t *testing.T) {
	benign, plain := temporal.ApplicationErrorCategoryBenign, temporal.ApplicationErrorCategoryUnspecified

	t.Run("VendorWaiting", func(t *testing.T) {
		f := newFixture(t, nil)
		withVendor(t, f)
		logs := withLoggedEnv(f)
		f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
		logs.take()
		// The rate's single token goes to the first task; the second waits.
		withLimits(t, f, pipeline.VendorLimits{Rate: 0.001, Burst: 1})
		if _, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask); err != nil {
			t.Fatal(err)
		}
		f.mustAllocate(t, "tokyo", "run-2", tokyoNominal)
		logs.take()
		_, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, PaidTaskInput{Pipeline: "tokyo", EpisodeID: "2026-08-07-1", Step: "video"})
		wantWaiting(t, err, allot.ReasonVendorRate)
		if lvl := activityErrorLevel(t, logs.take(), allot.VendorWaiting); lvl != "DEBUG" {
			t.Fatalf("VendorWaiting logged at %s, want DEBUG", lvl)
		}
		wantCategory(t, err, allot.VendorWaiting, benign)
		// A pause, as the activity adapters' gate meets it.
		if _, err := f.led.PauseVendor(f.ctx, ledger.VendorPause{Vendor: pipeline.DefaultVendor, Reason: "maintenance"}); err != nil {
			t.Fatal(err)
		}
		_, err = execute[VendorGateResult](t, f, f.acts.PaidVendorGate, VendorGateInput{
			PaidTaskInput: PaidTaskInput{Pipeline: "tokyo", EpisodeID: "2026-08-07-1", Step: "video"}, Holder: "h", Kind: ledger.VendorSend, Always: true})
		if lvl := activityErrorLevel(t, logs.take(), allot.VendorWaiting); lvl != "DEBUG" {
			t.Fatalf("the gate's VendorWaiting logged at %s, want DEBUG", lvl)
		}
		wantCategory(t, err, allot.VendorWaiting, benign)
	})

	t.Run("SendInFlight", func(t *testing.T) {
		f := newFixture(t, nil)
		withVendor(t, f)
		logs := withLoggedEnv(f)
		f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
		if _, err := f.led.WriteIntent(f.ctx, videoRef(), allot.IdempotencyKey("tokyo", tokyoEpisode, "video", 0), "sending-attempt"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.led.MarkSending(f.ctx, videoRef(), "sending-attempt", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		logs.take()
		_, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
		if lvl := activityErrorLevel(t, logs.take(), allot.SendInFlight); lvl != "DEBUG" {
			t.Fatalf("SendInFlight logged at %s, want DEBUG", lvl)
		}
		wantCategory(t, err, allot.SendInFlight, benign)
	})

	t.Run("BudgetExhausted", func(t *testing.T) {
		f := newBudgetFixture(t, false)
		logs := withLoggedEnv(f.fixture)
		var eps []string
		for i, key := range []string{"run-1", "run-2", "run-3"} {
			eps = append(eps, f.mustAllocate(t, "tokyo", key, tokyoNominal.Add(time.Duration(i)*time.Minute)).EpisodeID)
		}
		for _, ep := range eps[:2] {
			if _, err := f.submit(t, ep, "video"); err != nil {
				t.Fatal(err)
			}
		}
		logs.take()
		_, err := f.submit(t, eps[2], "video")
		if d := parkDetails(t, err); d.TaskState != allot.PaidPlanned || len(d.Budgets) != 1 {
			t.Fatalf("park details %+v", d)
		}
		if lvl := activityErrorLevel(t, logs.take(), allot.BudgetExhausted); lvl != "DEBUG" {
			t.Fatalf("BudgetExhausted logged at %s, want DEBUG", lvl)
		}
		wantCategory(t, err, allot.BudgetExhausted, benign)
	})

	t.Run("a refused send is an error", func(t *testing.T) {
		f := newFixture(t, nil)
		withVendor(t, f)
		logs := withLoggedEnv(f)
		f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
		f.acts.Credentials = paidvendor.NewStaticCredentials("wrong-key")
		logs.take()
		_, err := execute[PaidTaskResult](t, f, f.acts.SubmitPaidTask, videoTask)
		if lvl := activityErrorLevel(t, logs.take(), allot.VendorNotConfigured); lvl != "ERROR" {
			t.Fatalf("a refused send logged at %s, want ERROR", lvl)
		}
		wantCategory(t, err, allot.VendorNotConfigured, plain)
	})
}

// withTaskState, giving a parking error the task's state, keeps its
// category: a benign park stays benign.
func TestWithTaskStateKeepsTheCategory(t *testing.T) {
	f := newFixture(t, nil)
	f.mustAllocate(t, "tokyo", "run-1", tokyoNominal)
	if _, err := f.led.WritePlanned(f.ctx, videoRef(), allot.IdempotencyKey("tokyo", tokyoEpisode, "video", 0)); err != nil {
		t.Fatal(err)
	}
	park := temporal.NewApplicationErrorWithOptions("parked", allot.BudgetExhausted, temporal.ApplicationErrorOptions{
		NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign})
	err := f.acts.withTaskState(f.ctx, videoRef(), park)
	wantCategory(t, err, allot.BudgetExhausted, temporal.ApplicationErrorCategoryBenign)
	var d ParkDetails
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.NonRetryable() || appErr.Details(&d) != nil || d.TaskState != allot.PaidPlanned {
		t.Fatalf("withTaskState: %v, details %+v", err, d)
	}
}
