package devstack_test

import (
	"testing"
	"time"

	"allot/internal/allottest"
)

func TestDevSetupRunsDemoAndResumesAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded server twice")
	}
	dir := t.TempDir()
	dev := allottest.StartDev(t, dir)
	if dev.Info.WebUI == "" || dev.Info.VendorURL == "" {
		t.Fatalf("dev info %+v", dev.Info)
	}
	first := allottest.RunDemoEpisode(t, dev.Info, time.Date(2026, 8, 3, 2, 0, 0, 0, time.UTC))
	dev.Stop()
	if n := len(allottest.DevVendorCharges(t, dir)); n != 2 {
		t.Fatalf("after the first episode the vendor has %d charges, want 2", n)
	}

	dev = allottest.StartDev(t, dir)
	// The same run again reports the existing episode; a new one continues the sequence.
	second := allottest.RunDemoEpisode(t, dev.Info, time.Date(2026, 8, 4, 2, 0, 0, 0, time.UTC))
	if first != "2026-W32-0" || second != "2026-W32-1" {
		t.Fatalf("episodes %s, %s; want 2026-W32-0 then 2026-W32-1", first, second)
	}
	dev.Stop()
	if n := len(allottest.DevVendorCharges(t, dir)); n != 4 {
		t.Fatalf("after the restart and a second episode the vendor has %d charges, want 4 (nothing re-paid)", n)
	}
}
