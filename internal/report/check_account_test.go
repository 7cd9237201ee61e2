package report

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"allot/internal/importer"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
)

// accountVendor is a simulated vendor account: its URL and API key.
func accountVendor(t *testing.T, key string) string {
	t.Helper()
	sim := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: key,
		PricePerKind: map[string]paidvendor.Cost{"video": {Amount: 250, Currency: "USD"}, "cover": {Amount: 40, Currency: "USD"}}})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return srv.URL
}

// submitTo sends one task of kind to the vendor at url and returns its
// reference (the vendor charges it).
func submitTo(t *testing.T, url, key, kind, idempotencyKey string) string {
	t.Helper()
	c, err := paidvendor.NewHTTPClient(url, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Submit(context.Background(), paidvendor.SubmitRequest{IdempotencyKey: idempotencyKey, Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	return task.ID
}

// twoEntryLedger imports three old runs whose video was made by vendor
// studio and cover by vendor studio-b, charged at videoURL and coverURL
// with their keys, and returns the ledger and the pipeline file, whose
// two [[vendor]] entries give studioURL/STUDIO_KEY and studioBURL/STUDIO_B_KEY.
func twoEntryLedger(t *testing.T, videoURL, videoKey, coverURL, coverKey, studioURL, studioBURL string) (*ledger.Ledger, *pipeline.Set) {
	t.Helper()
	set, err := pipeline.Parse(fmt.Appendf(nil, `
[[vendor]]
name        = "studio"
url         = %q
api_key_env = "STUDIO_KEY"
bill_grace  = "1ns"

[[vendor]]
name        = "studio-b"
url         = %q
api_key_env = "STUDIO_B_KEY"
bill_grace  = "1ns"

[[pipeline]]
name = "weekly-video"
  [[pipeline.step]]
  name   = "video"
  kind   = "paid"
  vendor = "studio"
  [[pipeline.step]]
  name   = "cover"
  kind   = "paid"
  vendor = "studio-b"
`, studioURL, studioBURL), "test")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i, week := range []string{"2026-07-13", "2026-07-20", "2026-07-27"} {
		video := submitTo(t, videoURL, videoKey, "video", fmt.Sprintf("0b7e2c1a-5d6f-4a8b-9c0d-00000000000%d", i))
		cover := submitTo(t, coverURL, coverKey, "cover", fmt.Sprintf("0b7e2c1a-5d6f-4a8b-9c0d-10000000000%d", i))
		lines = append(lines, fmt.Sprintf(`{"old_id": "run-%d", "nominal_time": "%sT02:00:00Z", "completed_at": "%sT12:00:00Z",`+
			` "references": [{"step": "video", "remote_ref": %q}, {"step": "cover", "remote_ref": %q}],`+
			` "costs": [{"remote_ref": %q, "amount": 250, "currency": "USD"}, {"remote_ref": %q, "amount": 40, "currency": "USD"}]}`,
			i, week, week, video, cover, video, cover))
	}
	led := ledgertest.Open(t, "sqlite:"+t.TempDir()+"/allot.db")
	if res, err := importer.Import(context.Background(), led, set, importer.ImportInput{Pipeline: "weekly-video", From: ledgertest.WriteSource(t, nil, lines...), InPlace: true}); err != nil || !res.OK {
		t.Fatalf("import: %+v, %v", res, err)
	}
	return led, set
}

// TestCheckVendorReconcilesAnAccountOnce: two [[vendor]] entries on one
// vendor account (same URL and key) have one bill; check --vendor
// reconciles it once against the costs of both, so neither entry's
// charges look unrecorded to the other, and the key appears nowhere in
// the result (issue 24).
func TestCheckVendorReconcilesAnAccountOnce(t *testing.T) {
	const key = "sk-shared-account-DO-NOT-PRINT"
	url := accountVendor(t, key)
	led, set := twoEntryLedger(t, url, key, url, key, url, url+"/")
	t.Setenv("STUDIO_KEY", key)
	t.Setenv("STUDIO_B_KEY", key)
	res, err := Audit(context.Background(), led, CheckInput{Vendors: HTTPVendors(set, "", func() (string, error) { return "", nil }), Pipelines: set})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(res)
	if !res.OK || len(res.Violations) != 0 {
		t.Fatalf("check --vendor with two entries on one account: %s", out)
	}
	checks := map[string]VendorCheck{}
	for _, v := range res.Vendors {
		checks[v.Name] = v
	}
	if a, b := checks["studio"], checks["studio-b"]; a.Status != VendorReconciled || a.Charges != 6 || a.Costs != 3 || !slices.Equal(a.SharedAccount, []string{"studio-b"}) ||
		b.Status != VendorReconciled || b.Costs != 3 || !slices.Equal(b.SharedAccount, []string{"studio"}) {
		t.Fatalf("vendors: %+v", res.Vendors)
	}
	if strings.Contains(string(out), key) {
		t.Fatalf("the result shows the API key: %s", out)
	}
}

// TestCheckVendorNeverPrintsAFixThatDoubleBooks: a charge on one account
// for a task whose cost the ledger books under a vendor of another account
// is reported as such, without telling the operator to book it.
func TestCheckVendorNeverPrintsAFixThatDoubleBooks(t *testing.T) {
	urlA, urlB := accountVendor(t, "key-a"), accountVendor(t, "key-b")
	// Every task was charged on account A; the file says covers are B's.
	led, set := twoEntryLedger(t, urlA, "key-a", urlA, "key-a", urlA, urlB)
	t.Setenv("STUDIO_KEY", "key-a")
	t.Setenv("STUDIO_B_KEY", "key-b")
	res, err := Audit(context.Background(), led, CheckInput{Vendors: HTTPVendors(set, "", func() (string, error) { return "", nil }), Pipelines: set})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, v := range res.Violations {
		kinds[v.Kind]++
		if strings.Contains(v.Detail, "correct the ledger's cost entry") {
			t.Errorf("a fix that books the cost again: %s", v.Detail)
		}
	}
	if res.OK || kinds[KindChargeOtherVendor] != 3 || kinds[ledger.KindCostUncharged] != 3 || len(kinds) != 2 {
		t.Fatalf("violations %v, want 3 %s (account A's covers) and 3 %s (B never charged them)", kinds, KindChargeOtherVendor, ledger.KindCostUncharged)
	}
}
