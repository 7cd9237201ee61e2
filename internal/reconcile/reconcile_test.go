package reconcile_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"allot"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/internal/pipelinetest"
	"allot/internal/reconcile"
	"allot/internal/report"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
)

const apiKey = "sk-reconcile-test"

var t0 = time.Date(2026, 8, 3, 9, 0, 0, 0, time.UTC) // a Monday in 2026-W32

// billed is a ledger and a simulated vendor that agree: n paid tasks of
// pipeline "weekly" step "video", each sent to the vendor and recorded as
// allot records them.
type billed struct {
	t      *testing.T
	led    *ledger.Ledger
	set    *pipeline.Set
	sim    *paidvendortest.Simulator
	client *paidvendor.HTTPClient
	tasks  []ledger.PaidTask
}

func newBilled(t *testing.T, led *ledger.Ledger, n int) *billed {
	t.Helper()
	set, err := pipeline.Parse([]byte(pipelinetest.Budgeted{Limit: 1_000_000}.TOML()), "test")
	if err != nil {
		t.Fatal(err)
	}
	sim := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: apiKey})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	client, err := paidvendor.NewHTTPClient(srv.URL, apiKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &billed{t: t, led: led, set: set, sim: sim, client: client}
	for range n {
		b.tasks = append(b.tasks, b.send(true))
	}
	return b
}

// send allocates an episode, writes its paid task's intent, sends it to
// the vendor and, when record, records the vendor's answer.
func (b *billed) send(record bool) ledger.PaidTask {
	b.t.Helper()
	ctx := context.Background()
	nominal := t0.Add(time.Duration(len(b.tasks)+b.sim.TaskCount()) * time.Hour)
	res, err := b.led.Allocate(ctx, ledger.AllocateInput{Pipeline: "weekly", Key: allot.AllocationKey("weekly", nominal), Period: "2026-W32", NominalTime: nominal})
	if err != nil {
		b.t.Fatal(err)
	}
	ref := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: res.Episode.ID, Step: "video"}
	key := uuid.NewString()
	task, err := b.led.WriteIntent(ctx, ref, key, "test")
	if err != nil {
		b.t.Fatal(err)
	}
	vt, err := b.client.Submit(ctx, paidvendor.SubmitRequest{IdempotencyKey: key, Kind: "video"})
	if err != nil {
		b.t.Fatal(err)
	}
	if !record {
		return task
	}
	task, err = b.led.RecordSubmission(ctx, ledger.Submission{PaidTaskRef: ref, RemoteRef: vt.ID, Amount: vt.Cost.Amount, Currency: vt.Cost.Currency})
	if err != nil {
		b.t.Fatal(err)
	}
	return task
}

func (b *billed) reconciler(now time.Time, pageSize int) *reconcile.Reconciler {
	return &reconcile.Reconciler{Ledger: b.led, Pipelines: b.set, PageSize: pageSize, Now: func() time.Time { return now },
		Vendors: []reconcile.Vendor{{Name: pipeline.DefaultVendor, Names: []string{pipeline.DefaultVendor}, Account: reconcile.Account(pipeline.DefaultVendor), Bill: b.client}}}
}

// drift is every drift item of the ledger, as "class line".
func (b *billed) drift() []string {
	b.t.Helper()
	items, err := b.led.DriftItems(context.Background(), ledger.DriftFilter{})
	if err != nil {
		b.t.Fatal(err)
	}
	var out []string
	for _, d := range items {
		out = append(out, fmt.Sprintf("%s %s", d.Class, d.Line))
	}
	slices.Sort(out)
	return out
}

func ledgers(t *testing.T, each func(t *testing.T, led *ledger.Ledger)) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			url := ledgertest.DriverURL(t, driver)
			if url == "" {
				t.Skip("ALLOT_TEST_POSTGRES_DSN is not set")
			}
			each(t, ledgertest.Open(t, url))
		})
	}
}

// One fault of each kind planted in the vendor's bill gives exactly one
// drift item of its class, on its line, and nothing else: the tasks the
// bill and the ledger agree on are explained.
func TestReconcileFindsExactlyThePlantedFaults(t *testing.T) {
	ledgers(t, func(t *testing.T, led *ledger.Ledger) {
		b := newBilled(t, led, 7)
		phantom := b.sim.PlantPhantomCharge(999, "USD")
		if err := b.sim.DropCharge(b.tasks[1].RemoteRef); err != nil {
			t.Fatal(err)
		}
		if err := b.sim.SetChargeAmount(b.tasks[2].RemoteRef, 999); err != nil {
			t.Fatal(err)
		}
		double, err := b.sim.DoubleCharge(b.tasks[3].RemoteRef)
		if err != nil {
			t.Fatal(err)
		}
		refund, err := b.sim.Refund(b.tasks[4].RemoteRef, 100)
		if err != nil {
			t.Fatal(err)
		}
		wrong := chargeLine(t, b, b.tasks[2].RemoteRef)

		// Past every grace: the dropped charge is due. check --vendor,
		// asked first, finds the same five with its own kinds.
		later := time.Now().Add(2 * time.Hour)
		vendorKinds := func() []string {
			res, err := report.Audit(context.Background(), led, report.CheckInput{Pipelines: b.set, Now: later,
				Vendors: []report.VendorCharges{{Name: pipeline.DefaultVendor, Charges: b.client, Bill: "acct"}}})
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, v := range res.Violations {
				switch v.Kind {
				case ledger.KindChargeUnrecorded, ledger.KindCostUncharged, ledger.KindAmountDiffers, report.KindDoubleCharge, report.KindRefunded, report.KindDriftOpen:
					kinds = append(kinds, v.Kind)
				}
			}
			slices.Sort(kinds)
			return kinds
		}
		if got, want := vendorKinds(), []string{"amount_differs", "charge_unrecorded", "cost_uncharged", "double_charge", "refunded"}; !slices.Equal(got, want) {
			t.Fatalf("check --vendor found %v, want %v", got, want)
		}
		res := b.reconciler(later, 2).Run(context.Background())
		if len(res) != 1 || !res[0].Reconciled || len(res[0].Drift) != 5 {
			t.Fatalf("results %+v, want one vendor reconciled with 5 new drift items", res)
		}
		want := []string{
			string(allot.DriftAmountDiffers) + " " + wrong,
			string(allot.DriftDoubleCharge) + " " + double,
			string(allot.DriftRefunded) + " " + refund,
			string(allot.DriftUnrecorded) + " " + phantom,
			string(allot.DriftUncharged) + " " + allot.DriftLineOfCost(b.tasks[1].RemoteRef),
		}
		slices.Sort(want)
		if got := b.drift(); !slices.Equal(got, want) {
			t.Fatalf("drift items\n%v\nwant exactly\n%v", got, want)
		}
		// Once recorded, check shows each as an open drift item, and
		// --vendor does not report its line a second time.
		if got := vendorKinds(); !slices.Equal(got, []string{"drift_open", "drift_open", "drift_open", "drift_open", "drift_open"}) {
			t.Fatalf("check --vendor after reconciling found %v, want the 5 open drift items only", got)
		}
		// Each names its episode, step, period and money.
		items, _ := b.led.DriftItems(context.Background(), ledger.DriftFilter{})
		for _, d := range items {
			if d.Currency != "USD" || d.Amount <= 0 || d.Detail == "" {
				t.Errorf("drift item %+v has no money or detail", d)
			}
			if d.Class != allot.DriftUnrecorded && (d.EpisodeID == "" || d.Step != "video" || d.Period != "2026-W32") {
				t.Errorf("drift item %+v does not name its episode, step and period", d)
			}
		}
	})
}

// chargeLine is the ID of the (first) charge line of a task.
func chargeLine(t *testing.T, b *billed, taskID string) string {
	t.Helper()
	for _, c := range b.sim.Charges() {
		if c.TaskID == taskID && !c.Refund {
			return c.ID
		}
	}
	t.Fatalf("no charge line for %s", taskID)
	return ""
}

// Reconciling again, or from several workers at once, records nothing
// new: every item is once per (account, line, class).
func TestReconcileTwiceRecordsNothingNew(t *testing.T) {
	ledgers(t, func(t *testing.T, led *ledger.Ledger) {
		b := newBilled(t, led, 4)
		b.sim.PlantPhantomCharge(500, "USD")
		if _, err := b.sim.DoubleCharge(b.tasks[0].RemoteRef); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(2 * time.Hour)
		var wg sync.WaitGroup
		results := make([][]reconcile.Result, 4)
		for i := range results {
			wg.Go(func() { results[i] = b.reconciler(later, 1).Run(context.Background()) })
		}
		wg.Wait()
		found := 0
		for _, res := range results {
			for _, r := range res {
				if !r.Reconciled {
					t.Fatalf("a concurrent pass was not reconciled: %s", r.Reason)
				}
				found += len(r.Drift)
			}
		}
		if got := b.drift(); len(got) != 2 || found != 2 {
			t.Fatalf("drift %v, reported as new %d times, want 2 items each reported once", got, found)
		}
		again := b.reconciler(later, 1).Run(context.Background())
		if len(again[0].Drift) != 0 || again[0].NewLines != 0 {
			t.Fatalf("a pass over a bill read already found %+v", again[0])
		}
		// A new line after the watermark is read, and only it.
		b.sim.PlantPhantomCharge(700, "USD")
		next := b.reconciler(later, 1).Run(context.Background())
		if next[0].NewLines != 1 || len(next[0].Drift) != 1 {
			t.Fatalf("after one more line: %+v", next[0])
		}
	})
}

// A charge for a task whose answer has not been recorded yet waits for it
// within the vendor's grace, and is money without a record after.
func TestReconcileWaitsForAnAnswerWithinTheGrace(t *testing.T) {
	led := ledgertest.New(t).Led
	b := newBilled(t, led, 1)
	lost := b.send(false)
	res := b.reconciler(time.Now(), 10).Run(context.Background())
	if res[0].Pending != 1 || len(res[0].Drift) != 0 {
		t.Fatalf("within the grace: %+v", res[0])
	}
	res = b.reconciler(time.Now().Add(2*time.Hour), 10).Run(context.Background())
	if len(res[0].Drift) != 1 || res[0].Drift[0].Class != allot.DriftUnrecorded || res[0].Drift[0].EpisodeID != lost.EpisodeID {
		t.Fatalf("after the grace: %+v", res[0])
	}
	if want := allot.LookupCommand("weekly", lost.EpisodeID, "video"); !strings.Contains(res[0].Drift[0].Detail, want) {
		t.Fatalf("detail %q does not print %q", res[0].Drift[0].Detail, want)
	}
}

// A vendor whose bill cannot be read is reported not reconciled, with
// why, and nothing is written for it.
func TestAVendorWithoutABillIsNotReconciled(t *testing.T) {
	led := ledgertest.New(t).Led
	r := &reconcile.Reconciler{Ledger: led, Vendors: []reconcile.Vendor{{Name: "videogen", Account: "x", NotReconciled: "adapter activity has no bill reader"}}}
	res := r.Run(context.Background())
	if len(res) != 1 || res[0].Reconciled || res[0].Reason != "adapter activity has no bill reader" {
		t.Fatalf("%+v", res)
	}
}

// A batch bills each item as it finishes and allot records the item when
// the batch ends, hours later: the charge of an item of a running batch
// waits for its batch, past the grace, and is no drift. Once the batch
// ended without recording the item (its results were lost), the charge
// is money the ledger does not hold: drift, naming the task.
func TestReconcileWaitsForABatchItemUntilItsBatchEnds(t *testing.T) {
	ctx := context.Background()
	led := ledgertest.New(t).Led
	b := newBilled(t, led, 0)
	res, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: "weekly", Key: allot.AllocationKey("weekly", t0), Period: "2026-W32", NominalTime: t0})
	if err != nil {
		t.Fatal(err)
	}
	ref := ledger.PaidTaskRef{Pipeline: "weekly", EpisodeID: res.Episode.ID, Step: "video"}
	key := uuid.NewString()
	if _, err := led.WriteIntent(ctx, ref, key, ledger.BatchQueue); err != nil {
		t.Fatal(err)
	}
	const batchKey = "b-reconcile"
	if _, _, err := led.OpenBatch(ctx, ledger.OpenBatchInput{Key: batchKey, Vendor: pipeline.DefaultVendor, Kind: "video", Items: []ledger.PaidTaskRef{ref}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := led.BeginBatchCreate(ctx, batchKey, now, now.Add(time.Minute), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := led.RecordBatchCreated(ctx, batchKey, "batch_1", "in_progress", now.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	// The vendor bills the item under its key, as its batch does.
	if _, err := b.client.Submit(ctx, paidvendor.SubmitRequest{IdempotencyKey: key, Kind: "video"}); err != nil {
		t.Fatal(err)
	}
	later := now.Add(25 * time.Hour) // far past the grace (1h)
	got := b.reconciler(later, 10).Run(ctx)
	if got[0].Pending != 1 || len(got[0].Drift) != 0 {
		t.Fatalf("an item of a running batch, billed 25h ago: %+v, want it pending", got[0])
	}
	if _, _, err := led.SettleBatchItem(ctx, batchKey, ledger.BatchItemSettlement{Ref: ref, Outcome: allot.BatchItemResultLost, Error: "output file gone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := led.EndBatch(ctx, batchKey, "completed"); err != nil {
		t.Fatal(err)
	}
	got = b.reconciler(later, 10).Run(ctx)
	if len(got[0].Drift) != 1 || got[0].Drift[0].Class != allot.DriftUnrecorded || got[0].Drift[0].EpisodeID != ref.EpisodeID {
		t.Fatalf("an item its ended batch lost: %+v, want one unrecorded drift item", got[0])
	}
}

// studioFile is a pipeline file whose paid step uses the vendor "studio"
// at url with its key in STUDIO_KEY.
func studioFile(t *testing.T, url string) *pipeline.Set {
	t.Helper()
	set, err := pipeline.Parse([]byte(fmt.Sprintf(`
[[vendor]]
name        = "studio"
url         = %q
api_key_env = "STUDIO_KEY"

[[pipeline]]
name = "weekly"
  [[pipeline.step]]
  name   = "video"
  kind   = "paid"
  vendor = "studio"
`, url)), "test")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// A vendor's bill is the vendor's, not its key's (issue 38 §3): rotating
// the API key, or spelling the URL another way, reads on from where the
// bill was read, so no drift item is recorded twice and an acknowledged
// one stays acknowledged. A key that reads another account's bill (the
// vendor says whose) is refused, naming the way out, and writes nothing.
func TestAKeyRotationRecordsNoDriftTwice(t *testing.T) {
	ledgers(t, func(t *testing.T, led *ledger.Ledger) {
		ctx := context.Background()
		sim := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: "sk-old", Account: "org-studio"})
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		pass := func(url, key string) reconcile.Result {
			t.Helper()
			t.Setenv("STUDIO_KEY", key)
			set := studioFile(t, url)
			r := &reconcile.Reconciler{Ledger: led, Pipelines: set, Vendors: reconcile.Vendors(ctx, reconcile.VendorsInput{Pipelines: set})}
			res := r.Run(ctx)
			if len(res) != 1 {
				t.Fatalf("%d results, want studio's", len(res))
			}
			return res[0]
		}
		sim.PlantPhantomCharge(500, "USD")
		sim.PlantPhantomCharge(700, "USD")
		first := pass(srv.URL, "sk-old")
		if !first.Reconciled || len(first.Drift) != 2 {
			t.Fatalf("the first pass: %+v, want two drift items", first)
		}
		items, err := led.DriftItems(ctx, ledger.DriftFilter{})
		if err != nil || len(items) != 2 {
			t.Fatalf("drift items %v, %v", items, err)
		}
		if _, err := led.AckDrift(ctx, items[0].ID, "ops", "a test charge, refunded by mail"); err != nil {
			t.Fatal(err)
		}

		sim.RotateKey("sk-new")
		for _, url := range []string{srv.URL, srv.URL + "/"} {
			again := pass(url, "sk-new")
			if !again.Reconciled || again.NewLines != 0 || len(again.Drift) != 0 {
				t.Fatalf("after the key's rotation (URL %s): %+v; want the bill read on from its watermark, nothing new", url, again)
			}
		}
		now, err := led.DriftItems(ctx, ledger.DriftFilter{})
		if err != nil || len(now) != 2 || now[0].AckedAt.IsZero() {
			t.Fatalf("after the rotation the drift items are %+v (%v); want the same two, the first still acknowledged", now, err)
		}
		sim.PlantPhantomCharge(900, "USD")
		if next := pass(srv.URL, "sk-new"); next.NewLines != 1 || len(next.Drift) != 1 {
			t.Fatalf("a new line after the rotation: %+v; want it read and judged alone", next)
		}

		// A key of another account, at a vendor that names its accounts.
		other := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: "sk-other", Account: "org-elsewhere"})
		other.PlantPhantomCharge(100, "USD")
		osrv := httptest.NewServer(other)
		t.Cleanup(osrv.Close)
		refused := pass(osrv.URL, "sk-other")
		if refused.Reconciled || !strings.Contains(refused.Reason, "another account") || !strings.Contains(refused.Reason, "[[vendor]] name") {
			t.Fatalf("a key of another account: %+v; want it not reconciled, naming the way out", refused)
		}
		if items, err := led.DriftItems(ctx, ledger.DriftFilter{}); err != nil || len(items) != 3 {
			t.Fatalf("after the refused pass: %d drift items (%v), want the 3 there were", len(items), err)
		}
	})
}
