package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"allot/internal/report"
	"allot/paidvendor/vendorapi"
)

// check --vendor reconciles every vendor it can, reports each one it
// cannot with the reason, and always runs the ledger's audit (issue 15):
// with two vendors, one without its key, the other is reconciled, the
// damaged file is still found, and the check is not ok (exit 3). Without a
// vendor it can reconcile (the dev stack's starter, without
// ALLOT_VENDOR_URL) it never says ok either.
func TestCheckVendorReconcilesWhatItCanAndSaysWhatNot(t *testing.T) {
	data := t.TempDir()
	url := "sqlite:" + filepath.Join(t.TempDir(), "allot.db")
	// The default vendor bills exactly what the ledger books.
	defaultVendor, _ := billingVendor(t, "default-key", []vendorapi.Charge{
		{TaskID: "vt_29a0c1d2e3f40001", Amount: 250, Currency: "USD", At: time.Now()},
		{TaskID: "vt_30a0c1d2e3f40001", Amount: 250, Currency: "USD", At: time.Now()},
		{TaskID: "vt_30a0c1d2e3f40011", Amount: 250, Currency: "USD", At: time.Now()},
		{TaskID: "vt_31a0c1d2e3f40001", Amount: 250, Currency: "USD", At: time.Now()},
	})
	studio, studioStrays := billingVendor(t, "studio-key", nil)
	pipes := writePipelines(t, studio.URL)
	createLedger(t, url) // as the worker does: import never creates one
	if code, out, errOut := run(t, "import", "--pipeline", "weekly-video", "--from", exampleJSONL, "--ledger", url, "--pipelines", pipes, "--data-dir", data); code != exitOK {
		t.Fatalf("import: exit %d, %s %s", code, out, errOut)
	}
	t.Setenv("ALLOT_VENDOR_URL", defaultVendor.URL)
	t.Setenv("ALLOT_VENDOR_API_KEY", "default-key")
	t.Setenv("STUDIO_API_KEY", "")
	os.Unsetenv("STUDIO_API_KEY")

	type result struct {
		OK         bool                    `json:"ok"`
		Violations []struct{ Kind string } `json:"violations"`
		Vendors    []report.VendorCheck    `json:"vendors"`
		Incomplete string                  `json:"incomplete"`
	}
	check := func(args ...string) (int, result, string) {
		t.Helper()
		code, stdout, stderr := run(t, append([]string{"check", "--vendor", "--json", "--ledger", url}, args...)...)
		var res result
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("check --json printed %q (%s): %v", stdout, stderr, err)
		}
		return code, res, stdout
	}

	// Nothing wrong but studio's key: not ok.
	code, res, out := check("--pipelines", pipes)
	status := map[string]report.VendorCheck{}
	for _, v := range res.Vendors {
		status[v.Name] = v
	}
	def, st := status["default"], status["studio"]
	if code != exitViolations || res.OK || len(res.Violations) != 0 || res.Incomplete == "" ||
		def.Status != report.VendorReconciled || def.Charges != 4 ||
		st.Status != report.VendorNotReconciled || !strings.Contains(st.Reason, "STUDIO_API_KEY") {
		t.Fatalf("check --vendor with studio's key unset: exit %d\n%s", code, out)
	}
	// The ledger's own checks still run: a damaged file is found.
	if err := os.WriteFile(filepath.Join(data, "artifacts", "weekly-video", "2026-W29-0", "cover-r0.png"), []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, res, out := check("--pipelines", pipes); code != exitViolations || len(res.Violations) != 1 || res.Violations[0].Kind != "artifact_mismatch" {
		t.Fatalf("check --vendor on a damaged file with studio's key unset: exit %d\n%s", code, out)
	}
	if n := studioStrays.Load(); n != 0 {
		t.Fatalf("studio was sent %d requests without its key", n)
	}
	code, text, _ := run(t, "check", "--vendor", "--ledger", url, "--pipelines", pipes)
	if code != exitViolations || strings.Contains("\n"+text, "\nok:") || !strings.Contains(text, "NOT RECONCILED: vendor studio has no API key") || !strings.Contains(text, "not ok: vendor studio not reconciled") {
		t.Fatalf("check --vendor (text): exit %d\n%s", code, text)
	}

	// The dev stack's starter: the embedded pipelines' paid steps use the
	// default vendor, whose URL the starter does not have.
	t.Setenv("ALLOT_VENDOR_URL", "")
	code, res, out = check()
	if code != exitViolations || res.OK || len(res.Vendors) != 1 || res.Vendors[0].Status != report.VendorNotReconciled ||
		!strings.Contains(res.Vendors[0].Reason, "ALLOT_VENDOR_URL") {
		t.Fatalf("check --vendor without the default vendor's URL: exit %d\n%s", code, out)
	}
	// A pipeline file without a vendor to reconcile: not ok either.
	free := filepath.Join(t.TempDir(), "free.toml")
	if err := os.WriteFile(free, []byte("[[pipeline]]\nname = \"weekly-video\"\n  [[pipeline.step]]\n  name = \"plan\"\n  kind = \"local\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, res, out := check("--pipelines", free); code != exitViolations || res.OK || res.Incomplete == "" || res.Vendors[0].Status != report.VendorNoBill {
		t.Fatalf("check --vendor with nothing to reconcile: exit %d\n%s", code, out)
	}
}
