package report

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/importer"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/paidvendor"
	"allot/pipeline"
)

// checkPipelines is weekly-video with its cover made by the named vendor
// "studio". Both vendors give a bill_grace of a nanosecond, so that what a
// test just wrote is due on the bill at once.
const checkPipelines = `
[[vendor]]
name        = "studio"
url         = "http://studio.invalid"
api_key_env = "STUDIO_API_KEY"
bill_grace  = "1ns"

[[vendor]]
name       = "default"
bill_grace = "1ns"

[[pipeline]]
name = "weekly-video"

  [[pipeline.step]]
  name = "video"
  kind = "paid"

  [[pipeline.step]]
  name   = "cover"
  kind   = "paid"
  vendor = "studio"

  [[pipeline.step]]
  name = "assemble"
  kind = "local"

  [[pipeline.step]]
  name = "approve"
  kind = "approval"

  [[pipeline.step]]
  name = "publish"
  kind = "local"
`

// fakeBill is a vendor's charge list.
type fakeBill []paidvendor.Charge

func (b *fakeBill) Charges(context.Context) ([]paidvendor.Charge, error) { return *b, nil }

// checkedLedger is a ledger with ordinary history (the docs' import
// example, and an episode a run allocated whose video was submitted) and,
// per vendor, a bill that matches it.
type checkedLedger struct {
	led       *ledger.Ledger
	pipelines *pipeline.Set
	data      string
	live      ledger.Episode
	bills     map[string]*fakeBill
}

func (c *checkedLedger) input() CheckInput {
	in := CheckInput{Pipelines: c.pipelines}
	for _, name := range []string{pipeline.DefaultVendor, "studio"} {
		in.Vendors = append(in.Vendors, VendorCharges{Name: name, Charges: c.bills[name]})
	}
	return in
}

func newCheckedLedger(t *testing.T, url string) *checkedLedger {
	t.Helper()
	ctx := context.Background()
	set, err := pipeline.Parse([]byte(checkPipelines), "test")
	if err != nil {
		t.Fatal(err)
	}
	led, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	c := &checkedLedger{led: led, pipelines: set, data: t.TempDir(), bills: map[string]*fakeBill{pipeline.DefaultVendor: {}, "studio": {}}}
	if _, err := importer.Import(ctx, led, set, importer.ImportInput{Pipeline: "weekly-video", From: "../../examples/import/weekly-video.jsonl", DataDir: c.data}); err != nil {
		t.Fatal(err)
	}
	p, _ := set.Get("weekly-video")
	nominal := time.Date(2026, 11, 2, 2, 0, 0, 0, time.UTC)
	key := allot.AllocationKey("weekly-video", nominal)
	res, err := led.Allocate(ctx, ledger.AllocateInput{Pipeline: "weekly-video", Key: key, Period: p.PeriodOf(nominal), NominalTime: nominal})
	if err != nil {
		t.Fatal(err)
	}
	c.live = res.Episode
	if _, err := led.RecordRunOutcome(ctx, ledger.RunOutcome{Pipeline: "weekly-video", AllocationKey: key, RunID: "run-1", NominalTime: nominal,
		Outcome: allot.OutcomeAllocated, Reason: ledger.ReasonNewEpisode, EpisodeID: c.live.ID, Period: c.live.Period, Sequence: c.live.Sequence}); err != nil {
		t.Fatal(err)
	}
	if _, err := led.PinPlan(ctx, "weekly-video", c.live.ID, p.Plan()); err != nil {
		t.Fatal(err)
	}
	if err := led.RecordEpisodeOutcome(ctx, "weekly-video", c.live.ID, allot.OutcomeRunning, "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	ref := ledger.PaidTaskRef{Pipeline: "weekly-video", EpisodeID: c.live.ID, Step: "video"}
	if _, err := led.WriteIntent(ctx, ref, allot.IdempotencyKey("weekly-video", c.live.ID, "video", 0), "attempt-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := led.RecordSubmission(ctx, ledger.Submission{PaidTaskRef: ref, RemoteRef: "vt_11ee0000000000aa", Amount: 250, Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	// Each vendor's bill is what the ledger booked to it.
	tasks := map[string]string{}
	eps, _ := led.ListEpisodes(ctx, "weekly-video", "")
	for _, ep := range eps {
		ts, _ := led.PaidTasks(ctx, ep.Pipeline, ep.ID)
		for _, pt := range ts {
			tasks[pt.RemoteRef] = pt.IdempotencyKey
		}
	}
	costs, err := led.Costs(ctx, "weekly-video", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, cost := range costs {
		vendor := pipeline.DefaultVendor
		if cost.Step == "cover" {
			vendor = "studio"
		}
		*c.bills[vendor] = append(*c.bills[vendor], paidvendor.Charge{TaskID: cost.RemoteRef, IdempotencyKey: tasks[cost.RemoteRef],
			Amount: cost.Amount, Currency: cost.Currency, At: cost.RecordedAt})
	}
	return c
}

// found lists a check's violations as "kind episode".
func found(t *testing.T, res CheckResult) []string {
	t.Helper()
	var out []string
	for _, v := range res.Violations {
		if v.Pipeline == "" && v.Kind != ledger.KindChargeUnrecorded || v.Detail == "" {
			t.Errorf("violation %+v names no pipeline or no detail", v)
		}
		out = append(out, v.Kind+" "+v.Episode)
	}
	slices.Sort(out)
	return out
}

// TestCheckFindsEachPlantedProblem plants one problem with the files or a
// vendor's bill in a ledger that checks clean, and wants exactly that
// violation reported, on both drivers.
func TestCheckFindsEachPlantedProblem(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			for _, tc := range []struct {
				name  string
				plant func(c *checkedLedger)
				want  func(c *checkedLedger) []string
				fix   string
			}{
				{"artifact_missing", func(c *checkedLedger) {
					if err := os.Remove(filepath.Join(c.data, "artifacts", "weekly-video", "2026-W29-0", "manifest.json")); err != nil {
						t.Fatal(err)
					}
				}, func(*checkedLedger) []string { return []string{"artifact_missing 2026-W29-0"} }, ""},
				{"artifact_mismatch", func(c *checkedLedger) {
					if err := os.WriteFile(filepath.Join(c.data, "artifacts", "weekly-video", "2026-W30-0", "video-r1.mp4"), []byte("re-encoded\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}, func(*checkedLedger) []string { return []string{"artifact_mismatch 2026-W30-0"} }, ""},
				{"charge_unrecorded", func(c *checkedLedger) {
					*c.bills["studio"] = append(*c.bills["studio"], paidvendor.Charge{TaskID: "vt_99990000000000ff", IdempotencyKey: "f4a3d0a2-0000-4000-8000-000000000000", Amount: 40, Currency: "USD"})
				}, func(*checkedLedger) []string { return []string{"charge_unrecorded "} }, ""},
				{"charge_unrecorded by key", func(c *checkedLedger) {
					ref := ledger.PaidTaskRef{Pipeline: "weekly-video", EpisodeID: c.live.ID, Step: "cover"}
					key := allot.IdempotencyKey("weekly-video", c.live.ID, "cover", 0)
					if _, err := c.led.WriteIntent(context.Background(), ref, key, "attempt-2"); err != nil {
						t.Fatal(err)
					}
					*c.bills["studio"] = append(*c.bills["studio"], paidvendor.Charge{TaskID: "vt_99990000000000ee", IdempotencyKey: key, Amount: 40, Currency: "USD"})
				}, func(c *checkedLedger) []string { return []string{"charge_unrecorded " + c.live.ID} },
					"starter episode lookup --pipeline weekly-video --episode 2026-W45-0 --step cover"},
				{"cost_uncharged", func(c *checkedLedger) {
					bill := *c.bills[pipeline.DefaultVendor]
					*c.bills[pipeline.DefaultVendor] = slices.DeleteFunc(bill, func(ch paidvendor.Charge) bool { return ch.TaskID == "vt_31a0c1d2e3f40001" })
				}, func(*checkedLedger) []string { return []string{"cost_uncharged 2026-W31-0"} }, ""},
				{"amount_differs", func(c *checkedLedger) {
					for i, ch := range *c.bills["studio"] {
						if ch.TaskID == "vt_30c0c1d2e3f40002" {
							(*c.bills["studio"])[i].Amount = 45
						}
					}
				}, func(*checkedLedger) []string { return []string{"amount_differs 2026-W30-0"} }, ""},
				{"double_charge", func(c *checkedLedger) {
					bill := *c.bills[pipeline.DefaultVendor]
					*c.bills[pipeline.DefaultVendor] = append(bill, bill[len(bill)-1])
				}, func(c *checkedLedger) []string { return []string{"double_charge " + c.live.ID} }, ""},
				{"refunded", func(c *checkedLedger) {
					bill := *c.bills[pipeline.DefaultVendor]
					refund := bill[len(bill)-1]
					refund.Refund, refund.Amount = true, 100
					*c.bills[pipeline.DefaultVendor] = append(bill, refund)
				}, func(c *checkedLedger) []string { return []string{"refunded " + c.live.ID} }, ""},
			} {
				t.Run(tc.name, func(t *testing.T) {
					url := ledgertest.DriverURL(t, driver)
					if url == "" {
						t.Skip("ALLOT_TEST_POSTGRES_DSN is not set")
					}
					c := newCheckedLedger(t, url)
					ctx := context.Background()
					clean, err := Audit(ctx, c.led, c.input())
					if err != nil || !clean.OK || len(clean.Vendors) != 2 || clean.Artifacts != 8 {
						t.Fatalf("before planting: %+v, %v", clean, err)
					}
					if v := clean.Vendors; v[0].Name != "default" || v[0].Costs != 5 || v[1].Name != "studio" || v[1].Costs != 3 {
						t.Fatalf("vendors reconciled: %+v, want default with 5 costs and studio with 3", v)
					}
					tc.plant(c)
					res, err := Audit(ctx, c.led, c.input())
					if err != nil {
						t.Fatal(err)
					}
					if got, want := found(t, res), tc.want(c); !slices.Equal(got, want) || res.OK {
						t.Fatalf("check found %v, want exactly %v: %+v", got, want, res.Violations)
					}
					if res.Violations[0].Fix != tc.fix {
						t.Errorf("fix %q, want %q", res.Violations[0].Fix, tc.fix)
					}
					// Without --vendor, the bill's problems are not looked for.
					if strings.HasPrefix(tc.name, "artifact") {
						return
					}
					if plain, err := Audit(ctx, c.led, CheckInput{}); err != nil || !plain.OK {
						t.Fatalf("check without vendors: %+v, %v", plain.Violations, err)
					}
				})
			}
		})
	}
}

// TestCheckScopesToOnePipeline: --pipeline limits the ledger's and the
// bill's problems to that pipeline.
func TestCheckScopesToOnePipeline(t *testing.T) {
	c := newCheckedLedger(t, ledgertest.DriverURL(t, "sqlite"))
	ctx := context.Background()
	if err := os.Remove(filepath.Join(c.data, "artifacts", "weekly-video", "2026-W31-0", "cover-r0.png")); err != nil {
		t.Fatal(err)
	}
	in := c.input()
	in.Pipeline = "other"
	if res, err := Audit(ctx, c.led, in); err != nil || !res.OK {
		t.Fatalf("check of another pipeline: %+v, %v", res.Violations, err)
	}
	in.Pipeline = "weekly-video"
	if res, err := Audit(ctx, c.led, in); err != nil || len(res.Violations) != 1 || res.Violations[0].Kind != ledger.KindArtifactMissing {
		t.Fatalf("check of weekly-video: %+v, %v", res.Violations, err)
	}
	if _, err := Audit(ctx, c.led, CheckInput{Pipeline: "Weekly Video"}); err == nil {
		t.Fatal("check accepted an invalid pipeline name")
	}
}

// TestCheckSaysMoneyInMajorUnits: check prints amounts as costs does
// ("0.45 USD", never "45 USD"), and a vendor's charges that would overflow
// when summed are judged line by line, never compared as a wrapped number:
// the absurd first charge differs, the others are charges again.
func TestCheckSaysMoneyInMajorUnits(t *testing.T) {
	c := newCheckedLedger(t, ledgertest.DriverURL(t, "sqlite"))
	ctx := context.Background()
	bill := *c.bills["studio"]
	for i, ch := range bill {
		if ch.TaskID == "vt_30c0c1d2e3f40002" {
			bill[i].Amount = 45
		}
		if ch.TaskID == "vt_31c0c1d2e3f40002" {
			// Three charges whose sum wraps around int64 to exactly the
			// booked amount (2 * MaxInt64 + 42 = 40 mod 2^64).
			bill[i].Amount = math.MaxInt64
			more := ch
			more.Amount = math.MaxInt64
			bill = append(bill, more)
			more.Amount = ch.Amount + 2
			bill = append(bill, more)
		}
	}
	*c.bills["studio"] = bill
	res, err := Audit(ctx, c.led, c.input())
	if err != nil {
		t.Fatal(err)
	}
	details := map[string]string{}
	for _, v := range res.Violations {
		details[v.Episode] += v.Kind + ": " + v.Detail + "\n"
	}
	if d := details["2026-W30-0"]; !strings.Contains(d, "charged 0.45 USD") || !strings.Contains(d, "books 0.40 USD") || strings.Contains(d, " 45 USD") {
		t.Errorf("amount_differs of 2026-W30-0 does not say the amounts in major units: %q", d)
	}
	if d := details["2026-W31-0"]; !strings.Contains(d, "amount_differs") || !strings.Contains(d, "outside 0..") || strings.Count(d, "double_charge") != 2 {
		t.Errorf("charges that overflow are not reported as differing: %q (all: %v)", d, details)
	}
}
