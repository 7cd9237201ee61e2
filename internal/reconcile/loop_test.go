package reconcile_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"allot/internal/ledgertest"
	"allot/internal/reconcile"
	"allot/pipeline"
)

// The worker's loop reads its vendors' keys again at every pass, as the
// paid activities do at every call: a key put in place while the worker
// runs is used at the next pass, without a restart. Each pass's results
// reach the gauges, and a bill not read is logged.
func TestLoopReadsTheKeysAgainAtEveryPass(t *testing.T) {
	t.Setenv("STUDIO_KEY", "")
	set, err := pipeline.Parse([]byte(vendorsFile), "test")
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var passes [][]reconcile.Result
	l := &reconcile.Loop{
		Reconciler: &reconcile.Reconciler{Ledger: ledgertest.New(t).Led, Pipelines: set},
		Vendors:    reconcile.VendorsInput{Pipelines: set},
		Every:      1, // the next pass at once
		Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
		Results: func(res []reconcile.Result) {
			passes = append(passes, res)
			if len(passes) == 1 {
				os.Setenv("STUDIO_KEY", "sk-studio") // restored by t.Setenv
			} else {
				cancel()
			}
		},
	}
	l.Run(ctx)
	studio := func(res []reconcile.Result) reconcile.Result {
		for _, r := range res {
			if r.Vendor == "studio" {
				return r
			}
		}
		t.Fatalf("no result for studio in %+v", res)
		return reconcile.Result{}
	}
	if len(passes) != 2 {
		t.Fatalf("%d passes, want 2", len(passes))
	}
	first, second := studio(passes[0]), studio(passes[1])
	if first.Reconciled || !strings.Contains(first.Reason, "STUDIO_KEY") {
		t.Fatalf("without its key: %+v, want not reconciled for want of STUDIO_KEY", first)
	}
	if strings.Contains(second.Reason, "STUDIO_KEY") {
		t.Fatalf("the key put in place was not read at the next pass: %+v", second)
	}
	if !strings.Contains(logs.String(), "vendor bill not reconciled") {
		t.Fatalf("logs %q: want the bill not read said", logs.String())
	}
}
