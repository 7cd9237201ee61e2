package operator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/report"
	"allot/pipeline"
)

// Vendor pauses as the operator commands them (starter vendor
// pause|resume); every command answers with the vendor as report's
// `vendor list` shows it.

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
func PauseVendor(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, in VendorPauseInput) (report.VendorView, error) {
	if err := KnownVendor(set, in.Name); err != nil {
		return report.VendorView{}, err
	}
	if err := CheckPauseReason(in.Name, in.Reason); err != nil {
		return report.VendorView{}, err
	}
	if _, err := led.PauseVendor(ctx, ledger.VendorPause{Vendor: in.Name, Reason: in.Reason, By: in.By, Polls: in.Polls}); err != nil {
		return report.VendorView{}, err
	}
	return vendorView(ctx, led, set, in.Name)
}

// CheckPauseReason refuses a pause without a reason (InvalidInput), as
// every caller does before anything is written.
func CheckPauseReason(name, reason string) error {
	if strings.TrimSpace(reason) == "" {
		return allot.Errorf(allot.InvalidInput, "--reason is required: pausing vendor %s needs a reason, which every waiting episode shows: starter vendor pause %s --reason TEXT", name, name)
	}
	return checkTexts("--reason", reason)
}

// ResumeVendor lets requests go to a vendor again: it lifts a pause and
// closes a tripped breaker. The steps waiting for it go on by themselves
// within seconds. A vendor neither paused nor tripped is refused
// (InvalidInput), with nothing written: there was nothing to resume.
func ResumeVendor(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, name string) (report.VendorView, error) {
	return ResumeVendorBy(ctx, led, set, VendorResumeInput{Name: name})
}

// VendorResumeInput is an operator's resume (starter vendor resume).
type VendorResumeInput struct {
	Name   string
	By     string
	Reason string // optional for the CLI; kept in the pause history
}

// ResumeVendorBy is ResumeVendor naming who resumes and why, for the
// pause history.
func ResumeVendorBy(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, in VendorResumeInput) (report.VendorView, error) {
	if err := checkTexts("--reason", in.Reason); err != nil {
		return report.VendorView{}, err
	}
	if err := KnownVendor(set, in.Name); err != nil {
		if s, serr := led.VendorStateOf(ctx, in.Name, time.Time{}); serr != nil || s.Status() == "active" {
			return report.VendorView{}, err
		}
		// A vendor gone from the file but paused in the ledger can still
		// be resumed.
	}
	if _, err := led.ResumeStoppedVendor(ctx, in.Name, in.By, in.Reason, time.Time{}); errors.Is(err, ledger.ErrVendorNotStopped) {
		return report.VendorView{}, allot.Errorf(allot.InvalidInput, "vendor %s is not paused and its breaker is not tripped: there is nothing to resume, and nothing was recorded; `%s` shows each vendor's state",
			in.Name, allot.VendorListCommand())
	} else if err != nil {
		return report.VendorView{}, err
	}
	return vendorView(ctx, led, set, in.Name)
}

func vendorView(ctx context.Context, led *ledger.Ledger, set *pipeline.Set, name string) (report.VendorView, error) {
	vs, err := report.ListVendors(ctx, led, set)
	if err != nil {
		return report.VendorView{}, err
	}
	for _, v := range vs {
		if v.Name == name {
			return v, nil
		}
	}
	return report.VendorView{Name: name, Status: "active"}, nil
}

// KnownVendor refuses a name the pipeline file does not define: pausing a
// typo would pause nothing and look as if it had.
func KnownVendor(set *pipeline.Set, name string) error {
	known := set.ControlledVendors()
	if slices.Contains(known, name) {
		return nil
	}
	return allot.Errorf(allot.InvalidInput, "vendor %q is not in the pipeline file: name one of %s (\"default\" is the worker's ALLOT_VENDOR_URL); `%s` shows them", name, strings.Join(known, ", "), allot.VendorListCommand())
}
