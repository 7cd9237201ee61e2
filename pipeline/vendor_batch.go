package pipeline

import (
	"fmt"
	"time"
)

// VendorBatch is how allot drives a vendor's batches (docs/design.md,
// "Batches"): how often a running batch's status is asked. A batch takes
// hours; asking every few minutes costs one request each time and no
// worker slot in between (the collector sleeps on a Temporal timer).
type VendorBatch struct {
	// BatchPollEvery: default DefaultBatchPollEvery, MinBatchPollEvery to
	// MaxBatchPollEvery.
	BatchPollEvery string `toml:"batch_poll_every" json:"batch_poll_every,omitempty"`
}

// Bounds of batch_poll_every. Below a second is a tight loop against the
// vendor's list and status endpoints; above an hour, results could wait
// longer for allot than the batch took.
const (
	DefaultBatchPollEvery = 5 * time.Minute
	MinBatchPollEvery     = time.Second
	MaxBatchPollEvery     = time.Hour
)

// PollEvery is how often a running batch of this vendor is asked about.
func (b VendorBatch) PollEvery() time.Duration {
	if d, err := time.ParseDuration(b.BatchPollEvery); err == nil && d > 0 {
		return d
	}
	return DefaultBatchPollEvery
}

func (b VendorBatch) check() error {
	if b.BatchPollEvery == "" {
		return nil
	}
	d, err := positive("batch_poll_every", b.BatchPollEvery)
	if err != nil {
		return err
	}
	if d < MinBatchPollEvery || d > MaxBatchPollEvery {
		return fmt.Errorf("batch_poll_every = %q: give %s to %s (how often a running batch's status is asked)", b.BatchPollEvery, MinBatchPollEvery, MaxBatchPollEvery)
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
