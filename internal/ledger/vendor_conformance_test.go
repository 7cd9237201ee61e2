package ledger

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"allot"
)

// Vendor controls (vendor_state.go) in the conformance suite: pause and
// resume, slots with leases, the token bucket and the breaker, each also
// under concurrent callers on one ledger.

func vendorReq(holder string, kind VendorKind, lim VendorLimits, at time.Time) VendorRequest {
	return VendorRequest{Vendor: "videogen", Holder: holder, Kind: kind, Limits: lim, Lease: 10 * time.Second, At: at}
}

func mustAcquire(t *testing.T, l *Ledger, req VendorRequest) VendorGrant {
	t.Helper()
	g, err := l.AcquireVendor(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func testVendorPauseResume(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	for _, lim := range []VendorLimits{{}, {MaxInFlight: 2, TripAfter: 3, CoolDown: time.Minute}} {
		if g := mustAcquire(t, l, vendorReq("a", VendorSend, lim, t0)); !g.Granted {
			t.Fatalf("an active vendor refused a send: %+v", g)
		}
		if g := mustAcquire(t, l, vendorReq("a", VendorSend, lim, t0)); !g.Granted {
			t.Fatalf("a holder asking again was refused: %+v", g)
		}
		if _, err := l.ReleaseVendor(ctx, VendorRelease{Vendor: "videogen", Holder: "a", Outcome: VendorAnswered, Limits: lim, At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.PauseVendor(ctx, VendorPause{Vendor: "videogen", By: "alice"}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("a pause without a reason: %v", err)
	}
	s, err := l.PauseVendor(ctx, VendorPause{Vendor: "videogen", Reason: "bills twice", By: "alice", At: t0})
	if err != nil || !s.Paused || s.PausePolls || s.Status() != "paused" || s.Reason() != "bills twice" || !s.PausedAt.Equal(t0) {
		t.Fatalf("paused: %+v, %v", s, err)
	}
	for _, lim := range []VendorLimits{{}, {MaxInFlight: 2, Rate: 1, TripAfter: 3, CoolDown: time.Minute}} {
		g := mustAcquire(t, l, vendorReq("b", VendorSend, lim, t0.Add(time.Second)))
		if g.Granted || g.Wait != WaitPaused || g.RetryAt.IsZero() || g.Held {
			t.Fatalf("a send to a paused vendor: %+v", g)
		}
		if g := mustAcquire(t, l, vendorReq("b", VendorPoll, lim, t0.Add(time.Second))); !g.Granted {
			t.Fatalf("a pause of sends stopped a poll: %+v", g)
		}
		_, _ = l.ReleaseVendor(ctx, VendorRelease{Vendor: "videogen", Holder: "b", Outcome: VendorNoVerdict, Limits: lim})
	}
	// Pausing again widens the scope and keeps the first pause: its
	// reason, who and since when.
	s, err = l.PauseVendor(ctx, VendorPause{Vendor: "videogen", Reason: "garbage results", By: "bob", Polls: true, At: t0.Add(time.Hour)})
	if err != nil || !s.PausePolls || s.PauseReason != "bills twice" || s.PausedBy != "alice" || !s.PausedAt.Equal(t0) {
		t.Fatalf("paused again: %+v, %v", s, err)
	}
	if g := mustAcquire(t, l, vendorReq("c", VendorPoll, VendorLimits{}, t0.Add(time.Hour))); g.Granted || g.Wait != WaitPaused {
		t.Fatalf("a pause of polls let a poll go: %+v", g)
	}
	// Other vendors are not paused.
	if g := mustAcquire(t, l, VendorRequest{Vendor: "covers", Kind: VendorSend}); !g.Granted {
		t.Fatalf("another vendor: %+v", g)
	}
	s, err = l.ResumeVendor(ctx, "videogen", t0.Add(2*time.Hour))
	if err != nil || s.Paused || s.Status() != "active" || s.Reason() != "" {
		t.Fatalf("resumed: %+v, %v", s, err)
	}
	if g := mustAcquire(t, l, vendorReq("d", VendorSend, VendorLimits{}, t0.Add(2*time.Hour))); !g.Granted {
		t.Fatalf("after resume: %+v", g)
	}
	// Resuming an active vendor changes nothing.
	again, err := l.ResumeVendor(ctx, "videogen", t0.Add(3*time.Hour))
	if err != nil || again != s {
		t.Fatalf("resumed twice: %+v, %v", again, err)
	}
	ss, err := l.VendorStates(ctx, t0)
	if err != nil || len(ss) != 1 || ss[0].Vendor != "videogen" {
		t.Fatalf("states %+v, %v", ss, err)
	}
	for _, bad := range []VendorRequest{{Kind: VendorSend}, {Vendor: "v", Kind: "call"}, {Vendor: "v", Kind: VendorSend, Limits: VendorLimits{MaxInFlight: 1}}} {
		if _, err := l.AcquireVendor(ctx, bad); !errors.Is(err, ErrInvalidInput) {
			t.Fatalf("request %+v: %v", bad, err)
		}
	}
}

func testVendorSlots(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	lim := VendorLimits{MaxInFlight: 2}
	for _, h := range []string{"a", "b"} {
		if g := mustAcquire(t, l, vendorReq(h, VendorSend, lim, t0)); !g.Granted || !g.Held {
			t.Fatalf("slot for %s: %+v", h, g)
		}
	}
	g := mustAcquire(t, l, vendorReq("c", VendorPoll, lim, t0.Add(time.Second)))
	if g.Granted || g.Wait != WaitBusy || !g.RetryAt.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("a third request with max_in_flight 2: %+v", g)
	}
	s, err := l.VendorStateOf(ctx, "videogen", t0.Add(time.Second))
	if err != nil || s.InFlightSend != 2 || s.InFlightPoll != 0 {
		t.Fatalf("in flight: %+v, %v", s, err)
	}
	// A release frees its slot at once.
	if _, err := l.ReleaseVendor(ctx, VendorRelease{Vendor: "videogen", Holder: "a", Outcome: VendorAnswered, Limits: lim}); err != nil {
		t.Fatal(err)
	}
	if g := mustAcquire(t, l, vendorReq("c", VendorPoll, lim, t0.Add(2*time.Second))); !g.Granted {
		t.Fatalf("after a release: %+v", g)
	}
	// A holder that never releases (killed) gives its slot back when its
	// lease expires, unless it renewed it.
	if err := l.RenewVendorLease(ctx, "videogen", "c", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if g := mustAcquire(t, l, vendorReq("d", VendorSend, lim, t0.Add(9*time.Second))); g.Granted {
		t.Fatalf("before b's lease expired: %+v", g)
	}
	if g := mustAcquire(t, l, vendorReq("d", VendorSend, lim, t0.Add(10*time.Second))); !g.Granted {
		t.Fatalf("b's lease expired at t0+10s, its slot must come back: %+v", g)
	}
	if g := mustAcquire(t, l, vendorReq("e", VendorSend, lim, t0.Add(15*time.Second))); g.Granted {
		t.Fatalf("c renewed its lease to t0+1m and d holds its slot until t0+20s: %+v", g)
	}
	if g := mustAcquire(t, l, vendorReq("e", VendorSend, lim, t0.Add(30*time.Second))); !g.Granted {
		t.Fatalf("d's lease expired at t0+20s: %+v", g)
	}
}

// Many callers at once never hold more than max_in_flight slots.
func testVendorSlotsConcurrent(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	lim := VendorLimits{MaxInFlight: 2}
	var held, most, granted atomic.Int32
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			holder := fmt.Sprintf("w%d", i)
			for range 3 {
				g, err := l.AcquireVendor(ctx, VendorRequest{Vendor: "videogen", Holder: holder, Kind: VendorSend, Limits: lim, Lease: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				if !g.Granted {
					time.Sleep(time.Millisecond)
					continue
				}
				granted.Add(1)
				n := held.Add(1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				held.Add(-1)
				if _, err := l.ReleaseVendor(ctx, VendorRelease{Vendor: "videogen", Holder: holder, Outcome: VendorAnswered, Limits: lim}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if most.Load() > 2 || granted.Load() == 0 {
		t.Fatalf("at most %d slots held at once (max_in_flight 2), %d granted", most.Load(), granted.Load())
	}
}

func testVendorRate(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	lim := VendorLimits{Rate: 2, Burst: 3}
	for i := range 3 {
		if g := mustAcquire(t, l, vendorReq(fmt.Sprint(i), VendorSend, lim, t0)); !g.Granted {
			t.Fatalf("send %d within the burst: %+v", i, g)
		}
	}
	g := mustAcquire(t, l, vendorReq("x", VendorSend, lim, t0))
	if g.Granted || g.Wait != WaitRate || !g.RetryAt.Equal(t0.Add(500*time.Millisecond)) {
		t.Fatalf("the burst is spent: %+v", g)
	}
	// Polls take no token.
	if g := mustAcquire(t, l, vendorReq("p", VendorPoll, lim, t0)); !g.Granted {
		t.Fatalf("a poll: %+v", g)
	}
	s, err := l.VendorStateOf(ctx, "videogen", t0)
	if err != nil || s.Tokens(lim, t0) != 0 || s.Tokens(lim, t0.Add(time.Second)) != 2 || s.Tokens(lim, t0.Add(time.Hour)) != 3 {
		t.Fatalf("tokens %+v, %v", s, err)
	}
	// Refilled at 2 per second: one every 500 ms.
	if g := mustAcquire(t, l, vendorReq("x", VendorSend, lim, t0.Add(500*time.Millisecond))); !g.Granted {
		t.Fatalf("after 500ms: %+v", g)
	}
	if g := mustAcquire(t, l, vendorReq("y", VendorSend, lim, t0.Add(600*time.Millisecond))); g.Granted {
		t.Fatalf("at 600ms, the refilled token was taken: %+v", g)
	}
	// Concurrent senders over a quiet spell get the burst and no more.
	var granted atomic.Int32
	var wg sync.WaitGroup
	at := t0.Add(time.Hour)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := l.AcquireVendor(ctx, vendorReq(fmt.Sprintf("c%d", i), VendorSend, lim, at))
			if err != nil {
				t.Error(err)
			} else if g.Granted {
				granted.Add(1)
			}
		}()
	}
	wg.Wait()
	if granted.Load() != 3 {
		t.Fatalf("%d concurrent sends granted at once, want the burst, 3", granted.Load())
	}
}

func testVendorBreaker(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	lim := VendorLimits{TripAfter: 3, CoolDown: 30 * time.Second}
	fail := func(holder string, at time.Time, outcome VendorOutcome) VendorState {
		t.Helper()
		g := mustAcquire(t, l, vendorReq(holder, VendorSend, lim, at))
		if !g.Granted || !g.Held {
			t.Fatalf("%s at %s: %+v", holder, at, g)
		}
		s, err := l.ReleaseVendor(ctx, VendorRelease{Vendor: "videogen", Holder: holder, Outcome: outcome, Error: "503 from " + holder, Limits: lim, At: at})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	fail("a", t0, VendorFailed)
	fail("b", t0, VendorFailed)
	// An answer resets the count; 429s count for nothing.
	if s := fail("c", t0, VendorAnswered); s.Failures != 0 {
		t.Fatalf("an answer did not reset the failures: %+v", s)
	}
	fail("d", t0, VendorNoVerdict)
	fail("e", t0, VendorFailed)
	fail("f", t0, VendorFailed)
	// A request already in flight when it trips.
	if g := mustAcquire(t, l, vendorReq("late", VendorPoll, lim, t0)); !g.Granted {
		t.Fatal(g)
	}
	s := fail("g", t0.Add(time.Second), VendorFailed)
	if !s.Tripped() || s.Status() != "tripped" || s.Reason() != "tripped: 503 from g" || s.Failures != 3 || !s.TrippedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("after 3 failures: %+v", s)
	}
	// Open: every request waits until the cool-down ends, polls too.
	for _, kind := range []VendorKind{VendorSend, VendorPoll} {
		g := mustAcquire(t, l, vendorReq("h", kind, lim, t0.Add(10*time.Second)))
		if g.Granted || g.Wait != WaitTripped || !g.RetryAt.Equal(t0.Add(31*time.Second)) {
			t.Fatalf("%s while open: %+v", kind, g)
		}
	}
	// The straggler's answer does not close it: only the probe decides.
	if s, _ := l.ReleaseVendor(ctx, VendorRelease{Vendor: "videogen", Holder: "late", Outcome: VendorAnswered, Limits: lim, At: t0.Add(11 * time.Second)}); !s.Tripped() {
		t.Fatalf("a request from before the trip closed the breaker: %+v", s)
	}
	// After the cool-down exactly one probe goes, among concurrent callers.
	probeAt := t0.Add(31 * time.Second)
	var probes atomic.Int32
	var probe atomic.Value
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			holder := fmt.Sprintf("p%d", i)
			g, err := l.AcquireVendor(ctx, vendorReq(holder, VendorSend, lim, probeAt))
			if err != nil {
				t.Error(err)
				return
			}
			if g.Granted {
				probes.Add(1)
				probe.Store(holder)
				if !g.Probe {
					t.Errorf("a request granted while half-open is not the probe: %+v", g)
				}
			} else if g.Wait != WaitTripped {
				t.Errorf("waiting for the probe: %+v", g)
			}
		}()
	}
	wg.Wait()
	if probes.Load() != 1 {
		t.Fatalf("%d probes went, want exactly 1", probes.Load())
	}
	// The probe fails: open again for another cool-down.
	holder := probe.Load().(string)
	s, err := l.ReleaseVendor(ctx, VendorRelease{Vendor: "videogen", Holder: holder, Outcome: VendorFailed, Error: "still down", Limits: lim, At: probeAt.Add(time.Second)})
	if err != nil || !s.Tripped() || !s.TrippedAt.Equal(probeAt.Add(time.Second)) || s.Reason() != "tripped: still down" || s.ProbeHolder != "" {
		t.Fatalf("after a failed probe: %+v, %v", s, err)
	}
	if g := mustAcquire(t, l, vendorReq("q", VendorSend, lim, probeAt.Add(20*time.Second))); g.Granted {
		t.Fatalf("reopened, it must wait another cool-down: %+v", g)
	}
	// A probe whose holder dies: after its lease another may probe.
	next := probeAt.Add(32 * time.Second)
	if g := mustAcquire(t, l, vendorReq("dies", VendorSend, lim, next)); !g.Probe {
		t.Fatalf("second probe: %+v", g)
	}
	if g := mustAcquire(t, l, vendorReq("r", VendorSend, lim, next.Add(5*time.Second))); g.Granted {
		t.Fatalf("while a probe's lease holds: %+v", g)
	}
	if g := mustAcquire(t, l, vendorReq("r", VendorSend, lim, next.Add(10*time.Second))); !g.Probe {
		t.Fatalf("after the dead probe's lease: %+v", g)
	}
	// The probe's answer closes it.
	s, err = l.ReleaseVendor(ctx, VendorRelease{Vendor: "videogen", Holder: "r", Outcome: VendorAnswered, Limits: lim, At: next.Add(11 * time.Second)})
	if err != nil || s.Tripped() || s.Failures != 0 || s.Status() != "active" {
		t.Fatalf("after a good probe: %+v, %v", s, err)
	}
	if g := mustAcquire(t, l, vendorReq("s", VendorSend, lim, next.Add(12*time.Second))); !g.Granted || g.Probe {
		t.Fatalf("closed: %+v", g)
	}
	// An operator's resume closes a tripped breaker at once.
	for i := range 3 {
		fail(fmt.Sprintf("t%d", i), next.Add(time.Minute), VendorFailed)
	}
	if s, err := l.ResumeVendor(ctx, "videogen", next.Add(time.Minute)); err != nil || s.Tripped() || s.Failures != 0 {
		t.Fatalf("resume of a tripped vendor: %+v, %v", s, err)
	}
	if g := mustAcquire(t, l, vendorReq("u", VendorSend, lim, next.Add(time.Minute))); !g.Granted || g.Probe {
		t.Fatalf("after resume: %+v", g)
	}
}

// testVendorPauseHistory: a second pause keeps the first one's reason,
// who and since, and every request (pause, pause, resume) is in the
// history in order; a pause without polls does not narrow one with polls.
func testVendorPauseHistory(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	if _, err := l.PauseVendor(ctx, VendorPause{Vendor: "videogen", Reason: "bills twice since 09:10", By: "alice", Polls: true, At: t0}); err != nil {
		t.Fatal(err)
	}
	s, err := l.PauseVendor(ctx, VendorPause{Vendor: "videogen", Reason: "still broken", By: "bob", At: t0.Add(time.Minute)})
	if err != nil || s.PauseReason != "bills twice since 09:10" || s.PausedBy != "alice" || !s.PausedAt.Equal(t0) || !s.PausePolls {
		t.Fatalf("a second pause replaced the first: %+v, %v", s, err)
	}
	if _, err := l.PauseVendor(ctx, VendorPause{Vendor: "covers", Reason: "other", By: "carol", At: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ResumeVendorBy(ctx, "videogen", "dave", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Resuming an active vendor adds nothing.
	if _, err := l.ResumeVendorBy(ctx, "videogen", "dave", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	h, err := l.VendorPauseHistory(ctx, "videogen")
	if err != nil {
		t.Fatal(err)
	}
	want := []VendorPauseEvent{
		{Vendor: "videogen", Action: "pause", Reason: "bills twice since 09:10", By: "alice", Polls: true, At: t0},
		{Vendor: "videogen", Action: "pause", Reason: "still broken", By: "bob", At: t0.Add(time.Minute)},
		{Vendor: "videogen", Action: "resume", By: "dave", At: t0.Add(time.Hour)},
	}
	if len(h) != len(want) {
		t.Fatalf("history: %+v, want %+v", h, want)
	}
	for i := range want {
		if h[i].Vendor != want[i].Vendor || h[i].Action != want[i].Action || h[i].Reason != want[i].Reason || h[i].By != want[i].By ||
			h[i].Polls != want[i].Polls || !h[i].At.Equal(want[i].At) {
			t.Fatalf("history[%d]: %+v, want %+v", i, h[i], want[i])
		}
	}
	all, err := l.VendorPauseHistory(ctx, "")
	if err != nil || len(all) != 4 {
		t.Fatalf("every vendor's history: %+v, %v", all, err)
	}
}

// testVendorEnforcedLimits: the limits a worker records are read back per
// vendor, and a later worker's record replaces an earlier one's.
func testVendorEnforcedLimits(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	if got, err := l.EnforcedVendorLimits(ctx); err != nil || len(got) != 0 {
		t.Fatalf("before any worker: %+v, %v", got, err)
	}
	if err := l.RecordEnforcedLimits(ctx, "", map[string]string{"videogen": "{}"}, t0); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("a record without the worker: %v", err)
	}
	if err := l.RecordEnforcedLimits(ctx, "w1", map[string]string{"videogen": `{"trip_after":3}`, "default": "{}"}, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordEnforcedLimits(ctx, "w2", map[string]string{"videogen": "{}"}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err := l.EnforcedVendorLimits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, d := got["videogen"], got["default"]
	if len(got) != 2 || v.Limits != "{}" || v.Worker != "w2" || !v.RecordedAt.Equal(t0.Add(time.Minute)) || d.Worker != "w1" || d.Limits != "{}" {
		t.Fatalf("enforced limits: %+v", got)
	}
}

// testVendorResumeRace: operators resuming a paused vendor at once. One
// resume is recorded and the others are refused with ErrVendorNotStopped,
// writing nothing; a tripped vendor is resumed the same way, and an
// active one is refused.
func testVendorResumeRace(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	if _, err := l.ResumeStoppedVendor(ctx, "videogen", "erin", "", t0); !errors.Is(err, ErrVendorNotStopped) {
		t.Fatalf("resuming an active vendor: %v, want ErrVendorNotStopped", err)
	}
	if _, err := l.PauseVendor(ctx, VendorPause{Vendor: "videogen", Reason: "bills twice", By: "alice", At: t0}); err != nil {
		t.Fatal(err)
	}
	const operators = 4
	var wg sync.WaitGroup
	errs := make([]error, operators)
	for i := range operators {
		wg.Go(func() {
			_, errs[i] = l.ResumeStoppedVendor(ctx, "videogen", fmt.Sprintf("op-%d", i), "fixed", t0.Add(time.Minute))
		})
	}
	wg.Wait()
	resumed := 0
	for i, err := range errs {
		switch {
		case err == nil:
			resumed++
		case !errors.Is(err, ErrVendorNotStopped):
			t.Fatalf("operator %d: %v", i, err)
		}
	}
	h, err := l.VendorPauseHistory(ctx, "videogen")
	if err != nil {
		t.Fatal(err)
	}
	resumes := 0
	for _, e := range h {
		if e.Action == "resume" {
			resumes++
		}
	}
	if resumed != 1 || resumes != 1 {
		t.Fatalf("%d of %d operators were told they resumed the vendor and the history has %d resumes; want 1 and 1 (%v)", resumed, operators, resumes, errs)
	}
	// A tripped breaker is stopped too: it is resumed, once.
	lim := VendorLimits{TripAfter: 1, CoolDown: time.Hour}
	mustAcquire(t, l, vendorReq("a", VendorSend, lim, t0.Add(2*time.Minute)))
	if s, err := l.ReleaseVendor(ctx, VendorRelease{Vendor: "videogen", Holder: "a", Outcome: VendorFailed, Error: "503", Limits: lim, At: t0.Add(2 * time.Minute)}); err != nil || !s.Tripped() {
		t.Fatalf("the breaker did not trip: %+v, %v", s, err)
	}
	if s, err := l.ResumeStoppedVendor(ctx, "videogen", "erin", "", t0.Add(3*time.Minute)); err != nil || s.Tripped() {
		t.Fatalf("resuming a tripped vendor: %+v, %v", s, err)
	}
	if _, err := l.ResumeStoppedVendor(ctx, "videogen", "erin", "", t0.Add(4*time.Minute)); !errors.Is(err, ErrVendorNotStopped) {
		t.Fatalf("resuming it again: %v, want ErrVendorNotStopped", err)
	}
}

// testVendorCapabilities: the capabilities a worker records are read back
// per vendor, a later worker's replace an earlier one's, and a record that
// is not allot's words, or names no worker, writes nothing.
func testVendorCapabilities(t *testing.T, l *Ledger) {
	ctx := ctxT(t)
	if got, err := l.VendorCapabilities(ctx); err != nil || len(got) != 0 {
		t.Fatalf("before any worker: %+v, %v", got, err)
	}
	noLookup := allot.VendorCapabilities{Lookup: allot.LookupNone, Cost: allot.CostFromUsage, Bill: allot.BillNone}
	if err := l.RecordVendorCapabilities(ctx, "", map[string]allot.VendorCapabilities{"llm": noLookup}, t0); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("a record without the worker: %v", err)
	}
	bad := map[string]allot.VendorCapabilities{"llm": noLookup, "videogen": {Lookup: "maybe"}}
	if err := l.RecordVendorCapabilities(ctx, "w1", bad, t0); allot.ErrorType(err) != allot.VendorNotConfigured {
		t.Fatalf("a lookup that is not allot's word: %v", err)
	}
	if got, err := l.VendorCapabilities(ctx); err != nil || len(got) != 0 {
		t.Fatalf("a refused record wrote %+v, %v", got, err)
	}
	if err := l.RecordVendorCapabilities(ctx, "w1", map[string]allot.VendorCapabilities{"llm": {}, "default": noLookup}, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordVendorCapabilities(ctx, "w2", map[string]allot.VendorCapabilities{"llm": noLookup}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err := l.VendorCapabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, d := got["llm"], got["default"]
	if len(got) != 2 || v.Capabilities != noLookup || v.Worker != "w2" || !v.RecordedAt.Equal(t0.Add(time.Minute)) || d.Worker != "w1" || d.Capabilities != noLookup {
		t.Fatalf("recorded capabilities: %+v", got)
	}
}
