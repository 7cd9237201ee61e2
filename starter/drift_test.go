package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/internal/pipelinetest"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/workflows"
)

// `starter drift reconcile`, `list` and `ack`: a phantom charge on the
// vendor's bill becomes one drift item; the acknowledge command the list
// prints runs as printed; refused acknowledgements change nothing.
func TestDriftReconcileListAck(t *testing.T) {
	const key = "sk-drift-test"
	dir := t.TempDir()
	t.Setenv("ALLOT_PIPELINES", pipelinetest.Write(t, dir, pipelinetest.Budgeted{}.TOML()))
	url := "sqlite:" + filepath.Join(dir, "allot.db")
	t.Setenv("ALLOT_LEDGER", url)
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1") // nothing here talks to Temporal
	sim := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: key})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Setenv("ALLOT_VENDOR_URL", srv.URL)
	t.Setenv(paidvendor.EnvVendorAPIKey, key)

	// One task the ledger and the bill agree on.
	ctx := context.Background()
	led := ledgertest.Open(t, url)
	nominal := time.Date(2026, 8, 3, 9, 0, 0, 0, time.UTC)
	res, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: "weekly", Key: allot.AllocationKey("weekly", nominal), Period: "2026-W32", NominalTime: nominal})
	if err != nil {
		t.Fatal(err)
	}
	ref := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: res.Episode.ID, Step: "video"}
	ikey := uuid.NewString()
	if _, err := led.WriteIntent(ctx, ref, ikey, "test"); err != nil {
		t.Fatal(err)
	}
	client, _ := paidvendor.NewHTTPClient(srv.URL, key, nil)
	vt, err := client.Submit(ctx, paidvendor.SubmitRequest{IdempotencyKey: ikey, Kind: "video"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := led.RecordSubmission(ctx, ledger.Submission{PaidTaskRef: ref, RemoteRef: vt.ID, Amount: vt.Cost.Amount, Currency: vt.Cost.Currency}); err != nil {
		t.Fatal(err)
	}

	if code, out, stderr := run(t, "drift", "reconcile"); code != exitOK || !strings.Contains(out, "1 new line(s), 1 judged") {
		t.Fatalf("a bill that agrees: exit %d\n%s%s", code, out, stderr)
	}
	sim.PlantPhantomCharge(999, "USD")
	code, out, stderr := run(t, "drift", "reconcile")
	if code != exitViolations || !strings.Contains(out, "1 new drift item(s): starter drift list") {
		t.Fatalf("a phantom charge: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := run(t, "drift", "reconcile"); code != exitOK || !strings.Contains(out, "0 new drift item(s)") {
		t.Fatalf("the same bill again: exit %d\n%s", code, out)
	}

	code, out, stderr = run(t, "drift", "list")
	if code != exitOK || !strings.Contains(out, "9.99 USD") {
		t.Fatalf("drift list: exit %d\n%s%s", code, out, stderr)
	}
	var ack string
	for _, line := range strings.Split(out, "\n") {
		if _, cmd, ok := strings.Cut(line, "once settled:"); ok {
			ack = strings.TrimSpace(cmd)
		}
	}
	args, err := workflows.SplitCommand(ack)
	if err != nil || len(args) < 3 || args[0] != "starter" {
		t.Fatalf("printed ack %q: %v", ack, err)
	}

	// Refused: no reason, an unknown ID. Nothing changes.
	if code, _, stderr := run(t, "drift", "ack", "--id", "1"); code != exitUsage || !strings.Contains(stderr, "--reason is required: "+allot.DriftAckCommand(1, "why")) {
		t.Fatalf("ack without a reason: exit %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "drift", "ack", "--id", "99", "--reason", "x"); code != exitError || !strings.Contains(stderr, allot.DriftNotFound) {
		t.Fatalf("ack of an unknown item: exit %d %s", code, stderr)
	}
	if items := driftItems(t, "--all"); len(items) != 1 || !items[0].AckedAt.IsZero() {
		t.Fatalf("a refused ack changed the item: %+v", items)
	}

	if code, out, stderr := run(t, append(args[1:], "--by", "finance")...); code != exitOK || !strings.Contains(out, "drift item 1 (default") {
		t.Fatalf("the printed ack %q: exit %d\n%s%s", ack, code, out, stderr)
	}
	if items := driftItems(t); len(items) != 0 {
		t.Fatalf("an acknowledged item is still open: %+v", items)
	}
	items := driftItems(t, "--all")
	if len(items) != 1 || items[0].AckedBy != "finance" || items[0].AckReason != "what was done" {
		t.Fatalf("the acknowledged item: %+v", items)
	}
	if code, _, stderr := run(t, append(args[1:], "--by", "someone")...); code != exitError || !strings.Contains(stderr, allot.DriftAcknowledged) || !strings.Contains(stderr, "finance") {
		t.Fatalf("a second ack: exit %d %s", code, stderr)
	}
	if again := driftItems(t, "--all"); again[0].AckedBy != "finance" || !again[0].AckedAt.Equal(items[0].AckedAt) {
		t.Fatalf("a refused second ack changed the item: %+v", again)
	}
}

func driftItems(t *testing.T, flags ...string) []ledger.DriftItem {
	t.Helper()
	code, out, stderr := run(t, append([]string{"drift", "list", "--json"}, flags...)...)
	if code != exitOK {
		t.Fatalf("drift list: exit %d %s", code, stderr)
	}
	var items []ledger.DriftItem
	if err := json.Unmarshal([]byte(out), &items); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return items
}
