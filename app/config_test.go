package app

import (
	"strings"
	"testing"
	"time"
)

// The default vendor's controls come from ALLOT_VENDOR_*; a value that does
// not parse stops the worker and the starter at Validate, naming the
// variable.
func TestConfigReadsDefaultVendorLimits(t *testing.T) {
	t.Setenv("ALLOT_VENDOR_SEND_TIMEOUT", "3s")
	t.Setenv("ALLOT_VENDOR_MAX_IN_FLIGHT", "2")
	cfg := ConfigFromEnv().WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	set, err := cfg.LoadPipelines()
	if err != nil {
		t.Fatal(err)
	}
	if l := set.Limits(""); l.MaxInFlight != 2 || l.SendTimeoutDuration() != 3*time.Second {
		t.Fatalf("default vendor limits %+v", l)
	}
	t.Setenv("ALLOT_VENDOR_RATE", "fast")
	if err := ConfigFromEnv().WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "ALLOT_VENDOR_RATE") {
		t.Fatalf("a bad ALLOT_VENDOR_RATE: %v", err)
	}
}
