package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/paidvendor"
)

// batchLedger is a ledger with n chaos-batch episodes whose one paid task
// each went through one vendor batch, "b-done", which ended with every
// item succeeded, and the charges the vendor would bill for them.
func batchLedger(t *testing.T, n int) (*run, []paidvendor.Charge) {
	t.Helper()
	ctx := context.Background()
	led := ledgertest.New(t).Led
	nominal := time.Date(2026, 12, 14, 9, 0, 0, 0, time.UTC)
	var refs []ledger.PaidTaskRef
	var charges []paidvendor.Charge
	for i := range n {
		at := nominal.Add(time.Duration(i) * time.Hour)
		res, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: PipelineBatch, Key: allot.AllocationKey(PipelineBatch, at), Period: "2026-W51", NominalTime: at})
		if err != nil {
			t.Fatal(err)
		}
		ref := ledger.PaidTaskRef{Pipeline: PipelineBatch, EpisodeID: res.Episode.ID, Step: "score"}
		key := allot.IdempotencyKey(ref.Pipeline, ref.EpisodeID, ref.Step, 0)
		if _, err := led.WriteIntent(ctx, ref, key, ledger.BatchQueue); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
		charges = append(charges, paidvendor.Charge{TaskID: fmt.Sprintf("task_%d", i), IdempotencyKey: key, Amount: 125, Currency: "USD", At: at})
	}
	if _, _, err := led.OpenBatch(ctx, ledger.OpenBatchInput{Key: "b-done", Vendor: BatchVendor, Kind: "score", Items: refs}); err != nil {
		t.Fatal(err)
	}
	if _, err := led.BeginBatchCreate(ctx, "b-done", nominal, nominal.Add(time.Minute), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := led.RecordBatchCreated(ctx, "b-done", "vb_1", "in_progress", nominal.Add(29*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i, r := range refs {
		if _, _, err := led.SettleBatchItem(ctx, "b-done", ledger.BatchItemSettlement{Ref: r, Outcome: allot.BatchItemSucceeded,
			RemoteRef: charges[i].TaskID, Amount: 125, Currency: "USD", Artifact: "/results/" + r.EpisodeID, SHA256: "sha"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := led.EndBatch(ctx, "b-done", "completed"); err != nil {
		t.Fatal(err)
	}
	return &run{led: led}, charges
}

func checkBatchesOf(t *testing.T, r *run, charges []paidvendor.Charge) (Summary, []string) {
	t.Helper()
	var sum Summary
	var bad []string
	if err := r.checkBatches(context.Background(), &sum, charges, func(format string, args ...any) {
		bad = append(bad, fmt.Sprintf(format, args...))
	}); err != nil {
		t.Fatal(err)
	}
	return sum, bad
}

// The chaos run's batch check passes a clean run and names each broken
// promise: it is what makes chaos-batch a proof, so it must be able to
// fail.
func TestBatchCheckNamesEveryBrokenPromise(t *testing.T) {
	r, charges := batchLedger(t, 3)
	sum, bad := checkBatchesOf(t, r, charges)
	if len(bad) != 0 || sum.Batches != 1 || sum.BatchItems != 3 || sum.BatchCharges != 3 {
		t.Fatalf("a clean batch: %+v, violations %q", sum, bad)
	}

	// An item the vendor billed twice under its key.
	_, bad = checkBatchesOf(t, r, append(charges, charges[1]))
	if len(bad) != 1 || !strings.Contains(bad[0], "charged its key 2 times, want 1") {
		t.Fatalf("a double charge: violations %q", bad)
	}
	// An item recorded as succeeded that the vendor never billed.
	_, bad = checkBatchesOf(t, r, charges[1:])
	if len(bad) != 1 || !strings.Contains(bad[0], "charged its key 0 times, want 1") {
		t.Fatalf("an unbilled success: violations %q", bad)
	}

	// A batch still open after the drain, its items waiting for ever, and
	// a paid task of the pipeline no batch carried.
	ctx := context.Background()
	at := time.Date(2026, 12, 21, 9, 0, 0, 0, time.UTC)
	var refs []ledger.PaidTaskRef
	for i := range 2 {
		at := at.Add(time.Duration(i) * time.Hour)
		res, err := r.led.Allocate(ctx, ledger.AllocateInput{Pipeline: PipelineBatch, Key: allot.AllocationKey(PipelineBatch, at), Period: "2026-W52", NominalTime: at})
		if err != nil {
			t.Fatal(err)
		}
		ref := ledger.PaidTaskRef{Pipeline: PipelineBatch, EpisodeID: res.Episode.ID, Step: "score"}
		if _, err := r.led.WriteIntent(ctx, ref, allot.IdempotencyKey(ref.Pipeline, ref.EpisodeID, ref.Step, 0), ledger.BatchQueue); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	if _, _, err := r.led.OpenBatch(ctx, ledger.OpenBatchInput{Key: "b-stuck", Vendor: BatchVendor, Kind: "score", Items: refs[:1]}); err != nil {
		t.Fatal(err)
	}
	_, bad = checkBatchesOf(t, r, charges)
	joined := strings.Join(bad, "\n")
	if len(bad) != 2 || !strings.Contains(joined, "batch b-stuck") || !strings.Contains(joined, "is still open after the drain") ||
		!strings.Contains(joined, refs[1].EpisodeID+" step score r0 is intent and no batch carried it") {
		t.Fatalf("a stuck batch and an unbatched task: violations %q", bad)
	}
}
