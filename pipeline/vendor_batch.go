package pipeline

import (
	"fmt"
	"time"
)

// VendorBatch is how allot drives a vendor's batches (docs/design.md,
// "Batches"): how often a running batch's status is asked, and how late a
// new batch may show in the vendor's list. A batch takes hours; asking
// every few minutes costs one request each time and no worker slot in
// between (the collector sleeps on a Temporal timer).
type VendorBatch struct {
	// BatchPollEvery: default DefaultBatchPollEvery, MinBatchPollEvery to
	// MaxBatchPollEvery.
	BatchPollEvery string `toml:"batch_poll_every" json:"batch_poll_every,omitempty"`
	// BatchListLag: after a create that got no answer, only the vendor's
	// list is read for this long before a create is tried again (a
	// vendor may list a new batch late); default DefaultBatchListLag,
	// MinBatchListLag to MaxBatchListLag.
	BatchListLag string `toml:"batch_list_lag" json:"batch_list_lag,omitempty"`
	// BatchMaxQueuedItems caps the items of the vendor's batches that are
	// at the vendor and not ended, across all steps and workers, as the
	// vendor caps them (Anthropic's requests in its processing queue,
	// OpenAI's enqueued limit): a batch whose items would go over is
	// created once enough others have ended; 0: no cap.
	BatchMaxQueuedItems int `toml:"batch_max_queued_items" json:"batch_max_queued_items,omitempty"`
}

// Bounds of batch_poll_every. Below a second is a tight loop against the
// vendor's list and status endpoints; above an hour, results could wait
// longer for allot than the batch took.
const (
	DefaultBatchPollEvery = 5 * time.Minute
	MinBatchPollEvery     = time.Second
	MaxBatchPollEvery     = time.Hour

	// MaxBatchQueuedItems bounds batch_max_queued_items to what a vendor
	// could mean.
	MaxBatchQueuedItems = 100_000_000

	DefaultBatchListLag = 5 * time.Minute
	MinBatchListLag     = time.Second
	MaxBatchListLag     = time.Hour
)

// ListLag is how long after an unanswered create only the list is read.
func (b VendorBatch) ListLag() time.Duration {
	if d, err := time.ParseDuration(b.BatchListLag); err == nil && d > 0 {
		return d
	}
	return DefaultBatchListLag
}

// PollEvery is how often a running batch of this vendor is asked about.
func (b VendorBatch) PollEvery() time.Duration {
	if d, err := time.ParseDuration(b.BatchPollEvery); err == nil && d > 0 {
		return d
	}
	return DefaultBatchPollEvery
}

func (b VendorBatch) check() error {
	if b.BatchMaxQueuedItems < 0 || b.BatchMaxQueuedItems > MaxBatchQueuedItems {
		return fmt.Errorf("batch_max_queued_items = %d: give the most items the vendor holds in unfinished batches at once, 1 to %d (0 or none: no cap); check its documentation", b.BatchMaxQueuedItems, MaxBatchQueuedItems)
	}
	for _, f := range []struct {
		name, v  string
		min, max time.Duration
		what     string
	}{
		{"batch_poll_every", b.BatchPollEvery, MinBatchPollEvery, MaxBatchPollEvery, "how often a running batch's status is asked"},
		{"batch_list_lag", b.BatchListLag, MinBatchListLag, MaxBatchListLag, "how late the vendor may list a new batch; check its documentation"},
	} {
		if f.v == "" {
			continue
		}
		d, err := positive(f.name, f.v)
		if err != nil {
			return err
		}
		if d < f.min || d > f.max {
			return fmt.Errorf("%s = %q: give %s to %s (%s)", f.name, f.v, f.min, f.max, f.what)
		}
	}
	return nil
}

// Batching is the batch settings of the named vendor ("" and "default":
// the default vendor's, from its [[vendor]] name = "default"); an unknown
// name has the defaults.
func (s *Set) Batching(name string) VendorBatch {
	if name == "" || name == DefaultVendor {
		return s.defaultBatch
	}
	return s.vendors[name].VendorBatch
}
