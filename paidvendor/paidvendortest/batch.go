package paidvendortest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"allot/paidvendor"
	"allot/paidvendor/vendorapi"
)

// The simulator's batch API (see vendorapi's batch.go for the wire).
//
// A batch's course is fixed when it is created, from its size, the
// simulator's BatchDuration and the faults drawn for it: item i of n is done
// at CreatedAt + BatchDuration*(i+1)/n, and the batch ends once all are
// done, when its completion window runs out, or when a fault (or a client's
// cancel) ends it half way. What has happened by now is worked out lazily,
// on every request, so a reader of the bill sees an item's charge line as
// soon as the item is done, whoever asks.

// DefaultBatchRetention is how long a batch's result files stay readable
// after it ends when SimConfig.BatchRetention is zero: Anthropic's 29 days.
const DefaultBatchRetention = 29 * 24 * time.Hour

// maxBatchBody bounds a batch request's body.
const maxBatchBody = 64 << 20

// batchSeedSalt sets the batch faults' random source apart from the others.
const batchSeedSalt = 0x5eed_ba7c

// Metadata limits, the real vendors' (OpenAI's): 16 pairs, short keys.
const (
	maxMetadataPairs = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
	maxBatchWindow   = 24 * time.Hour
	itemSucceeded    = "succeeded"
	itemFailed       = "failed"
	itemExpired      = "expired"
	itemCancelled    = "cancelled"
	fileKindOutput   = "output"
	fileKindError    = "error"
)

type simBatch struct {
	ID        string            `json:"id"`
	Seq       int64             `json:"seq"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Items     []*simBatchItem   `json:"items"`
	CreatedAt time.Time         `json:"created_at"`
	Window    time.Duration     `json:"window"`
	Duration  time.Duration     `json:"duration"`
	// Cut is how many items (the first ones) get done before the batch
	// ends; EndAt and EndStatus are how it ends by itself.
	Cut       int       `json:"cut"`
	EndAt     time.Time `json:"end_at"`
	EndStatus string    `json:"end_status"`

	Status       string     `json:"status"`
	EndedAt      *time.Time `json:"ended_at,omitempty"`
	OutputFileID string     `json:"output_file_id,omitempty"`
	ErrorFileID  string     `json:"error_file_id,omitempty"`
	// OutputGone is the fault of an output file that cannot be read.
	OutputGone bool `json:"output_gone,omitempty"`
}

type simBatchItem struct {
	CustomID string            `json:"custom_id"`
	Kind     string            `json:"kind"`
	Params   map[string]string `json:"params"`
	TaskID   string            `json:"task_id"`
	Cost     vendorapi.Cost    `json:"cost"` // half the kind's price
	SHA256   string            `json:"sha256"`
	State    string            `json:"state,omitempty"` // "" until done or ended
	DoneAt   *time.Time        `json:"done_at,omitempty"`
	LineID   string            `json:"line_id,omitempty"` // its charge line, once billed
}

func (b *simBatch) doneAt(i int) time.Time {
	n := len(b.Items)
	return b.CreatedAt.Add(time.Duration(int64(b.Duration) * int64(i+1) / int64(n)))
}

// BatchFaults lists the batch faults the simulator met, for tests: the
// IDs of the batches whose create response was dropped, that expired or
// were cancelled half way, and whose output file is gone.
type BatchFaults struct {
	LostCreates, ExpiredHalfway, CancelledHalfway, OutputGone []string
}

// BatchFaults returns the batch faults met so far.
func (s *Simulator) BatchFaults() BatchFaults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batchFaults
}

// BatchCount is the number of batches created.
func (s *Simulator) BatchCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.batchOrder)
}

// batchPrice is half a price, rounded up to a minor unit.
func batchPrice(c paidvendor.Cost) vendorapi.Cost {
	return vendorapi.Cost{Amount: c.Amount/2 + c.Amount%2, Currency: c.Currency}
}

func validCustomID(id string) bool {
	if id == "" || len(id) > vendorapi.MaxCustomIDLength {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// checkBatchRequest says what is wrong with a request, if anything, and
// the error code that says so.
func checkBatchRequest(req vendorapi.CreateBatchRequest) (window time.Duration, code, msg string) {
	switch n := len(req.Items); {
	case n == 0:
		return 0, vendorapi.CodeBadBatch, "a batch needs at least one item"
	case n > vendorapi.MaxBatchItems:
		return 0, vendorapi.CodeBadBatch, fmt.Sprintf("a batch takes at most %d items, this one has %d: split it", vendorapi.MaxBatchItems, n)
	}
	seen := make(map[string]int, len(req.Items))
	for i, it := range req.Items {
		if !validCustomID(it.CustomID) {
			return 0, vendorapi.CodeBadBatch, fmt.Sprintf("item %d: custom_id %.80q must be 1 to %d letters, digits, '-' or '_'", i, it.CustomID, vendorapi.MaxCustomIDLength)
		}
		if j, dup := seen[it.CustomID]; dup {
			return 0, vendorapi.CodeDuplicateCustomID, fmt.Sprintf("items %d and %d share custom_id %q: each item of a batch needs its own", j, i, it.CustomID)
		}
		seen[it.CustomID] = i
		if it.Kind == "" {
			return 0, vendorapi.CodeBadBatch, fmt.Sprintf("item %d (%s): kind is required", i, it.CustomID)
		}
	}
	if len(req.Metadata) > maxMetadataPairs {
		return 0, vendorapi.CodeBadBatch, fmt.Sprintf("metadata takes at most %d pairs, got %d", maxMetadataPairs, len(req.Metadata))
	}
	for k, v := range req.Metadata {
		if k == "" || len(k) > maxMetadataKey || len(v) > maxMetadataValue {
			return 0, vendorapi.CodeBadBatch, fmt.Sprintf("metadata key %.80q: keys are 1 to %d bytes, values at most %d", k, maxMetadataKey, maxMetadataValue)
		}
	}
	raw := req.CompletionWindow
	if raw == "" {
		raw = vendorapi.DefaultCompletionWindow
	}
	window, err := time.ParseDuration(raw)
	if err != nil || window <= 0 || window > maxBatchWindow {
		return 0, vendorapi.CodeBadBatch, fmt.Sprintf("completion_window %.40q must be a duration above 0 and at most %v, such as %q", raw, maxBatchWindow, vendorapi.DefaultCompletionWindow)
	}
	return window, "", ""
}

func (s *Simulator) handleCreateBatch(w http.ResponseWriter, r *http.Request) {
	var req vendorapi.CreateBatchRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBatchBody)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, vendorapi.CodeBadJSON, "body is not a JSON batch request")
		return
	}
	window, code, msg := checkBatchRequest(req)
	if code != "" {
		writeError(w, http.StatusBadRequest, code, msg)
		return
	}

	s.mu.Lock()
	now := s.now().UTC()
	s.advanceBatchesLocked(now)
	// Four draws per valid create, whatever the settings, so the batch
	// faults depend only on the seed and the order of creates.
	loseDraw, expireDraw, cancelDraw, goneDraw := s.batchRng.Float64(), s.batchRng.Float64(), s.batchRng.Float64(), s.batchRng.Float64()
	faults := s.faults
	b, err := s.newBatchLocked(req, now, window)
	if err != nil {
		s.mu.Unlock()
		writeError(w, http.StatusInternalServerError, codeStateNotSaved, "the vendor could not create the batch; nothing was charged")
		return
	}
	n := len(b.Items)
	b.Cut, b.EndAt, b.EndStatus = n, now.Add(b.Duration), vendorapi.BatchCompleted
	switch {
	case expireDraw < faults.BatchExpireHalfway:
		b.Cut, b.EndAt, b.EndStatus = n/2, now.Add(b.Duration/2), vendorapi.BatchExpired
	case cancelDraw < faults.BatchCancelHalfway:
		b.Cut, b.EndAt, b.EndStatus = n/2, now.Add(b.Duration/2), vendorapi.BatchCancelled
	case b.Duration > window:
		b.Cut, b.EndAt, b.EndStatus = 0, now.Add(window), vendorapi.BatchExpired
		for b.Cut < n && !b.doneAt(b.Cut).After(b.EndAt) {
			b.Cut++
		}
	}
	b.OutputGone = goneDraw < faults.BatchOutputGone
	undo := s.batchMarkLocked()
	s.batches[b.ID] = b
	s.batchOrder = append(s.batchOrder, b.ID)
	s.batchFaults = noteBatchFaults(s.batchFaults, b, loseDraw < faults.BatchLoseCreateResponse)
	s.advanceBatchesLocked(now) // a batch of no duration is done at once
	if err := s.saveLocked(); err != nil {
		undo()
		s.mu.Unlock()
		s.log.Error("vendorsim: cannot save state; batch refused", "error", err)
		writeError(w, http.StatusInternalServerError, codeStateNotSaved, "the vendor could not record the batch; nothing was charged")
		return
	}
	wb := s.wireBatchLocked(b)
	s.mu.Unlock()

	if loseDraw < faults.BatchLoseCreateResponse {
		dropResponse(w)
		return
	}
	writeJSON(w, http.StatusCreated, wb)
}

func noteBatchFaults(f BatchFaults, b *simBatch, lost bool) BatchFaults {
	if lost {
		f.LostCreates = append(f.LostCreates, b.ID)
	}
	if b.Cut < len(b.Items) && b.EndStatus == vendorapi.BatchExpired {
		f.ExpiredHalfway = append(f.ExpiredHalfway, b.ID)
	}
	if b.EndStatus == vendorapi.BatchCancelled {
		f.CancelledHalfway = append(f.CancelledHalfway, b.ID)
	}
	if b.OutputGone {
		f.OutputGone = append(f.OutputGone, b.ID)
	}
	return f
}

// batchMarkLocked returns what takes back a batch about to be added and
// the bill lines its first advance appends.
func (s *Simulator) batchMarkLocked() (undo func()) {
	undoBill := s.billMarkLocked()
	nOrder, faults := len(s.batchOrder), s.batchFaults
	return func() {
		for _, id := range s.batchOrder[nOrder:] {
			b := s.batches[id]
			delete(s.batches, id)
			delete(s.files, b.OutputFileID)
			delete(s.files, b.ErrorFileID)
		}
		s.batchOrder = s.batchOrder[:nOrder]
		s.batchFaults = faults
		undoBill()
	}
}

func (s *Simulator) newBatchLocked(req vendorapi.CreateBatchRequest, now time.Time, window time.Duration) (*simBatch, error) {
	id, err := newSimID(vendorapi.BatchIDPrefix)
	if err != nil {
		return nil, err
	}
	s.lastBatchSeq++
	b := &simBatch{ID: id, Seq: s.lastBatchSeq, Metadata: req.Metadata, CreatedAt: now, Window: window, Duration: s.batchDuration, Status: vendorapi.BatchInProgress}
	b.Items = make([]*simBatchItem, 0, len(req.Items))
	for _, it := range req.Items {
		taskID, err := newSimTaskID()
		if err != nil {
			return nil, err
		}
		price, ok := s.prices[it.Kind]
		if !ok {
			price = s.defaultPrice
		}
		if it.Params == nil {
			it.Params = map[string]string{}
		}
		item := &simBatchItem{CustomID: it.CustomID, Kind: it.Kind, Params: it.Params, TaskID: taskID, Cost: batchPrice(price)}
		sum := sha256.Sum256(item.resultBytes())
		item.SHA256 = hex.EncodeToString(sum[:])
		b.Items = append(b.Items, item)
	}
	return b, nil
}

func (it *simBatchItem) resultBytes() []byte {
	return simResultBytes(&simTask{ID: it.TaskID, Kind: it.Kind, Params: it.Params})
}

// advanceBatchesLocked works out what the open batches did up to now:
// items done (and billed, when they succeeded) and batches ended.
func (s *Simulator) advanceBatchesLocked(now time.Time) {
	for _, id := range s.batchOrder[s.firstOpenBatch:] {
		b := s.batches[id]
		if b.Status != vendorapi.BatchInProgress {
			continue
		}
		s.runBatchLocked(b, now, b.EndAt, b.EndStatus)
	}
	for s.firstOpenBatch < len(s.batchOrder) && s.batches[s.batchOrder[s.firstOpenBatch]].Status != vendorapi.BatchInProgress {
		s.firstOpenBatch++
	}
}

// runBatchLocked does the items of b due by now (and before endAt), and
// ends b as endStatus if endAt has come.
func (s *Simulator) runBatchLocked(b *simBatch, now, endAt time.Time, endStatus string) {
	until := now
	if endAt.Before(until) {
		until = endAt
	}
	for i := 0; i < b.Cut; i++ {
		it := b.Items[i]
		if it.State != "" {
			continue
		}
		at := b.doneAt(i)
		if at.After(until) {
			break
		}
		it.DoneAt = &at
		if it.Params[FailParam] != "" {
			it.State = itemFailed
			continue
		}
		it.State = itemSucceeded
		it.LineID = s.appendLineLocked(paidvendor.Charge{TaskID: it.TaskID, IdempotencyKey: it.CustomID, Amount: it.Cost.Amount, Currency: it.Cost.Currency, At: at})
	}
	if now.Before(endAt) {
		return
	}
	left := itemExpired
	if endStatus == vendorapi.BatchCancelled {
		left = itemCancelled
	}
	for _, it := range b.Items {
		if it.State == "" {
			it.State = left
		}
	}
	ended := endAt
	b.Status, b.EndedAt = endStatus, &ended
	// The files are named after the batch: working them out again after a
	// restart names them the same.
	out, errf := vendorapi.FileIDPrefix+b.ID[len(vendorapi.BatchIDPrefix):]+"o", vendorapi.FileIDPrefix+b.ID[len(vendorapi.BatchIDPrefix):]+"e"
	b.OutputFileID, b.ErrorFileID = out, errf
	s.files[out] = simFile{batchID: b.ID, kind: fileKindOutput}
	s.files[errf] = simFile{batchID: b.ID, kind: fileKindError}
}

type simFile struct {
	batchID string
	kind    string
}

func (s *Simulator) wireBatchLocked(b *simBatch) vendorapi.Batch {
	wb := vendorapi.Batch{
		ID: b.ID, Status: b.Status, Metadata: b.Metadata, CreatedAt: b.CreatedAt, ExpiresAt: b.CreatedAt.Add(b.Window),
		Counts: vendorapi.BatchCounts{Total: len(b.Items)}, OutputFileID: b.OutputFileID, ErrorFileID: b.ErrorFileID,
	}
	if b.EndedAt != nil {
		ended, gone := *b.EndedAt, b.EndedAt.Add(s.batchRetention)
		wb.EndedAt, wb.ResultsExpireAt = &ended, &gone
	}
	for _, it := range b.Items {
		switch it.State {
		case itemSucceeded:
			wb.Counts.Succeeded++
		case itemFailed:
			wb.Counts.Failed++
		case itemExpired:
			wb.Counts.Expired++
		case itemCancelled:
			wb.Counts.Cancelled++
		}
	}
	return wb
}

func (s *Simulator) batchFromPath(w http.ResponseWriter, r *http.Request) (*simBatch, bool) {
	id := r.PathValue("id")
	s.mu.Lock()
	b := s.batches[id]
	s.mu.Unlock()
	if b == nil {
		writeError(w, http.StatusNotFound, vendorapi.CodeNotFound, "no such batch")
		return nil, false
	}
	return b, true
}

// advanceAndSave advances the batches and keeps what changed.
func (s *Simulator) advanceAndSaveLocked() {
	before := s.lastSeq
	open := s.firstOpenBatch
	s.advanceBatchesLocked(s.now().UTC())
	if s.lastSeq == before && s.firstOpenBatch == open {
		return
	}
	// A failed save loses nothing: what is worked out lazily is worked
	// out again, the same, after a restart.
	if err := s.saveLocked(); err != nil {
		s.log.Error("vendorsim: cannot save state after batch progress", "error", err)
	}
}

func (s *Simulator) handleBatch(w http.ResponseWriter, r *http.Request) {
	b, ok := s.batchFromPath(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	s.advanceAndSaveLocked()
	wb := s.wireBatchLocked(b)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, wb)
}

func (s *Simulator) handleCancelBatch(w http.ResponseWriter, r *http.Request) {
	b, ok := s.batchFromPath(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	now := s.now().UTC()
	s.advanceBatchesLocked(now)
	if b.Status != vendorapi.BatchInProgress {
		wb := s.wireBatchLocked(b)
		s.mu.Unlock()
		writeError(w, http.StatusConflict, vendorapi.CodeBatchEnded, fmt.Sprintf("batch %s has ended (%s, %d succeeded): there is nothing to cancel", wb.ID, wb.Status, wb.Counts.Succeeded))
		return
	}
	s.runBatchLocked(b, now, now, vendorapi.BatchCancelled)
	s.advanceBatchesLocked(now)
	if err := s.saveLocked(); err != nil {
		s.log.Error("vendorsim: cannot save state after a cancel", "error", err)
	}
	wb := s.wireBatchLocked(b)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, wb)
}

func (s *Simulator) handleListBatches(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := pageLimit(w, q.Get(vendorapi.LimitParam), vendorapi.DefaultBatchesLimit, vendorapi.MaxBatchesLimit)
	if !ok {
		return
	}
	after := q.Get(vendorapi.AfterParam)
	s.mu.Lock()
	defer s.mu.Unlock()
	from, ok := cursorSeq(after, s.lastBatchSeq)
	if !ok {
		writeBadCursor(w, after)
		return
	}
	s.advanceAndSaveLocked()
	page := vendorapi.BatchesPage{Batches: []vendorapi.Batch{}, NextCursor: strconv.FormatInt(from, 10)}
	// Batches are numbered 1, 2, ... in batchOrder: the page starts at
	// index from.
	for i := int(from); i < len(s.batchOrder); i++ {
		if len(page.Batches) == limit {
			page.HasMore = true
			break
		}
		b := s.batches[s.batchOrder[i]]
		page.Batches = append(page.Batches, s.wireBatchLocked(b))
		page.NextCursor = strconv.FormatInt(b.Seq, 10)
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Simulator) handleFileContent(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.advanceAndSaveLocked()
	f, ok := s.files[r.PathValue("id")]
	if !ok {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, vendorapi.CodeNotFound, "no such file")
		return
	}
	b := s.batches[f.batchID]
	if (f.kind == fileKindOutput && b.OutputGone) || !s.now().Before(b.EndedAt.Add(s.batchRetention)) {
		s.mu.Unlock()
		writeError(w, http.StatusGone, vendorapi.CodeFileExpired, fmt.Sprintf("the results of batch %s are gone: they were kept for %v after it ended", b.ID, s.batchRetention))
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, it := range b.Items {
		line := vendorapi.BatchResultLine{CustomID: it.CustomID}
		switch {
		case f.kind == fileKindOutput && it.State == itemSucceeded:
			cost := it.Cost
			line.Task = &vendorapi.Task{ID: it.TaskID, IdempotencyKey: it.CustomID, Kind: it.Kind, Status: vendorapi.StatusSucceeded, SHA256: it.SHA256, Cost: &cost}
			line.Result = it.resultBytes()
		case it.State == itemFailed:
			line.Task = &vendorapi.Task{ID: it.TaskID, IdempotencyKey: it.CustomID, Kind: it.Kind, Status: vendorapi.StatusFailed, Error: it.Params[FailParam], Cost: &vendorapi.Cost{Currency: it.Cost.Currency}}
			line.Error = &vendorapi.ErrorDetail{Code: vendorapi.CodeTaskFailed, Message: it.Params[FailParam]}
		case f.kind == fileKindError && it.State == itemExpired:
			line.Error = &vendorapi.ErrorDetail{Code: vendorapi.CodeItemExpired, Message: "the batch's completion window ended before this item was processed; it was not billed"}
		case f.kind == fileKindError && it.State == itemCancelled:
			line.Error = &vendorapi.ErrorDetail{Code: vendorapi.CodeItemCancelled, Message: "the batch was cancelled before this item was processed; it was not billed"}
		default:
			continue
		}
		_ = enc.Encode(line) // a BatchResultLine always encodes
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/jsonl")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// newSimID is prefix and 32 random hex digits: the simulator's task, batch
// and file IDs.
func newSimID(prefix string) (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("paidvendortest: simulator: id: %w", err)
	}
	return prefix + hex.EncodeToString(b[:]), nil
}
