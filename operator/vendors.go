package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"allot"
	"allot/ledger"
	"allot/pipeline"
)

// VendorView is one vendor as `starter vendor list` shows it: its state
// from the ledger (shared by every worker) and its controls from the
// pipeline file.
type VendorView struct {
	Name string `json:"name"`
	// Status is active, paused or tripped; Reason says why not active
	// ("tripped: <last error>" for a tripped breaker), Since since when.
	Status     string    `json:"status"`
	Reason     string    `json:"reason,omitempty"`
	Since      time.Time `json:"since,omitzero"`
	PausedBy   string    `json:"paused_by,omitempty"`
	PausePolls bool      `json:"pause_polls,omitempty"`
	// InFlight are the requests holding a slot now (sends and polls).
	InFlightSend int `json:"in_flight_send"`
	InFlightPoll int `json:"in_flight_poll"`
	// Tokens is the rate's bucket now (nil without a rate).
	Tokens *float64 `json:"tokens,omitempty"`
	// Failures are the breaker's consecutive failures, LastError the last.
	Failures  int    `json:"failures"`
	LastError string `json:"last_error,omitempty"`
	// Limits are the vendor's controls; Unknown says the pipeline file no
	// longer names it (its state stays in the ledger).
	Limits  pipeline.VendorLimits `json:"limits"`
	Unknown bool                  `json:"unknown,omitempty"`
}

func viewVendor(s ledger.VendorState, limits pipeline.VendorLimits, at time.Time) VendorView {
	v := VendorView{
		Name: s.Vendor, Status: s.Status(), Reason: s.Reason(), PausedBy: s.PausedBy, PausePolls: s.PausePolls,
		InFlightSend: s.InFlightSend, InFlightPoll: s.InFlightPoll, Failures: s.Failures, LastError: s.LastError, Limits: limits,
	}
	switch {
	case s.Paused:
		v.Since = s.PausedAt
	case s.Tripped():
		v.Since = s.TrippedAt
	}
	if limits.Rate > 0 {
		tokens := s.Tokens(ledger.VendorLimits{Rate: limits.Rate, Burst: limits.BurstSize()}, at)
		v.Tokens = &tokens
	}
	return v
}

// ListVendors lists every vendor of the pipeline file (and the default
// one), and any other the ledger has state of, by name.
func ListVendors(ctx context.Context, led *ledger.Ledger, set *pipeline.Set) ([]VendorView, error) {
	at := time.Now()
	states := map[string]ledger.VendorState{}
	if led != nil {
		ss, err := led.VendorStates(ctx, at)
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			states[s.Vendor] = s
		}
	}
	known := set.ControlledVendors()
	var out []VendorView
	for _, name := range known {
		s, ok := states[name]
		if !ok {
			s = ledger.VendorState{Vendor: name}
		}
		out = append(out, viewVendor(s, set.Limits(name), at))
	}
	var others []string
	for name := range states {
		if !slices.Contains(known, name) {
			others = append(others, name)
		}
	}
	slices.Sort(others)
	for _, name := range others {
		v := viewVendor(states[name], pipeline.VendorLimits{}, at)
		v.Unknown = true
		out = append(out, v)
	}
	return out, nil
}

// VendorPauseInput is an operator's pause (starter vendor pause).
type VendorPauseInput struct {
	Name   string
	Reason string
	By     string
	// Polls pauses look-ups, polls and downloads too.
	Polls bool
}

// PauseVendor pauses a vendor for every worker and pipeline of the ledger:
// its paid and effect steps wait (waiting_vendor, with the reason) and go
// on by themselves after ResumeVendor. An unknown name or a missing reason
// is refused (InvalidInput) and nothing is written.
func PauseVendor(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, in VendorPauseInput) (VendorView, error) {
	if err := KnownVendor(set, in.Name); err != nil {
		return VendorView{}, err
	}
	if strings.TrimSpace(in.Reason) == "" {
		return VendorView{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("pausing vendor %s needs a reason, which every waiting episode shows: starter vendor pause %s --reason TEXT", in.Name, in.Name), allot.InvalidInput, nil)
	}
	if _, err := led.PauseVendor(ctx, ledger.VendorPause{Vendor: in.Name, Reason: in.Reason, By: in.By, Polls: in.Polls}); err != nil {
		return VendorView{}, inputError(err)
	}
	return vendorView(ctx, led, set, in.Name)
}

// ResumeVendor lets requests go to a vendor again: it lifts a pause and
// closes a tripped breaker. The steps waiting for it go on by themselves
// within seconds. Resuming an active vendor changes nothing.
func ResumeVendor(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, name string) (VendorView, error) {
	if err := KnownVendor(set, name); err != nil {
		if s, serr := led.VendorStateOf(ctx, name, time.Time{}); serr != nil || s.Status() == "active" {
			return VendorView{}, err
		}
		// A vendor gone from the file but paused in the ledger can still
		// be resumed.
	}
	if _, err := led.ResumeVendor(ctx, name, time.Time{}); err != nil {
		return VendorView{}, inputError(err)
	}
	return vendorView(ctx, led, set, name)
}

func vendorView(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, name string) (VendorView, error) {
	vs, err := ListVendors(ctx, led, set)
	if err != nil {
		return VendorView{}, err
	}
	for _, v := range vs {
		if v.Name == name {
			return v, nil
		}
	}
	return VendorView{Name: name, Status: "active"}, nil
}

// KnownVendor refuses a name the pipeline file does not define: pausing a
// typo would pause nothing and look as if it had.
func KnownVendor(set *pipeline.Set, name string) error {
	known := set.ControlledVendors()
	if slices.Contains(known, name) {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("vendor %q is not in the pipeline file: name one of %s (\"default\" is the worker's ALLOT_VENDOR_URL); `%s` shows them", name, strings.Join(known, ", "), allot.VendorListCommand()),
		allot.InvalidInput, nil)
}
