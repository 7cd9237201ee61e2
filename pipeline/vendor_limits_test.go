package pipeline

import (
	"os"
	"strings"
	"testing"
	"time"
)

const limitsStep = "[[pipeline]]\nname = \"p\"\n  [[pipeline.step]]\n  name = \"s\"\n  kind = \"paid\"\n"

// The issue's [[vendor]] entry parses to exactly its settings, and a
// [[vendor]] named "default" carries the default vendor's.
func TestVendorLimitsParse(t *testing.T) {
	set, err := Parse([]byte(`
[[vendor]]
name                = "videogen"
adapter             = "http"
url                 = "https://api.videogen.example"
api_key_env         = "VIDEOGEN_API_KEY"
max_in_flight       = 4
rate                = 2.0
burst               = 4
trip_after          = 5
cool_down           = "30s"
idempotency_horizon = "24h"
send_timeout        = "30s"

[[vendor]]
name          = "default"
max_in_flight = 1
send_timeout  = "3s"
`+limitsStep), "test")
	if err != nil {
		t.Fatal(err)
	}
	l := set.Limits("videogen")
	want := VendorLimits{MaxInFlight: 4, Rate: 2, Burst: 4, TripAfter: 5, CoolDown: "30s", IdempotencyHorizon: "24h", SendTimeout: "30s"}
	if l != want || l.Horizon() != 24*time.Hour || l.CoolDownDuration() != 30*time.Second || l.SendTimeoutDuration() != 30*time.Second || !l.Gated() {
		t.Fatalf("videogen limits %+v", l)
	}
	d := set.Limits(DefaultVendor)
	if d.MaxInFlight != 1 || d.SendTimeoutDuration() != 3*time.Second || set.Limits("") != d {
		t.Fatalf("default limits %+v", d)
	}
	// The default vendor's settings do not make it a named vendor: steps
	// without a vendor still use the worker's ALLOT_VENDOR_URL.
	if _, ok := set.Vendor(DefaultVendor); ok || strings.Join(set.VendorNames(), ",") != "videogen" {
		t.Fatalf("vendors %v", set.VendorNames())
	}
	if got := strings.Join(set.ControlledVendors(), ","); got != "default,videogen" {
		t.Fatalf("controlled vendors %s", got)
	}
	// Unset controls are no limits, with the documented defaults.
	none := set.Limits("nope")
	if none.Gated() || none.SendTimeoutDuration() != DefaultSendTimeout || none.Horizon() != 0 || none.CoolDownDuration() != DefaultCoolDown {
		t.Fatalf("no limits %+v", none)
	}
	if (VendorLimits{Rate: 2.5}).BurstSize() != 3 || (VendorLimits{Rate: 0.2}).BurstSize() != 1 {
		t.Fatal("a burst not given is the rate rounded up, at least 1")
	}
}

func TestVendorLimitMistakesAreNamed(t *testing.T) {
	vendor := func(body string) string {
		return "[[vendor]]\nname = \"v\"\nurl = \"http://x\"\napi_key_env = \"K\"\n" + body + "\n" + limitsStep
	}
	for name, c := range map[string]struct{ file, want string }{
		"negative max_in_flight":    {vendor("max_in_flight = -1"), "max_in_flight = -1"},
		"negative rate":             {vendor("rate = -2.0"), "rate = -2"},
		"infinite rate":             {vendor("rate = inf"), "rate = +Inf"},
		"tiny rate":                 {vendor("rate = 0.0000001"), "below one submission"},
		"burst without rate":        {vendor("burst = 3"), "burst = 3 needs a rate"},
		"cool_down without breaker": {vendor(`cool_down = "10s"`), "needs a breaker"},
		"bad cool_down":             {vendor("trip_after = 3\ncool_down = \"soon\""), `cool_down "soon" is not a positive duration`},
		"bad horizon":               {vendor(`idempotency_horizon = "-1h"`), "idempotency_horizon"},
		"send_timeout too long":     {vendor(`send_timeout = "10m"`), "send_timeout = \"10m\""},
		"send_timeout too short":    {vendor(`send_timeout = "100ms"`), "give 1s to 4m0s"},
		"horizon below send":        {vendor("idempotency_horizon = \"10s\""), "shorter than the send timeout"},
		"default with url":          {"[[vendor]]\nname = \"default\"\nurl = \"http://x\"\n" + limitsStep, "carries settings only"},
		"default with adapter go":   {"[[vendor]]\nname = \"default\"\nadapter = \"go\"\n" + limitsStep, "reserved"},
		"default twice":             {"[[vendor]]\nname = \"default\"\n[[vendor]]\nname = \"default\"\n" + limitsStep, `vendor "default" is defined twice`},
		"limit misspelt":            {vendor("max_inflight = 3"), "unknown key vendor.max_inflight (line 5): [[vendor]] has no setting max_inflight: did you mean max_in_flight?"},
	} {
		if _, err := Parse([]byte(c.file), "test"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", name, err, c.want)
		}
	}
}

// ALLOT_VENDOR_* give the default vendor's controls; a setting also in the
// file's [[vendor]] named "default" is refused, and a bad value names its
// variable.
func TestDefaultVendorLimitsFromEnv(t *testing.T) {
	env := map[string]string{"ALLOT_VENDOR_MAX_IN_FLIGHT": "2", "ALLOT_VENDOR_RATE": "1.5", "ALLOT_VENDOR_SEND_TIMEOUT": "3s", "ALLOT_VENDOR_IDEMPOTENCY_HORIZON": "30m"}
	l, err := LimitsFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	set, err := Parse([]byte("[[vendor]]\nname = \"default\"\ntrip_after = 3\n"+limitsStep), "test")
	if err != nil {
		t.Fatal(err)
	}
	merged, err := set.WithDefaultLimits(l)
	if err != nil {
		t.Fatal(err)
	}
	got := merged.Limits("")
	if got.MaxInFlight != 2 || got.Rate != 1.5 || got.BurstSize() != 2 || got.TripAfter != 3 || got.SendTimeoutDuration() != 3*time.Second || got.Horizon() != 30*time.Minute {
		t.Fatalf("merged %+v", got)
	}
	if set.Limits("").MaxInFlight != 0 {
		t.Fatal("WithDefaultLimits changed the set it was called on")
	}
	if _, err := set.WithDefaultLimits(VendorLimits{TripAfter: 4}); err == nil || !strings.Contains(err.Error(), "trip_after is set both") {
		t.Fatalf("the same setting in both places: %v", err)
	}
	for k, v := range map[string]string{"ALLOT_VENDOR_MAX_IN_FLIGHT": "many", "ALLOT_VENDOR_RATE": "fast", "ALLOT_VENDOR_SEND_TIMEOUT": "3", "ALLOT_VENDOR_BURST": "2"} {
		_, err := LimitsFromEnv(func(n string) string {
			if n == k {
				return v
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), "ALLOT_VENDOR") {
			t.Errorf("%s=%s: error %v, want one naming the variable", k, v, err)
		}
	}
}

// The Vendors section of docs/steps-and-vendors.md shows a [[vendor]] with every control: it
// parses, with the values it says.
func TestDocsVendorExampleParses(t *testing.T) {
	data, err := os.ReadFile("../docs/steps-and-vendors.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Vendors\n")
	_, block, ok2 := strings.Cut(section, "```toml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/steps-and-vendors.md has no ## Vendors section with a toml block")
	}
	set, err := Parse([]byte(block+limitsStep), "docs/steps-and-vendors.md")
	if err != nil {
		t.Fatal(err)
	}
	want := VendorLimits{MaxInFlight: 4, Rate: 2, Burst: 4, TripAfter: 5, CoolDown: "30s", IdempotencyHorizon: "24h", SendTimeout: "30s"}
	if got := set.Limits("videogen"); got != want {
		t.Fatalf("the docs' videogen: %+v", got)
	}
}
