package vendorapi

import "time"

// The batch API, shaped like the real vendors' (OpenAI's Batch API,
// Anthropic's Message Batches): many items in one request at half the
// price, finished within a completion window, results in files.
//
//	POST /v1/batches                     CreateBatchRequest -> 201 Batch. No idempotency key: a retried
//	                                     create makes a second batch, so a client writes its own key into
//	                                     Metadata and lists before it creates again.
//	GET  /v1/batches?after=CURSOR&limit=N -> 200 BatchesPage, oldest first (a client filters by Metadata)
//	GET  /v1/batches/{id}                -> 200 Batch, 404
//	POST /v1/batches/{id}/cancel         -> 200 Batch (cancelled; what finished before stays billed), 409 once ended
//	GET  /v1/files/{id}/content          -> 200 JSONL of BatchResultLine, 404 unknown, 410 past retention
//
// Billing: every item that succeeds is one charge line on the bill (GET
// /v1/charges) at half its kind's price, rounded up to a minor unit, with
// the item's CustomID as its idempotency key and its own task ID: also the
// items that succeeded before the batch expired or was cancelled. A failed,
// expired or cancelled item is billed nothing.
const (
	BatchesPath = "/v1/batches"
	FilesPath   = "/v1/files"
)

// BatchPath is the path of one batch.
func BatchPath(id string) string { return BatchesPath + "/" + id }

// BatchCancelPath is the path that cancels one batch.
func BatchCancelPath(id string) string { return BatchPath(id) + "/cancel" }

// FileContentPath is the path of one result file's content.
func FileContentPath(id string) string { return FilesPath + "/" + id + "/content" }

// ID prefixes of batches and result files ("vb_"/"vf_" and lowercase hex).
const (
	BatchIDPrefix = "vb_"
	FileIDPrefix  = "vf_"
)

// Limits of one batch, those of the strictest real vendor: a client splits
// larger groups, and a custom ID fits both vendors' rules.
const (
	MaxBatchItems     = 50_000
	MaxCustomIDLength = 64
)

// Batch states (Batch.Status). In progress until it ends one of three
// ways: all items done (completed), the completion window ran out first
// (expired), or a cancel (cancelled). An ended batch never changes again.
const (
	BatchInProgress = "in_progress"
	BatchCompleted  = "completed"
	BatchExpired    = "expired"
	BatchCancelled  = "cancelled"
)

// DefaultCompletionWindow is the window of a request that names none.
const DefaultCompletionWindow = "24h"

// BatchItem is one request of a batch.
type BatchItem struct {
	// CustomID names the item within the batch: unique in it, 1 to
	// MaxCustomIDLength letters, digits, '-' or '_'. Results and bill lines
	// carry it back.
	CustomID string            `json:"custom_id"`
	Kind     string            `json:"kind"`
	Params   map[string]string `json:"params"`
}

// CreateBatchRequest is the body of POST /v1/batches.
type CreateBatchRequest struct {
	Items []BatchItem `json:"items"`
	// Metadata is the client's to keep: the vendor stores and echoes it,
	// nothing more (the real vendors take up to 16 pairs).
	Metadata map[string]string `json:"metadata,omitempty"`
	// CompletionWindow is how long the vendor may take, as a Go duration
	// ("24h", the default and the real vendors' only value).
	CompletionWindow string `json:"completion_window,omitempty"`
}

// BatchCounts counts a batch's items by where they are.
type BatchCounts struct {
	Total     int `json:"total"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// Expired and Cancelled are the items an expiry or a cancel left
	// unprocessed: they have no result and were not billed.
	Expired   int `json:"expired"`
	Cancelled int `json:"cancelled"`
}

// Batch is a batch as the vendor reports it.
type Batch struct {
	ID        string            `json:"id"`
	Status    string            `json:"status"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Counts    BatchCounts       `json:"request_counts"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	EndedAt   *time.Time        `json:"ended_at,omitempty"`
	// OutputFileID holds a line per item that succeeded or failed;
	// ErrorFileID a line per item that failed, expired or was cancelled.
	// Both are set once the batch ends, and readable until
	// ResultsExpireAt.
	OutputFileID    string     `json:"output_file_id,omitempty"`
	ErrorFileID     string     `json:"error_file_id,omitempty"`
	ResultsExpireAt *time.Time `json:"results_expire_at,omitempty"`
}

// BatchesPage is one page of GET /v1/batches.
type BatchesPage struct {
	Batches    []Batch `json:"batches"`
	NextCursor string  `json:"next_cursor"`
	HasMore    bool    `json:"has_more"`
}

// Page sizes of the batches list, as for the charges.
const (
	DefaultBatchesLimit = 100
	MaxBatchesLimit     = 100
)

// BatchResultLine is one line of a batch's output or error file.
type BatchResultLine struct {
	CustomID string `json:"custom_id"`
	// Task is the item's work, for an item that succeeded or failed: its
	// own task ID, status, cost and, once succeeded, its result's sha256.
	Task *Task `json:"task,omitempty"`
	// Result is the item's result bytes, once succeeded.
	Result []byte `json:"result,omitempty"`
	// Error says why the item has no result: CodeTaskFailed,
	// CodeItemExpired or CodeItemCancelled.
	Error *ErrorDetail `json:"error,omitempty"`
}

// Error codes of the batch API.
const (
	CodeBadBatch          = "bad_batch"           // 400: no items, too many, a bad custom ID or kind, a bad window
	CodeDuplicateCustomID = "duplicate_custom_id" // 400: two items of one request share a custom ID
	CodeBatchEnded        = "batch_ended"         // 409: a cancel of a batch that has ended
	CodeFileExpired       = "file_expired"        // 410: the results were kept for their retention and are gone
	CodeItemExpired       = "item_expired"        // an item the completion window left unprocessed
	CodeItemCancelled     = "item_cancelled"      // an item a cancel left unprocessed
)
