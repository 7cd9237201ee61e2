package activities

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/paidvendor/vendorapi"
	"allot/pipeline"
)

// The batch activities driven as the batch workflow drives them, against
// the simulated vendor's batch API and each of its faults; the checks read
// the vendor's bill and the ledger (docs/design.md, "Batches").

// simClock is the simulated vendor's clock: a batch's items finish as it
// moves.
type simClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *simClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *simClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// batchVendor is a simulated vendor behind a switch: down drops every
// connection (no answer at all); lagging hides new batches from the list,
// as a vendor whose list is behind would.
type batchVendor struct {
	sim     *paidvendortest.Simulator
	clock   *simClock
	down    atomic.Bool
	lagging atomic.Bool
	creates atomic.Int32 // create requests that reached the vendor
	slow    atomic.Int64 // a delay before every answer, in nanoseconds

	mu      sync.Mutex
	created map[string]int // custom_id -> the create requests that carried it
}

// carried counts the create requests that carried the item under key.
func (v *batchVendor) carried(key string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.created[key]
}

func (v *batchVendor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d := time.Duration(v.slow.Load()); d > 0 {
		time.Sleep(d)
	}
	if v.down.Load() {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
	}
	if r.URL.Path == vendorapi.BatchesPath {
		switch {
		case r.Method == http.MethodPost:
			v.creates.Add(1)
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req vendorapi.CreateBatchRequest
			if json.Unmarshal(body, &req) == nil {
				v.mu.Lock()
				if v.created == nil {
					v.created = map[string]int{}
				}
				for _, it := range req.Items {
					v.created[it.CustomID]++
				}
				v.mu.Unlock()
			}
		case r.Method == http.MethodGet && v.lagging.Load():
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(vendorapi.BatchesPage{Batches: []vendorapi.Batch{}})
			return
		}
	}
	v.sim.ServeHTTP(w, r)
}

const batchItemPrice = 251 // USD cents a direct "score" task costs; a batch bills half, rounded up

func withBatchVendor(t *testing.T, f *fixture) *batchVendor {
	t.Helper()
	clk := &simClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	sim := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: testVendorKey, Seed: 1, Clock: clk.Now,
		PricePerKind: map[string]paidvendor.Cost{"score": {Amount: batchItemPrice, Currency: "USD"}}, BatchDuration: 4 * time.Hour})
	v := &batchVendor{sim: sim, clock: clk}
	srv := httptest.NewServer(v)
	t.Cleanup(srv.Close)
	f.acts.Credentials = &countingCredentials{}
	f.acts.NewVendor = paidvendor.HTTPClientFactory(srv.URL)
	return v
}

// queueBatchItems allocates n episodes and writes each one's "video" task
// as an intent waiting for a batch, reserving its direct price in budget
// "evals".
func queueBatchItems(t *testing.T, f *fixture, n int) []ledger.PaidTaskRef {
	t.Helper()
	var refs []ledger.PaidTaskRef
	for i := range n {
		res := f.mustAllocate(t, "tokyo", fmt.Sprintf("batch-%d", i), tokyoNominal.Add(time.Duration(i)*24*time.Hour))
		r := ledger.PaidTaskRef{Pipeline: "tokyo", EpisodeID: res.EpisodeID, Step: "video"}
		key := allot.IdempotencyKey(r.Pipeline, r.EpisodeID, r.Step, r.Revision)
		rs := []ledger.Reservation{{Budget: "evals", Period: "2026-12", Currency: "USD", Limit: 1_000_000, Amount: batchItemPrice}}
		if _, err := f.led.WriteIntentReserving(f.ctx, r, key, ledger.BatchQueue, rs); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, r)
	}
	return refs
}

func queued(t *testing.T, f *fixture, refs []ledger.PaidTaskRef) []ledger.PaidTaskRef {
	t.Helper()
	var out []ledger.PaidTaskRef
	for _, r := range refs {
		pt, err := f.led.PaidTask(f.ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if pt.State == allot.PaidIntent && pt.Owner == ledger.BatchQueue && !pt.MaybeSent {
			out = append(out, r)
		}
	}
	return out
}

func batchItems(refs []ledger.PaidTaskRef) []BatchItemInput {
	var out []BatchItemInput
	for _, r := range refs {
		out = append(out, BatchItemInput{Ref: r, Params: map[string]string{"case": r.EpisodeID}})
	}
	return out
}

// runBatchRounds sends the queued items in batches until none is queued:
// open, create, poll with the vendor's clock moving, as the workflow will.
// between runs after each round.
func runBatchRounds(t *testing.T, f *fixture, v *batchVendor, refs []ledger.PaidTaskRef, between func(round int)) {
	t.Helper()
	for round := range 4 {
		q := queued(t, f, refs)
		if len(q) == 0 {
			return
		}
		key := allot.IdempotencyKey("batch-test", fmt.Sprint(round), "batch", 0)
		if _, err := execute[OpenBatchResult](t, f, f.acts.OpenBatch, OpenBatchInput{Key: key, Vendor: "default", Kind: "score", Items: q}); err != nil {
			t.Fatalf("round %d: OpenBatch: %v", round, err)
		}
		create := CreateBatchInput{Key: key, Vendor: "default", Items: batchItems(q)}
		view, err := execute[BatchView](t, f, f.acts.CreateBatch, create)
		if err != nil || view.State != allot.BatchCreated || view.VendorBatchID == "" {
			t.Fatalf("round %d: CreateBatch = %+v, %v", round, view, err)
		}
		// A retry of a create that landed sends nothing.
		creates := v.creates.Load()
		if again, err := execute[BatchView](t, f, f.acts.CreateBatch, create); err != nil || again.VendorBatchID != view.VendorBatchID || v.creates.Load() != creates {
			t.Fatalf("round %d: CreateBatch again = %+v, %v (creates %d -> %d)", round, again, err, creates, v.creates.Load())
		}
		for poll := 0; ; poll++ {
			res, err := execute[PollBatchResult](t, f, f.acts.PollBatch, PollBatchInput{Key: key, Vendor: "default"})
			if err != nil {
				t.Fatalf("round %d: PollBatch: %v", round, err)
			}
			if res.Batch.State == allot.BatchEnded {
				if len(res.Items) != len(q) || res.Batch.Settled != len(q) {
					t.Fatalf("round %d: ended with %+v, want %d items settled", round, res, len(q))
				}
				break
			}
			if poll > 10 {
				t.Fatalf("round %d: batch still %+v after %d polls", round, res.Batch, poll)
			}
			v.clock.Add(time.Hour)
		}
		// Polling an ended batch again settles nothing twice.
		if _, err := execute[PollBatchResult](t, f, f.acts.PollBatch, PollBatchInput{Key: key, Vendor: "default"}); err != nil {
			t.Fatal(err)
		}
		if between != nil {
			between(round)
		}
	}
	t.Fatalf("items still queued after 4 rounds: %v", queued(t, f, refs))
}

// checkBatchLedger checks the batch promises against the vendor's bill and
// the ledger: no item billed twice; each billed item recorded at its billed
// amount under its task (and its budget settled at it), or parked; every
// item ended; parked counts the parked items.
func checkBatchLedger(t *testing.T, f *fixture, v *batchVendor, refs []ledger.PaidTaskRef, wantParked int) {
	t.Helper()
	bill := map[string][]paidvendor.Charge{}
	for _, c := range v.sim.Charges() {
		if !c.Refund {
			bill[c.IdempotencyKey] = append(bill[c.IdempotencyKey], c)
		}
	}
	parked := 0
	for _, r := range refs {
		pt, err := f.led.PaidTask(f.ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		lines := bill[pt.IdempotencyKey]
		if len(lines) > 1 {
			t.Errorf("%s was billed %d times", r.EpisodeID, len(lines))
		}
		switch {
		case pt.State == allot.PaidSucceeded:
			if len(lines) != 1 || lines[0].TaskID != pt.RemoteRef {
				t.Errorf("%s succeeded as %s but the bill has %+v", r.EpisodeID, pt.RemoteRef, lines)
				continue
			}
			cost, err := f.led.Cost(f.ctx, pt.RemoteRef)
			if err != nil || cost.Amount != lines[0].Amount || cost.Currency != lines[0].Currency {
				t.Errorf("%s was billed %d %s but recorded as %+v, %v", r.EpisodeID, lines[0].Amount, lines[0].Currency, cost, err)
			}
			if lines[0].Amount != (batchItemPrice+1)/2 {
				t.Errorf("%s was billed %d, want half of %d rounded up", r.EpisodeID, lines[0].Amount, batchItemPrice)
			}
			es, err := f.led.TaskBudgetEntries(f.ctx, r)
			if err != nil || len(es) != 1 || es[0].State != ledger.EntrySettled || es[0].Settled != lines[0].Amount {
				t.Errorf("%s's budget entry is %+v, %v; want settled at %d", r.EpisodeID, es, err, lines[0].Amount)
			}
		case pt.OutcomeUnknown():
			parked++
		default:
			t.Errorf("%s ended %s (owner %q): neither succeeded nor parked", r.EpisodeID, pt.State, pt.Owner)
		}
	}
	if parked != wantParked {
		t.Errorf("%d items parked, want %d", parked, wantParked)
	}
}

func TestBatchActivitiesKeepEachItemOnceUnderEachFault(t *testing.T) {
	for _, tc := range []struct {
		name        string
		faults      paidvendortest.SimFaults
		wantBatches int
		wantParked  int
	}{
		{"no fault", paidvendortest.SimFaults{}, 1, 0},
		{"create response lost", paidvendortest.SimFaults{BatchLoseCreateResponse: 1}, 1, 0},
		{"expired half way", paidvendortest.SimFaults{BatchExpireHalfway: 1}, 2, 0},
		{"cancelled half way", paidvendortest.SimFaults{BatchCancelHalfway: 1}, 2, 0},
		{"output file gone", paidvendortest.SimFaults{BatchOutputGone: 1}, 1, 6},
		{"expired half way, output gone", paidvendortest.SimFaults{BatchExpireHalfway: 1, BatchOutputGone: 1}, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			v := withBatchVendor(t, f)
			if err := v.sim.SetFaults(tc.faults); err != nil {
				t.Fatal(err)
			}
			refs := queueBatchItems(t, f, 6)
			runBatchRounds(t, f, v, refs, func(int) {
				if err := v.sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
					t.Fatal(err)
				}
			})
			checkBatchLedger(t, f, v, refs, tc.wantParked)
			if n := v.sim.BatchCount(); n != tc.wantBatches {
				t.Errorf("the vendor made %d batches, want %d", n, tc.wantBatches)
			}
		})
	}
}

// A create that got no answer while the vendor's list lags: only the list
// is read until the look-only window ends, then one create under the same
// key, which finds the batch once the list has caught up.
func TestBatchCreateWithNoAnswerOnlyLooksUntilItsWindowEnds(t *testing.T) {
	f := newFixture(t, nil)
	v := withBatchVendor(t, f)
	f.acts.BatchLookOnly = time.Hour
	refs := queueBatchItems(t, f, 3)
	key := allot.IdempotencyKey("batch-test", "lag", "batch", 0)
	if _, err := execute[OpenBatchResult](t, f, f.acts.OpenBatch, OpenBatchInput{Key: key, Vendor: "default", Kind: "score", Items: refs}); err != nil {
		t.Fatal(err)
	}
	create := CreateBatchInput{Key: key, Vendor: "default", Items: batchItems(refs)}

	// The create is made, its answer lost, and the list does not show it.
	if err := v.sim.SetFaults(paidvendortest.SimFaults{BatchLoseCreateResponse: 1}); err != nil {
		t.Fatal(err)
	}
	v.lagging.Store(true)
	view, err := execute[BatchView](t, f, f.acts.CreateBatch, create)
	if err != nil || view.State != allot.BatchOpen || view.LookOnlyUntil.IsZero() || view.Error == "" {
		t.Fatalf("CreateBatch with no answer = %+v, %v; want open with a look-only window", view, err)
	}
	for _, r := range refs {
		if pt, _ := f.led.PaidTask(f.ctx, r); !pt.OutcomeUnknown() {
			t.Fatalf("an item of a batch whose create may have landed is not maybe-sent: %+v", pt)
		}
	}
	if err := v.sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	// Inside the window: looked up, never created again.
	if again, err := execute[BatchView](t, f, f.acts.CreateBatch, create); err != nil || again.State != allot.BatchOpen {
		t.Fatalf("CreateBatch inside the window = %+v, %v", again, err)
	}
	if n := v.creates.Load(); n != 1 {
		t.Fatalf("%d creates reached the vendor inside the look-only window, want 1", n)
	}
	// The window has passed and the list caught up: adopted, not created.
	clock = func() time.Time { return view.LookOnlyUntil.Add(time.Second) }
	t.Cleanup(func() { clock = time.Now })
	v.lagging.Store(false)
	view, err = execute[BatchView](t, f, f.acts.CreateBatch, create)
	if err != nil || view.State != allot.BatchCreated {
		t.Fatalf("CreateBatch after the window = %+v, %v", view, err)
	}
	if n, made := v.creates.Load(), v.sim.BatchCount(); n != 1 || made != 1 {
		t.Fatalf("%d creates reached the vendor and it made %d batches, want 1 and 1", n, made)
	}
}

// A vendor that does not answer at all: its list is read before anything
// is marked, and that failed, so nothing was sent. The batch stays open,
// neither it nor its items maybe-sent, with no look-only window, and the
// retried activity creates it once the vendor is back.
func TestBatchCreateToAVendorThatIsDownSendsNothingAndRetries(t *testing.T) {
	f := newFixture(t, nil)
	v := withBatchVendor(t, f)
	refs := queueBatchItems(t, f, 2)
	key := allot.IdempotencyKey("batch-test", "down", "batch", 0)
	if _, err := execute[OpenBatchResult](t, f, f.acts.OpenBatch, OpenBatchInput{Key: key, Vendor: "default", Kind: "score", Items: refs}); err != nil {
		t.Fatal(err)
	}
	create := CreateBatchInput{Key: key, Vendor: "default", Items: batchItems(refs)}
	v.down.Store(true)
	var appErr *temporal.ApplicationError
	if view, err := execute[BatchView](t, f, f.acts.CreateBatch, create); err == nil || errors.As(err, &appErr) && appErr.NonRetryable() {
		t.Fatalf("CreateBatch to a vendor that is down = %+v, %v; want a retryable error", view, err)
	}
	if b, err := f.led.Batch(f.ctx, key); err != nil || b.State != allot.BatchOpen || b.MaybeSent || !b.LookOnlyUntil.IsZero() {
		t.Fatalf("the batch after its vendor's list failed: %+v, %v; want open, not maybe-sent, no look-only window", b, err)
	}
	for _, r := range refs {
		if pt, _ := f.led.PaidTask(f.ctx, r); pt.MaybeSent {
			t.Fatalf("an item of a batch nothing was sent for is maybe-sent: %+v", pt)
		}
	}
	v.down.Store(false)
	view, err := execute[BatchView](t, f, f.acts.CreateBatch, create)
	if err != nil || view.State != allot.BatchCreated {
		t.Fatalf("CreateBatch once the vendor is back = %+v, %v; want created", view, err)
	}
	if n, made := v.creates.Load(), v.sim.BatchCount(); n != 1 || made != 1 {
		t.Fatalf("%d creates reached the vendor and it made %d batches, want 1 and 1", n, made)
	}
}

// A paused vendor creates no batch: the activity waits (VendorWaiting),
// nothing is sent, and the items stay where they were.
func TestBatchCreateWaitsForAPausedVendor(t *testing.T) {
	f := newFixture(t, nil)
	v := withBatchVendor(t, f)
	refs := queueBatchItems(t, f, 2)
	key := allot.IdempotencyKey("batch-test", "paused", "batch", 0)
	if _, err := execute[OpenBatchResult](t, f, f.acts.OpenBatch, OpenBatchInput{Key: key, Vendor: "default", Kind: "score", Items: refs}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.led.PauseVendor(f.ctx, ledger.VendorPause{Vendor: "default", Reason: "invoice dispute", By: "ops"}); err != nil {
		t.Fatal(err)
	}
	_, err := execute[BatchView](t, f, f.acts.CreateBatch, CreateBatchInput{Key: key, Vendor: "default", Items: batchItems(refs)})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != allot.VendorWaiting {
		t.Fatalf("CreateBatch to a paused vendor = %v, want %s", err, allot.VendorWaiting)
	}
	if n := v.creates.Load(); n != 0 {
		t.Fatalf("%d creates reached a paused vendor", n)
	}
	if b, err := f.led.Batch(f.ctx, key); err != nil || b.MaybeSent || b.State != allot.BatchOpen {
		t.Fatalf("the batch after a paused create: %+v, %v; want open, nothing sent", b, err)
	}
	for _, r := range refs {
		if pt, _ := f.led.PaidTask(f.ctx, r); pt.MaybeSent {
			t.Fatalf("an item of a batch not sent is maybe-sent: %+v", pt)
		}
	}
}

// A batch refused by the vendor (a 4xx) made nothing: its items go back to
// the queue for another batch.
func TestBatchRefusedByTheVendorReturnsItsItems(t *testing.T) {
	f := newFixture(t, nil)
	v := withBatchVendor(t, f)
	refs := queueBatchItems(t, f, 2)
	key := allot.IdempotencyKey("batch-test", "refused", "batch", 0)
	if _, err := execute[OpenBatchResult](t, f, f.acts.OpenBatch, OpenBatchInput{Key: key, Vendor: "default", Kind: "score", Items: refs}); err != nil {
		t.Fatal(err)
	}
	// The vendor answers the create with a 400: it made nothing.
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == vendorapi.BatchesPath {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"code":"invalid_request","message":"duplicate custom_id"}}`))
			return
		}
		v.ServeHTTP(w, r)
	}))
	t.Cleanup(refusing.Close)
	f.acts.NewVendor = paidvendor.HTTPClientFactory(refusing.URL)
	view, err := execute[BatchView](t, f, f.acts.CreateBatch, CreateBatchInput{Key: key, Vendor: "default", Items: batchItems(refs)})
	if err != nil || view.State != allot.BatchNotCreated {
		t.Fatalf("CreateBatch refused = %+v, %v; want not_created", view, err)
	}
	if q := queued(t, f, refs); len(q) != len(refs) {
		t.Fatalf("%d of %d items are back in the queue", len(q), len(refs))
	}
}

// The collector polls a vendor's batches at its batch_poll_every; a
// worker's BatchPollEvery (tests) overrides every vendor's.
func TestBatchPollEveryIsTheVendors(t *testing.T) {
	set, err := pipeline.Parse([]byte(`
[[vendor]]
name             = "slow"
url              = "http://vendor.example"
api_key_env      = "SLOW_KEY"
batch_poll_every = "20m"

[[pipeline]]
name = "evals"
  [[pipeline.step]]
  name   = "score"
  kind   = "paid"
  vendor = "slow"
  batch  = true
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	a := &Activities{Pipelines: set}
	if got := a.batchPollEvery("slow"); got != 20*time.Minute {
		t.Errorf("vendor slow's batches are polled every %s, want its batch_poll_every 20m", got)
	}
	if got := a.batchPollEvery(pipeline.DefaultVendor); got != pipeline.DefaultBatchPollEvery {
		t.Errorf("the default vendor's batches are polled every %s, want %s", got, pipeline.DefaultBatchPollEvery)
	}
	a.BatchPollEvery = time.Second
	if got := a.batchPollEvery("slow"); got != time.Second {
		t.Errorf("the worker's override polls every %s, want 1s", got)
	}
}

// A vendor's batch_max_queued_items: a create whose items would take the
// vendor's unfinished batches over it waits (VendorWaiting, reason
// vendor_batch_queue), nothing sent or marked; once a running batch has
// ended, the create goes.
func TestBatchCreateWaitsForRoomInTheVendorsQueue(t *testing.T) {
	f := newFixture(t, nil)
	v := withBatchVendor(t, f)
	set, err := pipeline.Parse([]byte(testPipelines+"\n[[vendor]]\nname = \"default\"\nbatch_max_queued_items = 3\n"), "activities_test")
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Pipelines = set
	refs := queueBatchItems(t, f, 4)
	first, second := allot.IdempotencyKey("batch-test", "queue", "batch", 0), allot.IdempotencyKey("batch-test", "queue", "batch", 1)
	for _, b := range []struct {
		key  string
		refs []ledger.PaidTaskRef
	}{{first, refs[:2]}, {second, refs[2:]}} {
		if _, err := execute[OpenBatchResult](t, f, f.acts.OpenBatch, OpenBatchInput{Key: b.key, Vendor: "default", Kind: "score", Items: b.refs}); err != nil {
			t.Fatal(err)
		}
	}
	if view, err := execute[BatchView](t, f, f.acts.CreateBatch, CreateBatchInput{Key: first, Vendor: "default", Items: batchItems(refs[:2])}); err != nil || view.State != allot.BatchCreated {
		t.Fatalf("the first batch's create = %+v, %v", view, err)
	}
	create := CreateBatchInput{Key: second, Vendor: "default", Items: batchItems(refs[2:])}
	_, err = execute[BatchView](t, f, f.acts.CreateBatch, create)
	var appErr *temporal.ApplicationError
	var wait VendorWait
	if !errors.As(err, &appErr) || appErr.Type() != allot.VendorWaiting || appErr.NonRetryable() || appErr.Details(&wait) != nil || wait.Reason != allot.ReasonVendorBatchQueue {
		t.Fatalf("a create over the vendor's queue = %v (%+v), want a retryable %s with reason %s", err, wait, allot.VendorWaiting, allot.ReasonVendorBatchQueue)
	}
	if n := v.creates.Load(); n != 1 {
		t.Fatalf("%d creates reached the vendor, want 1: the second waits for room", n)
	}
	if b, err := f.led.Batch(f.ctx, second); err != nil || b.MaybeSent || b.State != allot.BatchOpen {
		t.Fatalf("the waiting batch: %+v, %v; want open, nothing sent", b, err)
	}
	// The first batch ends: its room is free.
	v.clock.Add(5 * time.Hour)
	if res, err := execute[PollBatchResult](t, f, f.acts.PollBatch, PollBatchInput{Key: first, Vendor: "default"}); err != nil || res.Batch.State != allot.BatchEnded {
		t.Fatalf("PollBatch of the first batch = %+v, %v; want it ended", res.Batch, err)
	}
	if view, err := execute[BatchView](t, f, f.acts.CreateBatch, create); err != nil || view.State != allot.BatchCreated {
		t.Fatalf("the second batch's create once the first ended = %+v, %v", view, err)
	}
}

// The batch activities heartbeat while they wait (here on a slow vendor),
// so that the collector's heartbeat timeout retries a killed worker's
// attempt within seconds, not after the 10-minute start-to-close timeout
// with the batch's items waiting (a chaos run on one worker met that).
func TestBatchActivitiesHeartbeatWhileTheyWait(t *testing.T) {
	f := newFixture(t, nil)
	v := withBatchVendor(t, f)
	var beats atomic.Int32
	f.env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { beats.Add(1) })
	refs := queueBatchItems(t, f, 2)
	key := allot.IdempotencyKey("batch-test", "slow", "batch", 0)
	if _, err := execute[OpenBatchResult](t, f, f.acts.OpenBatch, OpenBatchInput{Key: key, Vendor: "default", Kind: "score", Items: refs}); err != nil {
		t.Fatal(err)
	}
	v.slow.Store(int64(3 * heartbeatEvery))
	if view, err := execute[BatchView](t, f, f.acts.CreateBatch, CreateBatchInput{Key: key, Vendor: "default", Items: batchItems(refs)}); err != nil || view.State != allot.BatchCreated {
		t.Fatalf("CreateBatch on a slow vendor = %+v, %v", view, err)
	}
	if beats.Load() == 0 {
		t.Fatal("CreateBatch waited on a slow vendor without a heartbeat")
	}
	beats.Store(0)
	if _, err := execute[PollBatchResult](t, f, f.acts.PollBatch, PollBatchInput{Key: key, Vendor: "default"}); err != nil {
		t.Fatal(err)
	}
	if beats.Load() == 0 {
		t.Fatal("PollBatch waited on a slow vendor without a heartbeat")
	}
}

// abandonOutside abandons r's task as an operator would from outside its
// episode (which refuses commands while it waits on a batch): its intent
// is given up and its reservation released.
func abandonOutside(t *testing.T, f *fixture, r ledger.PaidTaskRef) {
	t.Helper()
	if _, _, err := f.led.Decide(f.ctx, ledger.DecisionRequest{OperatorDecision: ledger.OperatorDecision{RequestID: "abandon-" + r.EpisodeID, Pipeline: r.Pipeline,
		EpisodeID: r.EpisodeID, Step: r.Step, Action: allot.ActionAbandon, Reason: "given up from outside", By: "ops"}}); err != nil {
		t.Fatal(err)
	}
}

// An item whose task is abandoned after its batch opened and before the
// create (the collector passes every item of the opened batch) is never
// sent: the vendor's create carries the others only, nothing is billed
// for it and no cost is booked; a batch whose only item was abandoned is
// not created at the vendor at all, and the collector, handed the item
// back, opens nothing for it.
func TestBatchCreateNeverSendsAnItemAbandonedAfterItsBatchOpened(t *testing.T) {
	f := newFixture(t, nil)
	v := withBatchVendor(t, f)
	refs := queueBatchItems(t, f, 4)
	keyOf := func(r ledger.PaidTaskRef) string {
		return allot.IdempotencyKey(r.Pipeline, r.EpisodeID, r.Step, r.Revision)
	}
	three, alone := refs[:3], refs[3]
	key := allot.IdempotencyKey("batch-test", "abandoned", "batch", 0)
	if _, err := execute[OpenBatchResult](t, f, f.acts.OpenBatch, OpenBatchInput{Key: key, Vendor: "default", Kind: "score", Items: three}); err != nil {
		t.Fatal(err)
	}
	abandonOutside(t, f, three[0])
	create := CreateBatchInput{Key: key, Vendor: "default", Items: batchItems(three)}
	view, err := execute[BatchView](t, f, f.acts.CreateBatch, create)
	if err != nil || view.State != allot.BatchCreated {
		t.Fatalf("CreateBatch = %+v, %v; want created", view, err)
	}
	if n := v.carried(keyOf(three[0])); n != 0 {
		t.Fatalf("the vendor received the abandoned item in %d creates", n)
	}
	for _, r := range three[1:] {
		if n := v.carried(keyOf(r)); n != 1 {
			t.Fatalf("the vendor received %s in %d creates, want 1", r.EpisodeID, n)
		}
	}
	for poll := 0; ; poll++ {
		res, err := execute[PollBatchResult](t, f, f.acts.PollBatch, PollBatchInput{Key: key, Vendor: "default"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Batch.State == allot.BatchEnded {
			break
		}
		if poll > 10 {
			t.Fatalf("batch still %+v after %d polls", res.Batch, poll)
		}
		v.clock.Add(time.Hour)
	}
	bill := map[string]int{}
	for _, c := range v.sim.Charges() {
		bill[c.IdempotencyKey]++
	}
	if bill[keyOf(three[0])] != 0 || bill[keyOf(three[1])] != 1 || bill[keyOf(three[2])] != 1 {
		t.Fatalf("the bill's lines per item = %v; want none for the abandoned item, one for each other", bill)
	}
	pt, err := f.led.PaidTask(f.ctx, three[0])
	if err != nil || pt.State != allot.PaidAbandoned || pt.RemoteRef != "" {
		t.Fatalf("the abandoned item: %+v, %v; want abandoned, no reference", pt, err)
	}
	if es, err := f.led.TaskBudgetEntries(f.ctx, three[0]); err != nil || len(es) != 1 || es[0].State != ledger.EntryReleased {
		t.Fatalf("the abandoned item's budget entry: %+v, %v; want released, no cost", es, err)
	}
	checkBatchLedger(t, f, v, three[1:], 0)

	// Its only item abandoned, a batch is not created at the vendor.
	creates := v.creates.Load()
	lone := allot.IdempotencyKey("batch-test", "abandoned", "batch", 1)
	if _, err := execute[OpenBatchResult](t, f, f.acts.OpenBatch, OpenBatchInput{Key: lone, Vendor: "default", Kind: "score", Items: []ledger.PaidTaskRef{alone}}); err != nil {
		t.Fatal(err)
	}
	abandonOutside(t, f, alone)
	view, err = execute[BatchView](t, f, f.acts.CreateBatch, CreateBatchInput{Key: lone, Vendor: "default", Items: batchItems([]ledger.PaidTaskRef{alone})})
	if err != nil || view.State != allot.BatchNotCreated || !strings.Contains(view.Error, "nothing to send") {
		t.Fatalf("CreateBatch of a batch whose only item was abandoned = %+v, %v; want not_created, nothing to send", view, err)
	}
	if n := v.creates.Load(); n != creates || v.carried(keyOf(alone)) != 0 {
		t.Fatalf("a batch with nothing to send reached the vendor: %d creates, want %d", n, creates)
	}
	// The collector gets the item back with the batch, and opens nothing
	// for a task that is settled.
	res, err := execute[OpenBatchResult](t, f, f.acts.OpenBatch, OpenBatchInput{Key: allot.IdempotencyKey("batch-test", "abandoned", "batch", 2), Vendor: "default", Kind: "score",
		Items: []ledger.PaidTaskRef{alone, three[0]}})
	if err != nil || res.Batch.State != "" || len(res.Skips) != 2 {
		t.Fatalf("OpenBatch of abandoned items = %+v, %v; want no batch, both skipped, no error", res, err)
	}
}
