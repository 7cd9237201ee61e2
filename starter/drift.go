package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"allot"
	"allot/app"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/reconcile"
	"allot/paidvendor"
	"allot/pipeline"
)

// driftCommand dispatches `starter drift <subcommand>`: what the vendors'
// bills say that the ledger cannot explain (docs/design.md, "Reconciling
// the vendor's bill").
func driftCommand(ctx context.Context, c *cli, args []string) error {
	return dispatch(ctx, c, "drift", driftSubcommands, args)
}

// driftSubcommands are `starter drift`'s subcommands.
var driftSubcommands = map[string]subcommand{
	"list":      driftList,
	"ack":       driftAck,
	"reconcile": driftReconcile,
}

func driftList(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("drift list", false)
	var f ledger.DriftFilter
	all := fs.Bool("all", false, "list acknowledged items too (default: only those that wait for an operator)")
	fs.StringVar(&f.Vendor, "vendor", "", "only this vendor's items")
	fs.StringVar(&f.Pipeline, "pipeline", "", "only this pipeline's items")
	class := fs.String("class", "", "only this class: "+strings.Join(driftClassNames(), ", "))
	if err := c.parse(fs, args); err != nil {
		return err
	}
	f.Class, f.Unacked = allot.DriftClass(*class), !*all
	if f.Class != "" && !f.Class.Valid() {
		return usageError{fmt.Errorf("--class %q is not a drift class: give one of %s", *class, strings.Join(driftClassNames(), ", "))}
	}
	return ledgerCommand(ctx, c, viewLedger, func(_ *pipeline.Set, led *ledger.Ledger) ([]ledger.DriftItem, error) {
		out := []ledger.DriftItem{}
		for {
			page, err := led.DriftItems(ctx, f)
			if err != nil || len(page) == 0 {
				return out, err
			}
			out = append(out, page...)
			f.AfterID = page[len(page)-1].ID
		}
	}, printDrift)
}

func driftClassNames() []string {
	out := make([]string, len(allot.DriftClasses))
	for i, k := range allot.DriftClasses {
		out[i] = string(k)
	}
	return out
}

func printDrift(w io.Writer, items []ledger.DriftItem) {
	if len(items) == 0 {
		fmt.Fprintln(w, "no drift: every line the vendors billed is explained by the ledger")
		return
	}
	fmt.Fprintln(w, "ID\tVENDOR\tCLASS\tMONEY\tEPISODE\tSTEP\tPERIOD\tFOUND\tSTATE")
	for _, d := range items {
		episode := "-"
		if d.EpisodeID != "" {
			episode = d.Pipeline + "/" + d.EpisodeID
		}
		state := "open"
		if !d.AckedAt.IsZero() {
			state = fmt.Sprintf("acknowledged by %s at %s: %s", dash(d.AckedBy), d.AckedAt.Format(time.RFC3339), d.AckReason)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.ID, d.Vendor, d.Class, allot.Money{Amount: d.Amount, Currency: d.Currency},
			episode, dash(d.Step), dash(d.Period), d.FoundAt.Format(time.RFC3339), state)
		fmt.Fprintf(w, "\t%s\n", d.Detail)
		if d.AckedAt.IsZero() {
			fmt.Fprintf(w, "\tonce settled:\t%s\n", allot.DriftAckCommand(d.ID, "what was done"))
		}
	}
}

func driftAck(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("drift ack", false)
	var in operator.AckDriftInput
	fs.Int64Var(&in.ID, "id", 0, "the drift item's ID, as starter drift list prints it (required)")
	fs.StringVar(&in.Reason, "reason", "", "what was done about it (required): the ledger keeps it")
	fs.StringVar(&in.By, "by", "", "who acknowledges it (default $USER, else the operating system's user name)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if in.ID <= 0 {
		return usageError{fmt.Errorf("--id is required: %s (%s prints the IDs)", allot.DriftAckCommand(1, "why"), allot.DriftListCommand())}
	}
	if strings.TrimSpace(in.Reason) == "" {
		return usageError{fmt.Errorf("--reason is required: %s", allot.DriftAckCommand(in.ID, "why"))}
	}
	var err error
	if in.By, err = allot.Actor(in.By); err != nil {
		return usageError{err}
	}
	return ledgerCommand(ctx, c, writeLedger, func(_ *pipeline.Set, led *ledger.Ledger) (ledger.DriftItem, error) {
		return operator.AckDrift(ctx, led, in)
	}, func(w io.Writer, d ledger.DriftItem) {
		fmt.Fprintf(w, "acknowledged\tdrift item %d (%s, %s, %s) by %s: %s\n", d.ID, d.Vendor, d.Class,
			allot.Money{Amount: d.Amount, Currency: d.Currency}, d.AckedBy, d.AckReason)
		fmt.Fprintln(w, "it no longer alerts and stays in the ledger (starter drift list --all)")
	})
}

// driftReconcile runs one pass of the worker's reconciler now: the bills
// of the pipeline file's vendors, read from the ledger's watermarks.
func driftReconcile(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("drift reconcile", false)
	fs.StringVar(&c.cfg.VendorURL, "vendor-url", c.cfg.VendorURL, "the default vendor's API (env "+app.EnvVendorURL+"); its key comes from "+paidvendor.EnvVendorAPIKey+" or "+paidvendor.EnvVendorAPIKeyFile)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	res, err := askLedger(ctx, c, writeLedger, func(set *pipeline.Set, led *ledger.Ledger) ([]reconcile.Result, error) {
		r := &reconcile.Reconciler{Ledger: led, Pipelines: set, Vendors: reconcile.Vendors(ctx, reconcile.VendorsInput{
			Pipelines: set, DefaultURL: c.cfg.VendorURL, DefaultKey: paidvendor.EnvCredentials{}})}
		return r.Run(ctx), nil
	})
	if err := emit(c, res, err, printReconciled); err != nil {
		return err
	}
	for _, r := range res {
		if !r.Reconciled || len(r.Drift) > 0 {
			return errViolations
		}
	}
	return nil
}

func printReconciled(w io.Writer, res []reconcile.Result) {
	if len(res) == 0 {
		fmt.Fprintln(w, "no paid step uses a vendor: nothing to reconcile")
	}
	for _, r := range res {
		if !r.Reconciled {
			fmt.Fprintf(w, "vendor %s\tNOT RECONCILED: %s\n", r.Vendor, r.Reason)
			continue
		}
		fmt.Fprintf(w, "vendor %s\t%d new line(s), %d judged, %d waiting for their task's reference, %d new drift item(s)\n", r.Vendor, r.NewLines, r.Judged, r.Pending, len(r.Drift))
	}
	if n := newDrift(res); n > 0 {
		fmt.Fprintf(w, "%d new drift item(s): %s\n", n, allot.DriftListCommand())
	}
}

func newDrift(res []reconcile.Result) int {
	n := 0
	for _, r := range res {
		n += len(r.Drift)
	}
	return n
}
