package metrics

import (
	"context"
	"strings"
	"testing"
)

// Each vendor's state is a gauge per state (1 for the one it is in), with
// its requests in flight and its breaker's count.
func TestVendorStateGauges(t *testing.T) {
	m := New(Gauges{Vendors: func(context.Context) ([]VendorGauge, error) {
		return []VendorGauge{{Vendor: "default", State: "active"}, {Vendor: "video-gen", State: "paused", InFlight: 2}, {Vendor: "covers", State: "tripped", Failures: 5}}, nil
	}}, nil)
	defer m.Close()
	body := scrape(t, m)
	for _, want := range []string{
		`allot_vendor_state{state="active",vendor="default"} 1`,
		`allot_vendor_state{state="paused",vendor="default"} 0`,
		`allot_vendor_state{state="paused",vendor="video-gen"} 1`,
		`allot_vendor_state{state="active",vendor="video-gen"} 0`,
		`allot_vendor_state{state="tripped",vendor="covers"} 1`,
		`allot_vendor_in_flight{vendor="video-gen"} 2`,
		`allot_vendor_consecutive_failures{vendor="covers"} 5`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, grep(body, "allot_vendor"))
		}
	}
}
