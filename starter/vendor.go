package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/pipeline"
)

// vendorCommand dispatches `starter vendor <subcommand>`: the vendors'
// shared state in the ledger (docs/design.md, "Vendor controls").
func vendorCommand(ctx context.Context, c *cli, args []string) error {
	return dispatch(ctx, c, "vendor", vendorSubcommands, args)
}

// vendorSubcommands are `starter vendor`'s subcommands.
var vendorSubcommands = map[string]subcommand{
	"pause":  vendorPause,
	"resume": vendorResume,
	"list":   vendorList,
	"show":   vendorShow,
}

// vendorName takes the vendor's name, which comes first: `pause NAME
// --reason TEXT`.
func vendorName(sub string, args []string) (string, []string, error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return "", nil, usageError{fmt.Errorf("name the vendor first: starter vendor %s NAME (starter vendor list shows them)", sub)}
	}
	return args[0], args[1:], nil
}

func vendorPause(ctx context.Context, c *cli, args []string) error {
	name, args, err := vendorName("pause", args)
	if err != nil {
		return err
	}
	fs := c.flags("vendor pause", false)
	in := operator.VendorPauseInput{Name: name}
	fs.StringVar(&in.Reason, "reason", "", "why (required): every waiting episode shows it")
	fs.StringVar(&in.By, "by", "", "who pauses it (default $USER, else the operating system's user name)")
	fs.BoolVar(&in.Polls, "polls", false, "pause look-ups, polls and downloads too, not only sends")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if err := operator.CheckPauseReason(name, in.Reason); err != nil {
		return usageError{err}
	}
	if in.By, err = allot.Actor(in.By); err != nil {
		return usageError{err}
	}
	if err := c.knownVendor(name); err != nil {
		return err
	}
	return ledgerCommand(ctx, c, writeLedger, func(set *pipeline.Set, led *ledger.Ledger) (report.VendorView, error) {
		return operator.PauseVendor(ctx, led, set, in)
	}, printVendorPaused)
}

func printVendorPaused(w io.Writer, v report.VendorView) {
	what := "sends"
	if v.PausePolls {
		what = "sends, look-ups, polls and downloads"
	}
	fmt.Fprintf(w, "paused\t%s (%s) since %s: %s\n", v.Name, what, v.Since.Format(time.RFC3339), v.Reason)
	fmt.Fprintf(w, "its steps wait (waiting_vendor) and go on by themselves after: %s\n", allot.VendorResumeCommand(v.Name))
}

func vendorResume(ctx context.Context, c *cli, args []string) error {
	name, args, err := vendorName("resume", args)
	if err != nil {
		return err
	}
	fs := c.flags("vendor resume", false)
	in := operator.VendorResumeInput{Name: name}
	fs.StringVar(&in.By, "by", "", "who resumes it, for the pause history (default $USER, else the operating system's user name)")
	fs.StringVar(&in.Reason, "reason", "", "why, kept in the pause history (optional)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if in.By, err = allot.Actor(in.By); err != nil {
		return usageError{err}
	}
	if err := c.knownVendor(name); err != nil {
		return err
	}
	return ledgerCommand(ctx, c, writeLedger, func(set *pipeline.Set, led *ledger.Ledger) (report.VendorView, error) {
		return operator.ResumeVendorBy(ctx, led, set, in)
	}, printVendorResumed)
}

func printVendorResumed(w io.Writer, v report.VendorView) {
	fmt.Fprintf(w, "%s\t%s: its waiting steps go on within seconds\n", v.Status, v.Name)
}

func vendorList(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("vendor list", false)
	history := fs.Bool("history", false, "print every pause and resume request (who, when, why), oldest first")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	pipelines, err := c.pipelines()
	if err != nil {
		return err
	}
	led, err := c.openLedgerReadOnly(ctx)
	switch {
	case errors.Is(err, ledger.ErrNotCreated):
		led = nil // no state yet: every vendor is active
	case err != nil:
		return err
	default:
		defer led.Close()
	}
	if *history {
		h, err := report.VendorPauseHistory(ctx, led, "")
		return emit(c, h, err, printVendorHistory)
	}
	vs, err := report.ListVendors(ctx, led, pipelines)
	return emit(c, vs, err, func(w io.Writer, vs []report.VendorView) { printVendors(w, vs, workerCommand(c.cfg.Ledger)) })
}

// vendorShow prints what allot can promise with one vendor
// (docs/design.md, "What a vendor can promise").
func vendorShow(ctx context.Context, c *cli, args []string) error {
	name, args, err := vendorName("show", args)
	if err != nil {
		return err
	}
	fs := c.flags("vendor show", false)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if err := c.knownVendor(name); err != nil {
		return err
	}
	pipelines, err := c.pipelines()
	if err != nil {
		return err
	}
	var led *ledger.Ledger
	if v, _ := pipelines.Vendor(name); v.Adapter == pipeline.AdapterGo {
		// Only the worker links a Go adapter: what it declares is in
		// the ledger, once a worker has started.
		switch led, err = c.openLedgerReadOnly(ctx); {
		case errors.Is(err, ledger.ErrNotCreated):
			led = nil
		case err != nil:
			return err
		default:
			defer led.Close()
		}
	}
	p, err := report.ShowVendor(ctx, led, pipelines, name)
	return emit(c, p, err, func(w io.Writer, p report.VendorPromises) { printVendorPromises(w, p, workerCommand(c.cfg.Ledger)) })
}

// printVendorPromises writes `vendor show`; worker is the command that
// starts a worker on this ledger, which records a Go adapter's
// capabilities.
func printVendorPromises(w io.Writer, p report.VendorPromises, worker string) {
	switch {
	case p.Capabilities == nil:
		fmt.Fprintf(w, "vendor %s (adapter %s): no worker has recorded what its adapter declares yet: a worker records it when it starts (%s)\n", p.Vendor, p.Adapter, worker)
		return
	case p.RecordedBy != "":
		fmt.Fprintf(w, "vendor %s (adapter %s, as declared to worker %s at %s)\n", p.Vendor, p.Adapter, p.RecordedBy, p.RecordedAt.Format(time.RFC3339))
	default:
		fmt.Fprintf(w, "vendor %s (adapter %s)\n", p.Vendor, p.Adapter)
	}
	fmt.Fprintln(w, "what allot can promise with it:")
	for _, s := range p.Promises {
		fmt.Fprintf(w, "  - %s\n", s)
	}
}

func printVendorHistory(w io.Writer, h []ledger.VendorPauseEvent) {
	fmt.Fprintln(w, "VENDOR\tACTION\tAT\tBY\tREASON")
	for _, e := range h {
		reason := e.Reason
		if e.Polls {
			reason += " (polls too)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", e.Vendor, e.Action, e.At.Format(time.RFC3339), dash(e.By), dash(reason))
	}
}

// printVendors writes `vendor list`; worker is the command that starts a
// worker on this ledger, which records the limits it enforces.
func printVendors(w io.Writer, vs []report.VendorView, worker string) {
	fmt.Fprintln(w, "VENDOR\tSTATE\tSINCE\tIN FLIGHT\tTOKENS\tFAILURES\tREASON")
	var unrecorded []string
	for _, v := range vs {
		since := "-"
		if !v.Since.IsZero() {
			since = v.Since.Format(time.RFC3339)
		}
		// The limits are the ones the workers recorded in the ledger,
		// never this process's ALLOT_VENDOR_* (docs/design.md, "Vendor
		// controls").
		inFlight := strconv.Itoa(v.InFlightSend + v.InFlightPoll)
		if m := v.Limits.MaxInFlight; m > 0 {
			inFlight += "/" + strconv.Itoa(m)
		}
		tokens := "-"
		if v.Tokens != nil {
			tokens = fmt.Sprintf("%.1f/%d", *v.Tokens, v.Limits.BurstSize())
		}
		failures := strconv.Itoa(v.Failures)
		if v.Limits.TripAfter > 0 {
			failures += "/" + strconv.Itoa(v.Limits.TripAfter)
		}
		reason := v.Reason
		if v.Status == "paused" && v.PausedBy != "" {
			reason += " (by " + v.PausedBy + ")"
		}
		if v.LatestPause != nil {
			reason += fmt.Sprintf("; %d later pause request(s), the latest by %s at %s: %s", v.LaterPauses, dash(v.LatestPause.By),
				v.LatestPause.At.Format(time.RFC3339), v.LatestPause.Reason)
		}
		if v.Unknown {
			reason = strings.TrimSpace(reason + " (not in the pipeline file)")
		}
		if !v.LimitsKnown && !v.Unknown {
			unrecorded = append(unrecorded, v.Name)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Name, v.Status, since, inFlight, tokens, failures, dash(reason))
	}
	if len(unrecorded) > 0 {
		fmt.Fprintf(w, "no worker has recorded the limits it enforces for %s yet: a worker records them when it starts (%s)\n",
			strings.Join(unrecorded, ", "), worker)
	}
}

// knownVendor refuses a vendor the pipeline file does not define before
// the ledger is opened, so that a typo is named as one wherever the
// ledger is.
func (c *cli) knownVendor(name string) error {
	pipelines, err := c.pipelines()
	if err != nil {
		return err
	}
	return operator.KnownVendor(pipelines, name)
}
