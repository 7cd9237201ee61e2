package pipeline

import (
	"strings"
	"testing"
	"time"
)

// A vendor's bill settings: given, defaulted, kept through WithPlan-style
// copies, and refused with the setting named when wrong.
func TestVendorBillSettings(t *testing.T) {
	file := "[[vendor]]\nname = \"v\"\nurl = \"http://x\"\napi_key_env = \"K\"\nbill_grace = \"30m\"\nbill_tolerance = 5\n" +
		"[[vendor]]\nname = \"default\"\nbill_grace = \"2h\"\n" + limitsStep
	set, err := Parse([]byte(file), "test")
	if err != nil {
		t.Fatal(err)
	}
	if b := set.Bill("v"); b.Grace() != 30*time.Minute || b.BillTolerance != 5 {
		t.Fatalf("vendor v: %+v", b)
	}
	if b := set.Bill(""); b.Grace() != 2*time.Hour || b.BillTolerance != 0 {
		t.Fatalf("default vendor: %+v", b)
	}
	if b := set.Bill("unknown"); b.Grace() != DefaultBillGrace {
		t.Fatalf("a vendor with no settings has the default grace, got %v", b.Grace())
	}
	merged, err := set.WithDefaultLimits(VendorLimits{MaxInFlight: 2})
	if err != nil {
		t.Fatal(err)
	}
	if merged.Bill("default").Grace() != 2*time.Hour {
		t.Fatal("WithDefaultLimits lost the default vendor's bill settings")
	}

	vendor := func(body string) string {
		return "[[vendor]]\nname = \"v\"\nurl = \"http://x\"\napi_key_env = \"K\"\n" + body + "\n" + limitsStep
	}
	for name, c := range map[string]struct{ file, want string }{
		"bad grace":          {vendor(`bill_grace = "later"`), `bill_grace "later" is not a positive duration`},
		"negative tolerance": {vendor("bill_tolerance = -1"), "bill_tolerance = -1"},
		"huge tolerance":     {vendor("bill_tolerance = 100000000000"), "bill_tolerance = 100000000000"},
	} {
		if _, err := Parse([]byte(c.file), "test"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", name, err, c.want)
		}
	}
}
