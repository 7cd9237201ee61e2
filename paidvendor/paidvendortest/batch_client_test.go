package paidvendortest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/paidvendor"
	"allot/paidvendor/vendorapi"
)

// itemBook is where a batch client's items end: a result recorded, a
// failure, or parked because the vendor may have billed a result nobody
// can read.
type itemBook struct {
	recorded map[string]paidvendor.Task
	failed   map[string]string
	parked   map[string]string
	batches  int
}

// runBatches drives the production client as the batch step will: send
// the pending items in a batch under its own key, retry a create of
// unknown outcome (SubmitBatch looks before it creates), wait for the end,
// record what it did, and send again only the items it did not process,
// under their same keys. between runs after each round, before the next.
func runBatches(t *testing.T, tv *testVendor, clock *testClock, keys []string, between func(round int)) itemBook {
	t.Helper()
	ctx := context.Background()
	book := itemBook{recorded: map[string]paidvendor.Task{}, failed: map[string]string{}, parked: map[string]string{}}
	pending := keys
	for round := 0; len(pending) > 0; round++ {
		if round > 4 {
			t.Fatalf("items %v are still pending after %d rounds", pending, round)
		}
		req := paidvendor.BatchRequest{Key: allot.IdempotencyKey("eval-batch", fmt.Sprint(round), "send", 0)}
		for _, k := range pending {
			req.Items = append(req.Items, paidvendor.BatchItem{Key: k, Kind: "eval", Params: map[string]string{"case": k}})
		}
		var (
			b   paidvendor.Batch
			err error
		)
		for attempt := 0; ; attempt++ {
			if b, _, err = tv.client.SubmitBatch(ctx, req); err == nil {
				break
			}
			if !errors.Is(err, paidvendor.ErrBatchOutcomeUnknown) || attempt == 3 {
				t.Fatalf("round %d: SubmitBatch: %v", round, err)
			}
		}
		book.batches++
		for !b.Ended() {
			clock.Add(time.Hour)
			if b, err = tv.client.GetBatch(ctx, b.ID); err != nil {
				t.Fatal(err)
			}
		}
		results, err := tv.client.BatchResults(ctx, b, pending)
		if err != nil {
			t.Fatalf("round %d: BatchResults: %v", round, err)
		}
		var next []string
		for _, r := range results {
			switch r.Outcome {
			case paidvendor.ItemSucceeded:
				book.recorded[r.Key] = r.Task
			case paidvendor.ItemFailed:
				book.failed[r.Key] = r.Error
			case paidvendor.ItemNotProcessed:
				next = append(next, r.Key)
			case paidvendor.ItemResultLost:
				book.parked[r.Key] = r.Error
			default:
				t.Fatalf("item %s: unknown outcome %q", r.Key, r.Outcome)
			}
		}
		pending = next
		if between != nil {
			between(round)
		}
	}
	return book
}

// checkBatchBook checks the batch promises against the vendor's bill: no
// item billed twice, no billed item unrecorded (each is recorded at its
// billed amount, or parked), and every item ended somewhere.
func checkBatchBook(t *testing.T, sim *Simulator, keys []string, book itemBook) {
	t.Helper()
	bill := billByKey(sim)
	for key, lines := range bill {
		if len(lines) > 1 {
			t.Errorf("item %s was billed %d times: %+v", key, len(lines), lines)
		}
		task, recorded := book.recorded[key]
		_, parked := book.parked[key]
		switch {
		case recorded && (task.ID != lines[0].TaskID || task.Cost.Amount != lines[0].Amount || task.Cost.Currency != lines[0].Currency):
			t.Errorf("item %s was recorded as %+v but billed as %+v", key, task, lines[0])
		case !recorded && !parked:
			t.Errorf("item %s was billed (%+v) but neither recorded nor parked", key, lines[0])
		}
	}
	for _, k := range keys {
		_, r := book.recorded[k]
		_, f := book.failed[k]
		_, p := book.parked[k]
		if !r && !f && !p {
			t.Errorf("item %s ended nowhere", k)
		}
		if r && len(bill[k]) != 1 {
			t.Errorf("item %s was recorded with %d charge lines, want 1", k, len(bill[k]))
		}
	}
}

func batchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = allot.IdempotencyKey("eval", fmt.Sprintf("2026-W49-%d", i), "score", 0)
	}
	return keys
}

// The batch client against each batch fault of the simulator: every item
// billed at most once, every billed item recorded or parked.
func TestBatchClientKeepsEachItemOnceUnderEachFault(t *testing.T) {
	for _, tc := range []struct {
		name        string
		faults      SimFaults
		wantBatches int // batches created at the vendor
		wantParked  int
	}{
		{"no fault", SimFaults{}, 1, 0},
		{"create response lost", SimFaults{BatchLoseCreateResponse: 1}, 1, 0},
		{"expired half way", SimFaults{BatchExpireHalfway: 1}, 2, 0},
		{"cancelled half way", SimFaults{BatchCancelHalfway: 1}, 2, 0},
		// Every item was billed and no result can be read: all park.
		{"output file gone", SimFaults{BatchOutputGone: 1}, 1, 6},
		// The error file still says which half was not processed: only
		// that half goes again.
		{"expired half way, output gone", SimFaults{BatchExpireHalfway: 1, BatchOutputGone: 1}, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tv, clock := newBatchVendor(t, SimConfig{BatchDuration: 4 * time.Hour})
			if err := tv.sim.SetFaults(tc.faults); err != nil {
				t.Fatal(err)
			}
			keys := batchKeys(6)
			book := runBatches(t, tv, clock, keys, func(int) {
				if err := tv.sim.SetFaults(SimFaults{}); err != nil { // the fault meets the first batch only
					t.Fatal(err)
				}
			})
			checkBatchBook(t, tv.sim, keys, book)
			if n := tv.sim.BatchCount(); n != tc.wantBatches || book.batches != tc.wantBatches {
				t.Errorf("the vendor made %d batches and the client sent %d, want %d", n, book.batches, tc.wantBatches)
			}
			if len(book.parked) != tc.wantParked || len(book.recorded)+len(book.parked) != len(keys) {
				t.Errorf("recorded %d, parked %d of %d items; want %d parked and the rest recorded", len(book.recorded), len(book.parked), len(keys), tc.wantParked)
			}
			for k, why := range book.parked {
				if len(billByKey(tv.sim)[k]) != 1 || why == "" {
					t.Errorf("parked item %s: %d charge lines, reason %q; want a billed item whose result is gone, with why", k, len(billByKey(tv.sim)[k]), why)
				}
			}
		})
	}
}

// After a create whose answer was lost, the next SubmitBatch adopts the
// batch the vendor made: it never creates a second one for the same key.
func TestSubmitBatchAdoptsTheBatchOfItsKey(t *testing.T) {
	tv, _ := newBatchVendor(t, SimConfig{BatchLoseCreateResponse: 1})
	ctx := context.Background()
	req := paidvendor.BatchRequest{Key: allot.IdempotencyKey("eval-batch", "0", "send", 0), Items: []paidvendor.BatchItem{{Key: batchKeys(1)[0], Kind: "eval"}}}
	first, adopted, err := tv.client.SubmitBatch(ctx, req)
	if err != nil || !adopted || first.Key != req.Key {
		t.Fatalf("a create with its answer lost: %+v, adopted %v, %v; want the batch found under its key", first, adopted, err)
	}
	if err := tv.sim.SetFaults(SimFaults{}); err != nil {
		t.Fatal(err)
	}
	again, adopted, err := tv.client.SubmitBatch(ctx, req)
	if err != nil || !adopted || again.ID != first.ID {
		t.Fatalf("submitting the same key again: %+v, adopted %v, %v; want batch %s adopted", again, adopted, err, first.ID)
	}
	if n := tv.sim.Stats().Batches; n != 1 {
		t.Errorf("the vendor got %d creates for one key, want 1", n)
	}
	other := req
	other.Key = allot.IdempotencyKey("eval-batch", "1", "send", 0)
	if b, adopted, err := tv.client.SubmitBatch(ctx, other); err != nil || adopted || b.ID == first.ID {
		t.Errorf("another key: %+v, adopted %v, %v; want a new batch", b, adopted, err)
	}
}

func TestSubmitBatchRefusesABadRequestBeforeSending(t *testing.T) {
	tv, _ := newBatchVendor(t, SimConfig{})
	key := batchKeys(2)
	for _, tc := range []struct {
		name string
		req  paidvendor.BatchRequest
	}{
		{"an item twice", paidvendor.BatchRequest{Key: key[0], Items: []paidvendor.BatchItem{{Key: key[1], Kind: "eval"}, {Key: key[1], Kind: "eval"}}}},
		{"no items", paidvendor.BatchRequest{Key: key[0]}},
		{"no batch key", paidvendor.BatchRequest{Items: []paidvendor.BatchItem{{Key: key[1], Kind: "eval"}}}},
		{"an item key not a UUID", paidvendor.BatchRequest{Key: key[0], Items: []paidvendor.BatchItem{{Key: "case-1", Kind: "eval"}}}},
		{"no kind", paidvendor.BatchRequest{Key: key[0], Items: []paidvendor.BatchItem{{Key: key[1]}}}},
	} {
		if _, _, err := tv.client.SubmitBatch(context.Background(), tc.req); !errors.Is(err, paidvendor.ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", tc.name, err)
		}
	}
	if s := tv.sim.Stats(); s.Requests != 0 {
		t.Errorf("refused requests sent %d requests, want none", s.Requests)
	}
}

func TestBatchResultsOfABatchInProgressIsRefused(t *testing.T) {
	tv, _ := newBatchVendor(t, SimConfig{})
	keys := batchKeys(1)
	b, _, err := tv.client.SubmitBatch(context.Background(), paidvendor.BatchRequest{Key: allot.IdempotencyKey("b", "0", "s", 0), Items: []paidvendor.BatchItem{{Key: keys[0], Kind: "eval"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tv.client.BatchResults(context.Background(), b, keys); !errors.Is(err, paidvendor.ErrInvalidRequest) {
		t.Errorf("results of a batch in progress: %v, want ErrInvalidRequest", err)
	}
	if _, err := tv.client.CancelBatch(context.Background(), b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tv.client.CancelBatch(context.Background(), b.ID); !errors.Is(err, paidvendor.ErrBatchEnded) {
		t.Errorf("a second cancel: %v, want ErrBatchEnded", err)
	}
}

// A result whose bytes do not match its sha256 is refused, not recorded.
func TestBatchResultsRefusesAResultThatDoesNotMatchItsSHA256(t *testing.T) {
	clock := newTestClock()
	sim := NewSimulator(SimConfig{APIKey: testKey, Clock: clock.Now, BatchDuration: time.Hour})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/content") {
			sim.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, r)
		var out bytes.Buffer
		for line := range strings.Lines(rec.Body.String()) {
			var l vendorapi.BatchResultLine
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Error(err)
			}
			if l.Result != nil {
				l.Result = append(l.Result, " tampered"...)
			}
			_ = json.NewEncoder(&out).Encode(l)
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(out.Bytes())
	}))
	defer srv.Close()
	c, err := paidvendor.NewHTTPClient(srv.URL, testKey, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := batchKeys(1)
	b, _, err := c.SubmitBatch(ctx, paidvendor.BatchRequest{Key: allot.IdempotencyKey("b", "0", "s", 0), Items: []paidvendor.BatchItem{{Key: keys[0], Kind: "eval"}}})
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour)
	if b, err = c.GetBatch(ctx, b.ID); err != nil || !b.Ended() {
		t.Fatalf("batch after its hour: %+v, %v", b, err)
	}
	if res, err := c.BatchResults(ctx, b, keys); !errors.Is(err, paidvendor.ErrBadResponse) || !strings.Contains(err.Error(), "sha256") {
		t.Errorf("a tampered result: %+v, %v; want ErrBadResponse naming the sha256", res, err)
	}
}
