package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"allot"
	"allot/app"
	"allot/internal/ledger"
	"allot/internal/patience"
	"allot/internal/pipelinetest"
	"allot/internal/report"
	"allot/paidvendor"
	"allot/pipeline"
)

// vendorPipelines: "video" (paid) on the http vendor studio, whose key is
// in STUDIO_TEST_KEY; "cover" (paid) on the default vendor; "publish"
// (effect) on the http vendor outbox, whose key is in the file KEYFILE;
// covers (activity) and spare (http, used by no step) need nothing here.
const vendorPipelines = `
[[vendor]]
name        = "studio"
url         = "https://studio.invalid"
api_key_env = "STUDIO_TEST_KEY"

[[vendor]]
name         = "outbox"
url          = "https://outbox.invalid"
api_key_file = "KEYFILE"

[[vendor]]
name        = "spare"
url         = "https://spare.invalid"
api_key_env = "SPARE_TEST_KEY"

[[vendor]]
name       = "covers"
adapter    = "activity"
task_queue = "covers"
  [vendor.activities]
  submit = "S"
  status = "T"
  fetch  = "F"

[[pipeline]]
name = "weekly"
  [[pipeline.step]]
  name   = "video"
  kind   = "paid"
  vendor = "studio"
  [[pipeline.step]]
  name   = "thumb"
  kind   = "paid"
  vendor = "covers"
  [[pipeline.step]]
  name = "cover"
  kind = "paid"
  [[pipeline.step]]
  name   = "publish"
  kind   = "effect"
  vendor = "outbox"
`

// A worker refuses to start when a vendor one of its steps uses has no key
// it can read (issue 15): the variable unset, the file missing, the
// default vendor without ALLOT_VENDOR_URL or without its key. The refusal is
// VendorNotConfigured, names the vendor and the variable or file, and comes
// before the ledger is created or Temporal is dialed. Vendors no step uses
// and activity adapters need no key here.
func TestWorkerRefusesAVendorWithoutItsKey(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "outbox.key")
	pipelines := pipelinetest.Write(t, dir, strings.ReplaceAll(vendorPipelines, "KEYFILE", keyFile))
	os.Unsetenv("SPARE_TEST_KEY")
	start := func(vendorURL string, creds paidvendor.CredentialsSource) error {
		ctx, cancel := patience.Context(t, 30*time.Second)
		defer cancel()
		return app.RunWorker(ctx, app.WorkerConfig{
			Config:      app.Config{Ledger: "sqlite:" + filepath.Join(dir, "allot.db"), DataDir: dir, Pipelines: pipelines, VendorURL: vendorURL},
			Temporal:    client.Options{HostPort: "127.0.0.1:1"}, // never reached
			Credentials: creds,
		})
	}
	refused := func(what string, err error, want ...string) {
		t.Helper()
		if allot.ErrorType(err) != allot.VendorNotConfigured {
			t.Fatalf("%s: RunWorker = %v, want %s", what, err, allot.VendorNotConfigured)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: the refusal %q does not name %q", what, err, w)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "allot.db")); !os.IsNotExist(err) {
			t.Fatalf("%s: the refused worker created the ledger (%v)", what, err)
		}
	}

	t.Setenv("STUDIO_TEST_KEY", "")
	os.Unsetenv("STUDIO_TEST_KEY")
	refused("studio's variable unset", start("http://127.0.0.1:1", paidvendor.NewStaticCredentials("k")), "vendor studio", "STUDIO_TEST_KEY")
	t.Setenv("STUDIO_TEST_KEY", "sk-studio")
	refused("the default vendor without a URL", start("", nil), "default vendor", app.EnvVendorURL)
	t.Setenv(paidvendor.EnvVendorAPIKey, "")
	t.Setenv(paidvendor.EnvVendorAPIKeyFile, "")
	refused("the default vendor without its key", start("http://127.0.0.1:1", nil), "default vendor", paidvendor.EnvVendorAPIKey)
	refused("outbox's file missing", start("http://127.0.0.1:1", paidvendor.NewStaticCredentials("k")), "vendor outbox", keyFile)
	if err := os.WriteFile(keyFile, []byte("sk-outbox\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every key a step needs is there: the worker gets as far as Temporal.
	if err := start("http://127.0.0.1:1", paidvendor.NewStaticCredentials("k")); allot.ErrorType(err) != "" || err == nil || !strings.Contains(err.Error(), "connect to Temporal") {
		t.Fatalf("with every key: RunWorker = %v, want it to get as far as dialing Temporal", err)
	}
}

// A starting worker records in the ledger the limits it enforces per
// vendor (the default vendor's from its ALLOT_VENDOR_*), before it dials
// Temporal: `starter vendor list` reads them there, not its own
// environment.
func TestWorkerRecordsTheLimitsItEnforces(t *testing.T) {
	dir := t.TempDir()
	pipelines := pipelinetest.Write(t, dir, "[[pipeline]]\nname = \"weekly\"\n  [[pipeline.step]]\n  name = \"cover\"\n  kind = \"paid\"\n")
	ledgerURL := "sqlite:" + filepath.Join(dir, "allot.db")
	ctx, cancel := patience.Context(t, 30*time.Second)
	defer cancel()
	err := app.RunWorker(ctx, app.WorkerConfig{
		Config:      app.Config{Ledger: ledgerURL, DataDir: dir, Pipelines: pipelines, VendorURL: "http://127.0.0.1:1", VendorLimits: pipeline.VendorLimits{Rate: 2}},
		Temporal:    client.Options{HostPort: "127.0.0.1:1"}, // never reached
		Credentials: paidvendor.NewStaticCredentials("k"),
	})
	if err == nil || !strings.Contains(err.Error(), "connect to Temporal") {
		t.Fatalf("RunWorker = %v, want it to get as far as dialing Temporal", err)
	}
	led, err := ledger.Open(ctx, ledgerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	enforced, err := report.ReadEnforcedLimits(ctx, led)
	if err != nil {
		t.Fatal(err)
	}
	if d := enforced[pipeline.DefaultVendor]; !d.Known || d.Limits.Rate != 2 || d.Worker == "" || d.At.IsZero() {
		t.Fatalf("the default vendor's recorded limits: %+v (all: %+v)", d, enforced)
	}
}

// askless is a Go adapter that declares its vendor cannot be asked about
// a lost submit; batchless declares batches it cannot take.
type askless struct{ paidvendor.Submitter }

func (askless) Capabilities() allot.VendorCapabilities {
	return allot.VendorCapabilities{Lookup: allot.LookupNone, Cost: allot.CostFromUsage, Bill: allot.BillNone}
}

type batchless struct{ paidvendor.Submitter }

func (batchless) Capabilities() allot.VendorCapabilities {
	return allot.VendorCapabilities{Batch: true}
}

// A starting worker records what each vendor can promise, a Go adapter's
// as the adapter declares it, before it dials Temporal: `starter vendor
// show` reads them there, since only the worker links the adapter. An
// adapter declaring what it cannot keep refuses the start, naming the
// vendor, before the ledger is created.
func TestWorkerRecordsWhatItsVendorsCanPromise(t *testing.T) {
	dir := t.TempDir()
	pipelines := pipelinetest.Write(t, dir, "[[vendor]]\nname = \"llm\"\nadapter = \"go\"\n\n[[pipeline]]\nname = \"weekly\"\n  [[pipeline.step]]\n  name = \"score\"\n  kind = \"paid\"\n  vendor = \"llm\"\n")
	ledgerURL := "sqlite:" + filepath.Join(dir, "allot.db")
	ctx, cancel := patience.Context(t, 30*time.Second)
	defer cancel()
	start := func(adapter paidvendor.Submitter) error {
		return app.RunWorker(ctx, app.WorkerConfig{
			Config:   app.Config{Ledger: ledgerURL, DataDir: dir, Pipelines: pipelines},
			Temporal: client.Options{HostPort: "127.0.0.1:1"}, // never reached
			Vendors:  map[string]paidvendor.Factory{"llm": func(string) (paidvendor.Submitter, error) { return adapter, nil }},
		})
	}
	err := start(batchless{})
	if allot.ErrorType(err) != allot.VendorNotConfigured || !strings.Contains(err.Error(), "vendor llm") {
		t.Fatalf("an adapter declaring batches it cannot take: RunWorker = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "allot.db")); !os.IsNotExist(err) {
		t.Fatalf("the refused worker created the ledger (%v)", err)
	}
	if err := start(askless{}); err == nil || !strings.Contains(err.Error(), "connect to Temporal") {
		t.Fatalf("RunWorker = %v, want it to get as far as dialing Temporal", err)
	}
	led, err := ledger.Open(ctx, ledgerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	recorded, err := led.VendorCapabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := recorded["llm"]; r.Capabilities != (askless{}).Capabilities() || r.Worker == "" {
		t.Fatalf("llm's recorded capabilities: %+v (all: %+v)", r, recorded)
	}
	if _, ok := recorded[pipeline.DefaultVendor]; ok || len(recorded) != 1 {
		t.Fatalf("a worker without a default vendor recorded %+v", recorded)
	}
}
