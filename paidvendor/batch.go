package paidvendor

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"allot"
	"allot/paidvendor/vendorapi"
)

// The batch half of the HTTP client (the API is in vendorapi's batch.go).
// A batch create takes no idempotency key at any real vendor, so the create
// is an intent of its own (design, "Batches"): its key goes into the
// batch's metadata, and SubmitBatch looks for a batch under that key before
// it creates one and after a create whose answer was lost. It never creates
// twice for one key on its own: an outcome it cannot settle is
// ErrBatchOutcomeUnknown, and the next SubmitBatch looks first again.

// BatchKeyMetadata is the metadata key of a batch's own idempotency key.
const BatchKeyMetadata = "allot_batch_key"

// maxBatchResultsBody bounds one result file: 50,000 items of a small
// result each.
const maxBatchResultsBody = 256 << 20

var (
	// ErrBatchOutcomeUnknown: a create's answer was lost and no batch
	// under its key is listed (yet). Call SubmitBatch again later: it looks
	// before it creates.
	ErrBatchOutcomeUnknown = errors.New("paidvendor: batch create outcome unknown")
	// ErrBatchEnded: a cancel of a batch that has ended (HTTP 409).
	ErrBatchEnded = errors.New("paidvendor: the batch has ended")
	// ErrResultsGone: a result file is past its retention, or lost (HTTP 410).
	ErrResultsGone = errors.New("paidvendor: the batch's results are gone")
)

// BatchClient is a vendor that takes batches: HTTPClient, or a Go adapter
// that keeps the same rules (a create looks for its key first; an
// unsettled create is ErrBatchOutcomeUnknown; results say each item's
// outcome).
type BatchClient interface {
	SubmitBatch(ctx context.Context, req BatchRequest) (b Batch, adopted bool, err error)
	FindBatch(ctx context.Context, key string) (Batch, error)
	GetBatch(ctx context.Context, id string) (Batch, error)
	CancelBatch(ctx context.Context, id string) (Batch, error)
	BatchResults(ctx context.Context, b Batch, keys []string) ([]ItemResult, error)
}

var _ BatchClient = (*HTTPClient)(nil)

// BatchItem is one paid task sent in a batch: Key is its idempotency key,
// sent as the item's custom ID and billed under it.
type BatchItem struct {
	Key    string
	Kind   string
	Params map[string]string
}

// BatchRequest is one batch to create: Key is the batch's own idempotency
// key, Window its completion window (0: the vendor's 24h).
type BatchRequest struct {
	Key    string
	Items  []BatchItem
	Window time.Duration
}

// Batch is a batch as the vendor reports it.
type Batch struct {
	ID           string
	Key          string // the batch's idempotency key, from its metadata
	Status       string // one of vendorapi's Batch* states
	Counts       vendorapi.BatchCounts
	CreatedAt    time.Time
	ExpiresAt    time.Time
	EndedAt      time.Time // zero while in progress
	OutputFileID string
	ErrorFileID  string
	// ResultsExpireAt is when the vendor drops the result files: read
	// them well before.
	ResultsExpireAt time.Time
}

// Ended says the batch will not change again.
func (b Batch) Ended() bool { return b.Status != vendorapi.BatchInProgress }

// ItemOutcome says where an item of an ended batch stands; the words are
// allot's, which the ledger stores.
type ItemOutcome = allot.BatchItemOutcome

const (
	// ItemSucceeded: the result is here and was billed.
	ItemSucceeded = allot.BatchItemSucceeded
	// ItemFailed: the vendor ran it and it failed; not billed.
	ItemFailed = allot.BatchItemFailed
	// ItemNotProcessed: expired or cancelled before it ran; not billed,
	// and safe to send again under the same key.
	ItemNotProcessed = allot.BatchItemNotProcessed
	// ItemResultLost: the files that would say are gone, so the item may
	// have run and been billed. Never send it again: park it.
	ItemResultLost = allot.BatchItemResultLost
)

// ItemResult is what an ended batch did with one item.
type ItemResult struct {
	Key     string
	Outcome ItemOutcome
	Task    Task   // the item's task (ID, cost, sha256), when the vendor says
	Result  []byte // the result bytes, once succeeded (their sha256 checked)
	Error   string // why it failed or was not processed
}

// SubmitBatch creates the batch for req.Key, or returns the one the vendor
// already has under it (adopted). See the package's batch rules above.
//
// It is only as safe as the vendor's list is current: a vendor that lists
// a new batch late would let a SubmitBatch right after
// ErrBatchOutcomeUnknown create a second one. After that error a caller
// therefore calls FindBatch, not SubmitBatch, until the vendor's listing
// delay has passed (the batch step keeps that state in its intent).
func (c *HTTPClient) SubmitBatch(ctx context.Context, req BatchRequest) (b Batch, adopted bool, err error) {
	const op = "submit batch"
	body, err := batchBody(req)
	if err != nil {
		return Batch{}, false, fmt.Errorf("paidvendor: %s: %w", op, err)
	}
	if b, err := c.FindBatch(ctx, req.Key); err == nil {
		return b, true, nil
	} else if !errors.Is(err, ErrNotFound) {
		return Batch{}, false, err
	}
	resp, err := c.do(ctx, op, http.MethodPost, vendorapi.BatchesPath, nil, body, "")
	if err != nil {
		var te *TransportError
		if !errors.As(err, &te) {
			return Batch{}, false, err
		}
		// The vendor may have made the batch: look, never create again.
		b, ferr := c.FindBatch(ctx, req.Key)
		switch {
		case ferr == nil:
			return b, true, nil
		case errors.Is(ferr, ErrNotFound):
			return Batch{}, false, fmt.Errorf("paidvendor: %s %s: %w: the create got no answer (%v) and no batch is listed under its key; submit again later, which looks first", op, req.Key, ErrBatchOutcomeUnknown, err)
		default:
			return Batch{}, false, fmt.Errorf("paidvendor: %s %s: %w: the create got no answer (%v) and the list failed: %w", op, req.Key, ErrBatchOutcomeUnknown, err, ferr)
		}
	}
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return Batch{}, false, c.httpError(op, resp, nil)
	}
	if b, err = c.decodeBatch(op, resp); err != nil {
		return Batch{}, false, err
	}
	if b.Key != req.Key {
		return Batch{}, false, fmt.Errorf("paidvendor: %s: %w: batch %s carries key %s, not %s", op, ErrBadResponse, b.ID, quoteForError(b.Key), req.Key)
	}
	return b, false, nil
}

// batchBody checks a request and encodes it: nothing is sent for a bad one.
func batchBody(req BatchRequest) ([]byte, error) {
	if err := validateIdempotencyKey(req.Key); err != nil {
		return nil, fmt.Errorf("the batch's key: %w", err)
	}
	if n := len(req.Items); n == 0 || n > vendorapi.MaxBatchItems {
		return nil, fmt.Errorf("%w: a batch takes 1 to %d items, got %d: split it", ErrInvalidRequest, vendorapi.MaxBatchItems, n)
	}
	if req.Window < 0 {
		return nil, fmt.Errorf("%w: window %v is negative: give 0 for the vendor's 24h", ErrInvalidRequest, req.Window)
	}
	wr := vendorapi.CreateBatchRequest{Metadata: map[string]string{BatchKeyMetadata: req.Key}, Items: make([]vendorapi.BatchItem, 0, len(req.Items))}
	if req.Window > 0 {
		wr.CompletionWindow = req.Window.String()
	}
	seen := make(map[string]bool, len(req.Items))
	for i, it := range req.Items {
		if err := validateIdempotencyKey(it.Key); err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		if seen[it.Key] {
			return nil, fmt.Errorf("%w: item %d repeats key %s: a paid task goes into a batch once", ErrInvalidRequest, i, it.Key)
		}
		seen[it.Key] = true
		if it.Kind == "" {
			return nil, fmt.Errorf("%w: item %d (%s): kind is empty", ErrInvalidRequest, i, it.Key)
		}
		params := it.Params
		if params == nil {
			params = map[string]string{}
		}
		wr.Items = append(wr.Items, vendorapi.BatchItem{CustomID: it.Key, Kind: it.Kind, Params: params})
	}
	body, err := json.Marshal(wr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	return body, nil
}

// FindBatch is the vendor's batch under key (in its metadata), read from
// the vendor's list; ErrNotFound if none is listed.
func (c *HTTPClient) FindBatch(ctx context.Context, key string) (Batch, error) {
	const op = "find batch"
	if err := validateIdempotencyKey(key); err != nil {
		return Batch{}, fmt.Errorf("paidvendor: %s: %w", op, err)
	}
	var (
		after string
		seen  = map[string]bool{}
	)
	for {
		query := url.Values{}
		if after != "" {
			query.Set(vendorapi.AfterParam, after)
		}
		resp, err := c.do(ctx, op, http.MethodGet, vendorapi.BatchesPath, query, nil, "")
		if err != nil {
			return Batch{}, err
		}
		var page vendorapi.BatchesPage
		if resp.StatusCode != http.StatusOK {
			err = c.httpError(op, resp, nil)
		} else {
			err = c.decode(op, resp, maxBillPageBody, &page)
		}
		drainClose(resp.Body)
		if err != nil {
			return Batch{}, err
		}
		for _, wb := range page.Batches {
			if wb.Metadata[BatchKeyMetadata] == key {
				return batchFromWire(wb)
			}
		}
		if !page.HasMore {
			return Batch{}, fmt.Errorf("paidvendor: %s %s: %w", op, key, ErrNotFound)
		}
		if page.NextCursor == after || seen[page.NextCursor] {
			return Batch{}, fmt.Errorf("paidvendor: %s: %w: the vendor's list gave cursor %s twice", op, ErrBadResponse, quoteForError(page.NextCursor))
		}
		seen[page.NextCursor] = true
		after = page.NextCursor
	}
}

// GetBatch is one batch by its ID.
func (c *HTTPClient) GetBatch(ctx context.Context, id string) (Batch, error) {
	return c.batchCall(ctx, "get batch", http.MethodGet, vendorapi.BatchPath(id))
}

// CancelBatch cancels a batch in progress; what finished stays billed and
// in its results. ErrBatchEnded if it has ended.
func (c *HTTPClient) CancelBatch(ctx context.Context, id string) (Batch, error) {
	return c.batchCall(ctx, "cancel batch", http.MethodPost, vendorapi.BatchCancelPath(id))
}

func (c *HTTPClient) batchCall(ctx context.Context, op, method, path string) (Batch, error) {
	resp, err := c.do(ctx, op, method, path, nil, nil, "")
	if err != nil {
		return Batch{}, err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return Batch{}, c.httpError(op, resp, map[int]error{http.StatusNotFound: ErrNotFound, http.StatusConflict: ErrBatchEnded})
	}
	return c.decodeBatch(op, resp)
}

func (c *HTTPClient) decodeBatch(op string, resp *http.Response) (Batch, error) {
	var wb vendorapi.Batch
	if err := c.decode(op, resp, maxTaskBody, &wb); err != nil {
		return Batch{}, err
	}
	b, err := batchFromWire(wb)
	if err != nil {
		return Batch{}, fmt.Errorf("paidvendor: %s: %w", op, err)
	}
	return b, nil
}

func batchFromWire(wb vendorapi.Batch) (Batch, error) {
	switch wb.Status {
	case vendorapi.BatchInProgress, vendorapi.BatchCompleted, vendorapi.BatchExpired, vendorapi.BatchCancelled:
	default:
		return Batch{}, fmt.Errorf("%w: batch %s has unknown status %s", ErrBadResponse, quoteForError(wb.ID), quoteForError(wb.Status))
	}
	b := Batch{ID: wb.ID, Key: wb.Metadata[BatchKeyMetadata], Status: wb.Status, Counts: wb.Counts, CreatedAt: wb.CreatedAt, ExpiresAt: wb.ExpiresAt,
		OutputFileID: wb.OutputFileID, ErrorFileID: wb.ErrorFileID}
	if wb.EndedAt != nil {
		b.EndedAt = *wb.EndedAt
	}
	if wb.ResultsExpireAt != nil {
		b.ResultsExpireAt = *wb.ResultsExpireAt
	}
	if b.Ended() && (b.EndedAt.IsZero() || b.OutputFileID == "" || b.ErrorFileID == "") {
		return Batch{}, fmt.Errorf("%w: batch %s ended (%s) without its end time or result files", ErrBadResponse, b.ID, b.Status)
	}
	return b, nil
}

// BatchResults says what an ended batch did with each of keys (its items):
// from the output file, the results and their tasks (each result checked
// against its sha256); from the error file, what failed or was not
// processed. An item neither file accounts for, or any item when a file
// the answer depends on is gone, is ItemResultLost: it may have been
// billed, so it must not be sent again.
func (c *HTTPClient) BatchResults(ctx context.Context, b Batch, keys []string) ([]ItemResult, error) {
	const op = "batch results"
	if !b.Ended() {
		return nil, fmt.Errorf("paidvendor: %s: %w: batch %s is %s: results come once it has ended", op, ErrInvalidRequest, b.ID, b.Status)
	}
	byKey := make(map[string]*ItemResult, len(keys))
	out := make([]ItemResult, len(keys))
	for i, k := range keys {
		out[i] = ItemResult{Key: k, Outcome: ItemResultLost, Error: "the batch's result files do not say what became of this item; it may have been billed"}
		byKey[k] = &out[i]
	}
	errLines, errErr := c.resultFile(ctx, op, b.ErrorFileID)
	outLines, outErr := c.resultFile(ctx, op, b.OutputFileID)
	for _, err := range []error{errErr, outErr} {
		if err != nil && !errors.Is(err, ErrResultsGone) {
			return nil, err
		}
	}
	for _, l := range errLines {
		r := byKey[l.CustomID]
		switch {
		case r == nil:
			continue // another item of the batch, not asked about
		case l.Error != nil && (l.Error.Code == vendorapi.CodeItemExpired || l.Error.Code == vendorapi.CodeItemCancelled):
			r.Outcome, r.Error = ItemNotProcessed, l.Error.Message
		case l.Task != nil && l.Task.Status == vendorapi.StatusFailed:
			t, err := taskFromWire(c.key.redactTask(*l.Task))
			if err != nil {
				return nil, fmt.Errorf("paidvendor: %s: item %s: %w", op, l.CustomID, err)
			}
			r.Outcome, r.Task, r.Error = ItemFailed, t, t.Error
		}
	}
	for _, l := range outLines {
		r := byKey[l.CustomID]
		if r == nil || l.Task == nil || l.Task.Status != vendorapi.StatusSucceeded {
			continue
		}
		t, err := taskFromWire(c.key.redactTask(*l.Task))
		if err != nil {
			return nil, fmt.Errorf("paidvendor: %s: item %s: %w", op, l.CustomID, err)
		}
		if sum := sha256.Sum256(l.Result); hex.EncodeToString(sum[:]) != t.SHA256 {
			return nil, fmt.Errorf("paidvendor: %s: %w: item %s's result does not match its sha256", op, ErrBadResponse, l.CustomID)
		}
		t.IdempotencyKey = l.CustomID
		r.Outcome, r.Task, r.Result, r.Error = ItemSucceeded, t, l.Result, ""
	}
	// Without the error file, an item not in the output stays
	// ItemResultLost: it may have been processed.
	return out, nil
}

// resultFile reads one result file's lines.
func (c *HTTPClient) resultFile(ctx context.Context, op, id string) ([]vendorapi.BatchResultLine, error) {
	resp, err := c.do(ctx, op, http.MethodGet, vendorapi.FileContentPath(id), nil, nil, "")
	if err != nil {
		return nil, err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, c.httpError(op, resp, map[int]error{http.StatusGone: ErrResultsGone, http.StatusNotFound: ErrResultsGone})
	}
	var lines []vendorapi.BatchResultLine
	sc := bufio.NewScanner(http.MaxBytesReader(nil, resp.Body, maxBatchResultsBody))
	sc.Buffer(nil, maxBatchResultsBody)
	for sc.Scan() {
		var l vendorapi.BatchResultLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("paidvendor: %s: %w: file %s: a line does not parse: %s", op, ErrBadResponse, quoteForError(id), c.key.redact(err.Error()))
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, &TransportError{Op: op, Err: scrubError(fmt.Errorf("reading file %s: %w", id, err), c.key)}
	}
	return lines, nil
}
