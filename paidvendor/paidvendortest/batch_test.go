package paidvendortest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"allot/paidvendor"
	"allot/paidvendor/vendorapi"
)

// testClock is a clock a test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 8, 3, 9, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// call sends one authorized request with a JSON body (nil for none) and
// returns the status and the body; err is the transport's.
func (tv *testVendor) call(t *testing.T, method, path string, body any) (int, []byte, error) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, tv.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := tv.srv.Client().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

func (tv *testVendor) mustCall(t *testing.T, method, path string, body any, wantStatus int, into any) {
	t.Helper()
	status, data, err := tv.call(t, method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if status != wantStatus {
		t.Fatalf("%s %s: HTTP %d, want %d: %s", method, path, status, wantStatus, data)
	}
	if into != nil {
		if err := json.Unmarshal(data, into); err != nil {
			t.Fatalf("%s %s: body does not parse: %v: %s", method, path, err, data)
		}
	}
}

func (tv *testVendor) batch(t *testing.T, id string) vendorapi.Batch {
	t.Helper()
	var b vendorapi.Batch
	tv.mustCall(t, http.MethodGet, vendorapi.BatchPath(id), nil, http.StatusOK, &b)
	return b
}

// resultLines reads a result file: its status, and its lines by custom ID.
func (tv *testVendor) resultLines(t *testing.T, fileID string) (int, map[string]vendorapi.BatchResultLine) {
	t.Helper()
	status, data, err := tv.call(t, http.MethodGet, vendorapi.FileContentPath(fileID), nil)
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusOK {
		return status, nil
	}
	lines := map[string]vendorapi.BatchResultLine{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l vendorapi.BatchResultLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("result line %q: %v", sc.Text(), err)
		}
		if _, dup := lines[l.CustomID]; dup {
			t.Fatalf("file %s lists %s twice", fileID, l.CustomID)
		}
		lines[l.CustomID] = l
	}
	return status, lines
}

func batchRequest(n int, meta map[string]string) vendorapi.CreateBatchRequest {
	req := vendorapi.CreateBatchRequest{Metadata: meta}
	for i := range n {
		req.Items = append(req.Items, vendorapi.BatchItem{CustomID: fmt.Sprintf("item-%d", i), Kind: "eval", Params: map[string]string{"case": fmt.Sprint(i)}})
	}
	return req
}

// billByKey is the bill's charge lines per idempotency key, refunds apart.
func billByKey(sim *Simulator) map[string][]paidvendor.Charge {
	out := map[string][]paidvendor.Charge{}
	for _, c := range sim.Charges() {
		if !c.Refund {
			out[c.IdempotencyKey] = append(out[c.IdempotencyKey], c)
		}
	}
	return out
}

func newBatchVendor(t *testing.T, cfg SimConfig) (*testVendor, *testClock) {
	clock := newTestClock()
	cfg.Clock = clock.Now
	cfg.PricePerKind = map[string]paidvendor.Cost{"eval": {Amount: 251, Currency: "USD"}}
	if cfg.BatchDuration == 0 {
		cfg.BatchDuration = 4 * time.Hour
	}
	return newTestVendor(t, cfg), clock
}

func TestBatchBillsEachSucceededItemOnceAtHalfPriceAsItFinishes(t *testing.T) {
	tv, clock := newBatchVendor(t, SimConfig{})
	var b vendorapi.Batch
	tv.mustCall(t, http.MethodPost, vendorapi.BatchesPath, batchRequest(4, map[string]string{"allot_key": "k1"}), http.StatusCreated, &b)
	if b.Status != vendorapi.BatchInProgress || b.Counts.Total != 4 || b.Metadata["allot_key"] != "k1" || !b.ExpiresAt.Equal(b.CreatedAt.Add(24*time.Hour)) {
		t.Fatalf("new batch = %+v, want in progress, 4 items, the metadata echoed, a 24h window", b)
	}
	if n := tv.sim.ChargeCount(); n != 0 {
		t.Fatalf("a batch just created billed %d lines, want none before an item is done", n)
	}

	clock.Add(2 * time.Hour) // items 0 and 1 are done at 1h and 2h
	if b = tv.batch(t, b.ID); b.Status != vendorapi.BatchInProgress || b.Counts.Succeeded != 2 {
		t.Fatalf("half way: %+v, want in progress with 2 succeeded", b)
	}
	if bill := billByKey(tv.sim); len(bill) != 2 || len(bill["item-0"]) != 1 || len(bill["item-1"]) != 1 {
		t.Fatalf("half way the bill is %v, want one line each for item-0 and item-1", bill)
	}

	clock.Add(2 * time.Hour)
	b = tv.batch(t, b.ID)
	if b.Status != vendorapi.BatchCompleted || b.Counts.Succeeded != 4 || b.EndedAt == nil || b.OutputFileID == "" || b.ResultsExpireAt == nil {
		t.Fatalf("at the end: %+v, want completed with 4 succeeded, its end time, output file and retention", b)
	}
	for range 3 { // reading again bills nothing again
		tv.batch(t, b.ID)
		tv.sim.Charges()
	}
	bill := billByKey(tv.sim)
	status, out := tv.resultLines(t, b.OutputFileID)
	if status != http.StatusOK || len(out) != 4 {
		t.Fatalf("output file: HTTP %d with %d lines, want 4", status, len(out))
	}
	for i := range 4 {
		id := fmt.Sprintf("item-%d", i)
		lines := bill[id]
		if len(lines) != 1 {
			t.Fatalf("%s has %d charge lines, want exactly 1", id, len(lines))
		}
		// Half of 251, rounded up to a minor unit.
		if c := lines[0]; c.Amount != 126 || c.Currency != "USD" || !c.At.Equal(b.CreatedAt.Add(time.Duration(i+1)*time.Hour)) {
			t.Errorf("%s billed %+v, want 126 USD at its item's end", id, c)
		}
		l := out[id]
		sum := sha256.Sum256(l.Result)
		if l.Task == nil || l.Task.Status != vendorapi.StatusSucceeded || l.Task.ID != lines[0].TaskID || l.Task.SHA256 != hex.EncodeToString(sum[:]) || l.Task.Cost.Amount != 126 {
			t.Errorf("%s output line %+v does not match its charge %+v or its result", id, l.Task, lines[0])
		}
	}
	if status, errs := tv.resultLines(t, b.ErrorFileID); status != http.StatusOK || len(errs) != 0 {
		t.Errorf("error file of a clean batch: HTTP %d with %d lines, want an empty file", status, len(errs))
	}
}

func TestBatchCreateTakesNoIdempotencyKeyAndALostResponseLeavesABatchToAdopt(t *testing.T) {
	tv, clock := newBatchVendor(t, SimConfig{BatchLoseCreateResponse: 1})
	req := batchRequest(2, map[string]string{"allot_key": "batch-key-1"})
	if status, _, err := tv.call(t, http.MethodPost, vendorapi.BatchesPath, req); err == nil {
		t.Fatalf("create with its response lost answered HTTP %d, want no answer", status)
	}
	var page vendorapi.BatchesPage
	tv.mustCall(t, http.MethodGet, vendorapi.BatchesPath, nil, http.StatusOK, &page)
	if len(page.Batches) != 1 || page.Batches[0].Metadata["allot_key"] != "batch-key-1" {
		t.Fatalf("after a lost create the list is %+v, want the batch made, found by its metadata", page.Batches)
	}
	if f := tv.sim.BatchFaults(); len(f.LostCreates) != 1 || f.LostCreates[0] != page.Batches[0].ID {
		t.Errorf("BatchFaults = %+v, want the lost create of %s", f, page.Batches[0].ID)
	}

	// A blind second create is a second batch: the vendor does not
	// deduplicate, and both bill their items.
	if err := tv.sim.SetFaults(SimFaults{}); err != nil {
		t.Fatal(err)
	}
	tv.mustCall(t, http.MethodPost, vendorapi.BatchesPath, req, http.StatusCreated, nil)
	clock.Add(4 * time.Hour)
	if n := len(billByKey(tv.sim)["item-0"]); n != 2 {
		t.Fatalf("item-0 sent in two batches has %d charge lines, want 2: the simulator must bill a blind second create as the real vendors do", n)
	}
	if got := tv.sim.Stats().Batches; got != 2 {
		t.Errorf("Stats().Batches = %d, want 2", got)
	}
}

func TestBatchEndedHalfWayBillsOnlyWhatFinished(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cfg        SimConfig
		cancelAt   time.Duration // a client's cancel, if not 0
		wantStatus string
		wantDone   int
		wantCode   string
	}{
		{"expiry fault", SimConfig{BatchExpireHalfway: 1}, 0, vendorapi.BatchExpired, 2, vendorapi.CodeItemExpired},
		{"vendor cancel fault", SimConfig{BatchCancelHalfway: 1}, 0, vendorapi.BatchCancelled, 2, vendorapi.CodeItemCancelled},
		// Items 0 to 2 of a 1ns batch are done at its start: half is
		// counted in items, not in time.
		{"expiry fault on a batch done at once", SimConfig{BatchExpireHalfway: 1, BatchDuration: time.Nanosecond}, 0, vendorapi.BatchExpired, 2, vendorapi.CodeItemExpired},
		{"client cancel", SimConfig{}, 3 * time.Hour, vendorapi.BatchCancelled, 3, vendorapi.CodeItemCancelled},
		{"window shorter than the work", SimConfig{BatchDuration: 8 * time.Hour}, 0, vendorapi.BatchExpired, 1, vendorapi.CodeItemExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tv, clock := newBatchVendor(t, tc.cfg)
			req := batchRequest(4, nil)
			if tc.name == "window shorter than the work" {
				req.CompletionWindow = "2h" // item 0 is done at 2h, item 1 at 4h
			}
			var b vendorapi.Batch
			tv.mustCall(t, http.MethodPost, vendorapi.BatchesPath, req, http.StatusCreated, &b)
			if tc.cancelAt > 0 {
				clock.Add(tc.cancelAt)
				tv.mustCall(t, http.MethodPost, vendorapi.BatchCancelPath(b.ID), nil, http.StatusOK, &b)
				if b.Status != vendorapi.BatchCancelled {
					t.Fatalf("cancel answered %+v, want cancelled", b)
				}
				status, data, _ := tv.call(t, http.MethodPost, vendorapi.BatchCancelPath(b.ID), nil)
				if status != http.StatusConflict || !strings.Contains(string(data), vendorapi.CodeBatchEnded) {
					t.Errorf("a second cancel: HTTP %d %s, want 409 %s", status, data, vendorapi.CodeBatchEnded)
				}
			}
			clock.Add(24 * time.Hour)
			b = tv.batch(t, b.ID)
			left := b.Counts.Expired + b.Counts.Cancelled
			if b.Status != tc.wantStatus || b.Counts.Succeeded != tc.wantDone || left != 4-tc.wantDone {
				t.Fatalf("batch = %+v, want %s with %d succeeded and the rest left", b, tc.wantStatus, tc.wantDone)
			}
			bill := billByKey(tv.sim)
			_, out := tv.resultLines(t, b.OutputFileID)
			_, errs := tv.resultLines(t, b.ErrorFileID)
			for i := range 4 {
				id := fmt.Sprintf("item-%d", i)
				if i < tc.wantDone {
					if len(bill[id]) != 1 || out[id].Task == nil || out[id].Task.ID != bill[id][0].TaskID {
						t.Errorf("%s finished before the end: %d charge lines and output %+v, want one line and its result", id, len(bill[id]), out[id])
					}
					continue
				}
				if len(bill[id]) != 0 || out[id].Task != nil || errs[id].Error == nil || errs[id].Error.Code != tc.wantCode {
					t.Errorf("%s left unprocessed: %d charge lines, output %+v, error line %+v; want none, none and %s", id, len(bill[id]), out[id], errs[id], tc.wantCode)
				}
			}
		})
	}
}

func TestBatchFailedItemIsReportedNotBilled(t *testing.T) {
	tv, clock := newBatchVendor(t, SimConfig{})
	req := batchRequest(2, nil)
	req.Items[1].Params[FailParam] = "input too long"
	var b vendorapi.Batch
	tv.mustCall(t, http.MethodPost, vendorapi.BatchesPath, req, http.StatusCreated, &b)
	clock.Add(4 * time.Hour)
	b = tv.batch(t, b.ID)
	if b.Counts.Succeeded != 1 || b.Counts.Failed != 1 {
		t.Fatalf("counts = %+v, want 1 succeeded and 1 failed", b.Counts)
	}
	if bill := billByKey(tv.sim); len(bill["item-1"]) != 0 || len(bill["item-0"]) != 1 {
		t.Errorf("bill = %v, want item-0 billed once and the failed item-1 not at all", bill)
	}
	_, errs := tv.resultLines(t, b.ErrorFileID)
	if l := errs["item-1"]; l.Error == nil || l.Error.Code != vendorapi.CodeTaskFailed || l.Error.Message != "input too long" || l.Task == nil || l.Task.Status != vendorapi.StatusFailed {
		t.Errorf("error line of the failed item = %+v, want task_failed with its reason", l)
	}
}

func TestBatchResultsGoneAnswer410(t *testing.T) {
	tv, clock := newBatchVendor(t, SimConfig{BatchOutputGone: 1, BatchRetention: 48 * time.Hour})
	var b vendorapi.Batch
	tv.mustCall(t, http.MethodPost, vendorapi.BatchesPath, batchRequest(2, nil), http.StatusCreated, &b)
	clock.Add(4 * time.Hour)
	b = tv.batch(t, b.ID)
	if status, _ := tv.resultLines(t, b.OutputFileID); status != http.StatusGone {
		t.Errorf("the output file with the gone fault: HTTP %d, want 410", status)
	}
	if status, _ := tv.resultLines(t, b.ErrorFileID); status != http.StatusOK {
		t.Errorf("its error file: HTTP %d, want 200 until the retention ends", status)
	}
	if !b.ResultsExpireAt.Equal(b.EndedAt.Add(48 * time.Hour)) {
		t.Errorf("results_expire_at = %v, want 48h after %v", b.ResultsExpireAt, b.EndedAt)
	}
	clock.Add(48 * time.Hour)
	status, data, _ := tv.call(t, http.MethodGet, vendorapi.FileContentPath(b.ErrorFileID), nil)
	if status != http.StatusGone || !strings.Contains(string(data), vendorapi.CodeFileExpired) {
		t.Errorf("past the retention: HTTP %d %s, want 410 %s", status, data, vendorapi.CodeFileExpired)
	}
	if n := len(billByKey(tv.sim)); n != 2 {
		t.Errorf("results gone, the bill has lines for %d items, want both still billed", n)
	}
	if status, _, _ := tv.call(t, http.MethodGet, vendorapi.FileContentPath("vf_nope"), nil); status != http.StatusNotFound {
		t.Errorf("an unknown file: HTTP %d, want 404", status)
	}
}

func TestBatchRefusesABadRequestAndMakesNothing(t *testing.T) {
	tv, _ := newBatchVendor(t, SimConfig{})
	dup := batchRequest(3, nil)
	dup.Items[2].CustomID = "item-0"
	long := batchRequest(1, nil)
	long.Items[0].CustomID = strings.Repeat("x", vendorapi.MaxCustomIDLength+1)
	slash := batchRequest(1, nil)
	slash.Items[0].CustomID = "a/b"
	noKind := batchRequest(1, nil)
	noKind.Items[0].Kind = ""
	window := batchRequest(1, nil)
	window.CompletionWindow = "48h"
	meta := batchRequest(1, map[string]string{})
	for i := range 17 {
		meta.Metadata[fmt.Sprint("k", i)] = "v"
	}
	for _, tc := range []struct {
		name string
		req  any
		code string
		says string
	}{
		{"duplicate custom_id", dup, vendorapi.CodeDuplicateCustomID, `items 0 and 2 share custom_id "item-0"`},
		{"custom_id too long", long, vendorapi.CodeBadBatch, "1 to 64 letters"},
		{"custom_id with a slash", slash, vendorapi.CodeBadBatch, "1 to 64 letters"},
		{"no kind", noKind, vendorapi.CodeBadBatch, "kind is required"},
		{"window too long", window, vendorapi.CodeBadBatch, "at most 24h0m0s"},
		{"too much metadata", meta, vendorapi.CodeBadBatch, "at most 16 pairs"},
		{"no items", vendorapi.CreateBatchRequest{}, vendorapi.CodeBadBatch, "at least one item"},
		{"not JSON", "[", vendorapi.CodeBadJSON, "not a JSON batch request"},
	} {
		status, data, err := tv.call(t, http.MethodPost, vendorapi.BatchesPath, tc.req)
		if err != nil {
			t.Fatal(err)
		}
		var eb vendorapi.ErrorBody
		_ = json.Unmarshal(data, &eb)
		if status != http.StatusBadRequest || eb.Error.Code != tc.code || !strings.Contains(eb.Error.Message, tc.says) {
			t.Errorf("%s: HTTP %d %+v, want 400 %s saying %q", tc.name, status, eb.Error, tc.code, tc.says)
		}
	}
	if n := tv.sim.BatchCount(); n != 0 {
		t.Errorf("refused requests made %d batches, want none", n)
	}
}

func TestBatchListPagesOldestFirst(t *testing.T) {
	tv, _ := newBatchVendor(t, SimConfig{})
	var ids []string
	for i := range 5 {
		var b vendorapi.Batch
		tv.mustCall(t, http.MethodPost, vendorapi.BatchesPath, batchRequest(1, map[string]string{"n": fmt.Sprint(i)}), http.StatusCreated, &b)
		ids = append(ids, b.ID)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("the list does not end")
		}
		var page vendorapi.BatchesPage
		tv.mustCall(t, http.MethodGet, vendorapi.BatchesPath+"?limit=2&after="+cursor, nil, http.StatusOK, &page)
		for _, b := range page.Batches {
			got = append(got, b.ID)
		}
		cursor = page.NextCursor
		if !page.HasMore {
			break
		}
	}
	if strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Errorf("listed %v, want %v in creation order", got, ids)
	}
	for _, q := range []string{"?after=99", "?after=x", "?limit=0"} {
		if status, _, _ := tv.call(t, http.MethodGet, vendorapi.BatchesPath+q, nil); status != http.StatusBadRequest {
			t.Errorf("GET %s%s: HTTP %d, want 400", vendorapi.BatchesPath, q, status)
		}
	}
}

func TestBatchStateSurvivesRestartWithoutBillingTwice(t *testing.T) {
	state := filepath.Join(t.TempDir(), "vendor.json")
	clock := newTestClock()
	cfg := SimConfig{APIKey: testKey, Clock: clock.Now, StateFile: state, BatchDuration: 4 * time.Hour, BatchExpireHalfway: 0}
	tv := newTestVendor(t, cfg)
	var b vendorapi.Batch
	tv.mustCall(t, http.MethodPost, vendorapi.BatchesPath, batchRequest(4, map[string]string{"allot_key": "k"}), http.StatusCreated, &b)
	clock.Add(2 * time.Hour)
	before := tv.sim.Charges()
	if len(before) != 2 {
		t.Fatalf("half way %d lines, want 2", len(before))
	}

	tv2 := newTestVendor(t, cfg) // the same state file: a restart
	if got := tv2.sim.Charges(); len(got) != 2 || got[0] != before[0] || got[1] != before[1] {
		t.Fatalf("after a restart the bill is %+v, want %+v", got, before)
	}
	clock.Add(2 * time.Hour)
	b = tv2.batch(t, b.ID)
	if b.Status != vendorapi.BatchCompleted || b.Metadata["allot_key"] != "k" {
		t.Fatalf("after a restart the batch is %+v, want completed with its metadata", b)
	}
	bill := billByKey(tv2.sim)
	for i := range 4 {
		if n := len(bill[fmt.Sprintf("item-%d", i)]); n != 1 {
			t.Errorf("item-%d has %d lines across a restart, want 1", i, n)
		}
	}
	if status, out := tv2.resultLines(t, b.OutputFileID); status != http.StatusOK || len(out) != 4 {
		t.Errorf("output after a restart: HTTP %d, %d lines, want 4", status, len(out))
	}
	tv3 := newTestVendor(t, cfg)
	if n := tv3.sim.ChargeCount(); n != 4 {
		t.Errorf("a second restart has %d lines, want 4", n)
	}
}

func TestBatchFaultSettingsValidation(t *testing.T) {
	for _, f := range []SimFaults{{BatchLoseCreateResponse: -0.1}, {BatchExpireHalfway: 1.5}, {BatchCancelHalfway: 2}, {BatchOutputGone: -1}} {
		if err := f.validate(); err == nil || !strings.Contains(err.Error(), "Batch") {
			t.Errorf("validate(%+v) = %v, want an error naming the batch setting", f, err)
		}
	}
	if _, err := OpenSimulator(SimConfig{APIKey: testKey, BatchDuration: -time.Second}); err == nil || !strings.Contains(err.Error(), "BatchDuration") {
		t.Errorf("a negative BatchDuration: %v, want an error naming it", err)
	}
}
