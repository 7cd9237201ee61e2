package report

import (
	"context"
	"time"

	"allot"
	"allot/activities"
	"allot/internal/ledger"
	"allot/paidvendor"
	"allot/pipeline"
)

// VendorPromises is what allot can promise with one vendor (docs/design.md,
// "What a vendor can promise"): the facts its adapter declares and what
// follows from them, in plain words.
type VendorPromises struct {
	Vendor  string `json:"vendor"`
	Adapter string `json:"adapter"`
	// Capabilities are nil for a Go adapter no worker has recorded yet:
	// only the worker that registers it knows what it declares.
	Capabilities *allot.VendorCapabilities `json:"capabilities,omitempty"`
	Promises     []string                  `json:"promises,omitempty"`
	// RecordedBy and RecordedAt say which worker recorded a Go adapter's
	// capabilities, and when; empty for the others, which the pipeline
	// file says.
	RecordedBy string    `json:"recorded_by,omitempty"`
	RecordedAt time.Time `json:"recorded_at,omitzero"`
}

// ShowVendor is what allot can promise with the vendor name of set: from
// the pipeline file for an http or activity vendor and the default one,
// from the ledger (led may be nil: none yet) for a Go adapter. name must
// be one of set's vendors (operator.KnownVendor).
func ShowVendor(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, name string) (VendorPromises, error) {
	out := VendorPromises{Vendor: name, Adapter: pipeline.AdapterHTTP}
	// The default vendor speaks allot's vendor API at the worker's
	// ALLOT_VENDOR_URL.
	c, known := paidvendor.HTTPCapabilities, true
	if name != pipeline.DefaultVendor {
		v, _ := set.Vendor(name)
		out.Adapter = v.Adapter
		c, known = activities.ConfiguredCapabilities(v)
	}
	if !known && led != nil {
		recorded, err := led.VendorCapabilities(ctx)
		if err != nil {
			return VendorPromises{}, err
		}
		if r, ok := recorded[name]; ok {
			c, known = r.Capabilities, true
			out.RecordedBy, out.RecordedAt = r.Worker, r.RecordedAt
		}
	}
	if known {
		out.Capabilities = &c
		out.Promises = c.Promises()
	}
	return out, nil
}
