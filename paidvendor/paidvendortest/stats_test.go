package paidvendortest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"allot"
	"allot/paidvendor"
)

// GET /v1/stats reports the most requests served at once, the requests and
// submissions, and the most submissions within one second, with the same
// bearer key; the reports themselves are not counted.
func TestStatsReportWhatTheVendorSaw(t *testing.T) {
	var clock atomic.Int64
	base := time.Date(2026, 8, 3, 9, 0, 0, 0, time.UTC)
	tv := newTestVendor(t, SimConfig{Clock: func() time.Time { return base.Add(time.Duration(clock.Load())) }})
	ctx := context.Background()
	// Three submissions in one second, two more 1.5 s later.
	for i := range 5 {
		if i == 3 {
			clock.Store(int64(1500 * time.Millisecond))
		}
		if _, err := tv.client.Submit(ctx, submitReq(allot.IdempotencyKey("p", fmt.Sprintf("2026-W32-%d", i), "render", 0))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tv.client.LookupByIdempotencyKey(ctx, allot.IdempotencyKey("p", "2026-W32-0", "render", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := tv.client.Charges(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := tv.client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Requests != 6 || st.Submissions != 5 || st.MaxSubmissionsPerSecond != 3 || st.MaxInFlight != 1 || st.InFlight != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Requests that overlap at the vendor: three held by the latency at
	// once.
	if err := tv.sim.SetFaults(SimFaults{Latency: time.Hour}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = tv.client.Task(rctx, "vt_00000000000000000000000000000000")
		}()
	}
	for deadline := time.Now().Add(30 * time.Second); tv.sim.Stats().InFlight < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("three requests never in flight at once: %+v", tv.sim.Stats())
		}
	}
	cancel()
	wg.Wait()
	if st := tv.sim.Stats(); st.MaxInFlight != 3 || st.Requests != 9 {
		t.Fatalf("after three at once: %+v", st)
	}
	if err := tv.sim.SetFaults(SimFaults{}); err != nil {
		t.Fatal(err)
	}
	// The stats need the key.
	if _, err := tv.newClient(t, "wrong-key").Stats(ctx); !errors.Is(err, paidvendor.ErrUnauthorized) {
		t.Fatalf("stats with the wrong key: %v", err)
	}
}
