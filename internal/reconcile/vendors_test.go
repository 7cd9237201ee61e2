package reconcile_test

import (
	"context"
	"errors"
	"testing"

	"allot/internal/reconcile"
	"allot/paidvendor"
	"allot/pipeline"
)

const vendorsFile = `
[[vendor]]
name        = "studio"
url         = "http://studio.invalid"
api_key_env = "STUDIO_KEY"
bill_grace  = "10m"

[[vendor]]
name        = "studio-again"
url         = "http://studio.invalid/"
api_key_env = "STUDIO_KEY"

[[vendor]]
name        = "outbox"
adapter     = "go"

[[vendor]]
name        = "plain"
adapter     = "go"

[[vendor]]
name       = "renderer"
adapter    = "activity"
task_queue = "renderer"
  [vendor.activities]
  submit = "Submit"
  status = "Status"
  fetch  = "Fetch"

[[vendor]]
name        = "unused"
url         = "http://unused.invalid"
api_key_env = "UNUSED_KEY"

[[pipeline]]
name = "p"
  [[pipeline.step]]
  name = "a"
  kind = "paid"
  [[pipeline.step]]
  name   = "b"
  kind   = "paid"
  vendor = "studio"
  [[pipeline.step]]
  name   = "c"
  kind   = "paid"
  vendor = "studio-again"
  [[pipeline.step]]
  name   = "d"
  kind   = "paid"
  vendor = "outbox"
  [[pipeline.step]]
  name   = "e"
  kind   = "paid"
  vendor = "plain"
  [[pipeline.step]]
  name   = "f"
  kind   = "paid"
  vendor = "renderer"
  [[pipeline.step]]
  name   = "g"
  kind   = "effect"
  vendor = "unused"
`

// billingAdapter is a Go adapter that can read its bill; plainAdapter
// cannot.
type billingAdapter struct{ paidvendor.Submitter }

func (billingAdapter) ReadBill(context.Context, paidvendor.ReadBillInput) (paidvendor.BillPage, error) {
	return paidvendor.BillPage{}, nil
}

type plainAdapter struct{ paidvendor.Submitter }

// Which vendors are reconciled, and why the others are not: one account
// per URL and key (read once), a Go adapter that implements BillReader, an
// activity adapter and a default vendor without URL reported as not
// reconciled with the reason, a vendor only effect steps use left out.
func TestVendorsSaysWhichBillsCanBeRead(t *testing.T) {
	t.Setenv("STUDIO_KEY", "sk-studio")
	set, err := pipeline.Parse([]byte(vendorsFile), "test")
	if err != nil {
		t.Fatal(err)
	}
	vs := reconcile.Vendors(context.Background(), reconcile.VendorsInput{Pipelines: set, Adapters: map[string]paidvendor.Factory{
		"outbox": func(string) (paidvendor.Submitter, error) { return billingAdapter{}, nil },
		"plain":  func(string) (paidvendor.Submitter, error) { return plainAdapter{}, nil },
	}})
	byName := map[string]reconcile.Vendor{}
	for _, v := range vs {
		byName[v.Name] = v
	}
	if len(vs) != 5 {
		t.Fatalf("%d vendors, want default, studio (with studio-again), outbox, plain and renderer: %+v", len(vs), vs)
	}
	if v := byName["default"]; v.Bill != nil || v.NotReconciled == "" {
		t.Errorf("the default vendor without a URL: %+v", v)
	}
	if v := byName["studio"]; v.Bill == nil || len(v.Names) != 2 || v.Names[1] != "studio-again" || v.Settings.BillGrace != "10m" || v.Account != reconcile.Account("studio") {
		t.Errorf("studio and studio-again share one account: %+v", v)
	}
	if v := byName["outbox"]; v.Bill == nil {
		t.Errorf("a Go adapter that reads its bill: %+v", v)
	}
	if v := byName["plain"]; v.Bill != nil || v.NotReconciled != "its Go adapter does not implement paidvendor.BillReader" {
		t.Errorf("a Go adapter that cannot: %+v", v)
	}
	if v := byName["renderer"]; v.Bill != nil || v.NotReconciled == "" {
		t.Errorf("an activity adapter: %+v", v)
	}
	if _, ok := byName["unused"]; ok {
		t.Error("a vendor only effect steps use has no bill to reconcile")
	}

	// A key that cannot be read: not reconciled, saying so.
	t.Setenv("STUDIO_KEY", "")
	failing := reconcile.Vendors(context.Background(), reconcile.VendorsInput{Pipelines: set, DefaultURL: "http://vendor.invalid",
		DefaultKey: keyErr{}, Adapters: map[string]paidvendor.Factory{"outbox": nil}})
	for _, v := range failing {
		if v.Bill != nil && v.Name != "renderer" {
			t.Errorf("%s is read without its key: %+v", v.Name, v)
		}
		if v.Bill == nil && v.NotReconciled == "" {
			t.Errorf("%s is not reconciled and says not why", v.Name)
		}
	}
}

type keyErr struct{}

func (keyErr) VendorAPIKey(context.Context) (string, error) { return "", errors.New("no key file") }
