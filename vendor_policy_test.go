package allot

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 8, 7, 12, 0, 0, 0, time.UTC)

// TestTokenBucket: a bucket never drawn is full; it refills at its rate,
// in whole thousandths, up to its burst; a send takes one token or says
// how long until one is there.
func TestTokenBucket(t *testing.T) {
	for _, c := range []struct {
		name   string
		bucket TokenBucket
		level  BucketLevel
		at     time.Time
		want   int64
	}{
		{"never drawn: full", TokenBucket{Rate: 1, Burst: 3}, BucketLevel{}, t0, 3000},
		{"burst 0 holds one", TokenBucket{Rate: 1}, BucketLevel{}, t0, 1000},
		{"drawn now", TokenBucket{Rate: 1, Burst: 3}, BucketLevel{Milli: 0, At: t0}, t0, 0},
		{"half a second at 1/s", TokenBucket{Rate: 1, Burst: 3}, BucketLevel{Milli: 0, At: t0}, t0.Add(500 * time.Millisecond), 500},
		{"whole thousandths only", TokenBucket{Rate: 1, Burst: 3}, BucketLevel{Milli: 0, At: t0}, t0.Add(1500 * time.Microsecond), 1},
		{"refilled to the burst", TokenBucket{Rate: 1, Burst: 3}, BucketLevel{Milli: 2500, At: t0}, t0.Add(time.Second), 3000},
		{"an hour later: the burst", TokenBucket{Rate: 1, Burst: 3}, BucketLevel{Milli: 0, At: t0}, t0.Add(time.Hour), 3000},
		{"a clock behind the level", TokenBucket{Rate: 1, Burst: 3}, BucketLevel{Milli: 1200, At: t0}, t0.Add(-time.Second), 1200},
		{"a level above a lowered burst", TokenBucket{Rate: 1, Burst: 1}, BucketLevel{Milli: 2500, At: t0}, t0, 1000},
	} {
		if got := c.bucket.Level(c.level, c.at); got != c.want {
			t.Errorf("%s: level %d, want %d", c.name, got, c.want)
		}
	}

	b := TokenBucket{Rate: 2, Burst: 2}
	l, wait, ok := b.Take(BucketLevel{}, t0)
	if !ok || wait != 0 || l != (BucketLevel{Milli: 1000, At: t0}) {
		t.Fatalf("first take: %+v, %v, %v; want one token left", l, wait, ok)
	}
	l, _, ok = b.Take(l, t0)
	if !ok || l.Milli != 0 {
		t.Fatalf("second take: %+v, %v; want none left", l, ok)
	}
	after, wait, ok := b.Take(l, t0.Add(100*time.Millisecond))
	if ok || after != l || wait != 400*time.Millisecond {
		t.Errorf("take at 200 of 1000: %+v, %v, %v; want nothing taken and a wait of 400ms", after, wait, ok)
	}
	if _, wait, ok := (TokenBucket{Rate: 1e9}).Take(BucketLevel{Milli: 999, At: t0}, t0); ok || wait != time.Millisecond {
		t.Errorf("a wait under a millisecond: %v, %v; want 1ms", wait, ok)
	}
}

// TestMaxInFlight: the slots count the live leases of other holders; a
// holder's own lease is its slot; when full, the soonest expiry is when
// to ask again.
func TestMaxInFlight(t *testing.T) {
	live := []SlotLease{{"a", t0.Add(3 * time.Second)}, {"b", t0.Add(time.Second)}, {"c", t0.Add(2 * time.Second)}}
	for _, c := range []struct {
		name    string
		max     MaxInFlight
		live    []SlotLease
		holder  string
		ok      bool
		others  int
		soonest time.Time
	}{
		{"no leases", 1, nil, "a", true, 0, time.Time{}},
		{"no cap", 0, live, "d", true, 3, t0.Add(time.Second)},
		{"one free", 4, live, "d", true, 3, t0.Add(time.Second)},
		{"full", 3, live, "d", false, 3, t0.Add(time.Second)},
		{"its own slot again", 3, live, "b", true, 2, t0.Add(2 * time.Second)},
		{"full without its own", 2, live, "b", false, 2, t0.Add(2 * time.Second)},
	} {
		ok, others, soonest := c.max.Admit(c.live, c.holder)
		if ok != c.ok || others != c.others || !soonest.Equal(c.soonest) {
			t.Errorf("%s: %v, %d others, soonest %v; want %v, %d, %v", c.name, ok, others, soonest, c.ok, c.others, c.soonest)
		}
	}
}

// TestBreakerAdmit: closed, every request goes; open, requests wait for
// the cool-down; then one probe goes for everyone, and its holder may ask
// again; a probe whose lease ended may be taken by another.
func TestBreakerAdmit(t *testing.T) {
	b := Breaker{TripAfter: 3, CoolDown: time.Minute}
	tripped := BreakerState{Failures: 3, LastError: "503", TrippedAt: t0}
	probing := tripped
	probing.ProbeHolder, probing.ProbeUntil = "p", t0.Add(time.Minute+10*time.Second)
	for _, c := range []struct {
		name    string
		breaker Breaker
		state   BreakerState
		holder  string
		at      time.Time
		gate    BreakerGate
		retryAt time.Time
	}{
		{"closed", b, BreakerState{Failures: 2}, "a", t0, BreakerPass, time.Time{}},
		{"no breaker", Breaker{}, tripped, "a", t0, BreakerPass, time.Time{}},
		{"cooling", b, tripped, "a", t0.Add(59 * time.Second), BreakerCooling, t0.Add(time.Minute)},
		{"cooled: the probe", b, tripped, "a", t0.Add(time.Minute), BreakerProbe, time.Time{}},
		{"another's probe", b, probing, "a", t0.Add(time.Minute + time.Second), BreakerProbing, t0.Add(time.Minute + 2*time.Second)},
		{"another's probe, near its end", b, probing, "a", t0.Add(time.Minute + 9500*time.Millisecond), BreakerProbing, probing.ProbeUntil},
		{"its own probe", b, probing, "p", t0.Add(time.Minute + time.Second), BreakerProbe, time.Time{}},
		{"a probe whose lease ended", b, probing, "a", probing.ProbeUntil, BreakerProbe, time.Time{}},
	} {
		gate, retryAt := c.breaker.Admit(c.state, c.holder, c.at)
		if gate != c.gate || !retryAt.Equal(c.retryAt) {
			t.Errorf("%s: %v, retry at %v; want %v, %v", c.name, gate, retryAt, c.gate, c.retryAt)
		}
	}
}

// TestBreakerRelease: failures in a row trip the breaker at trip_after, an
// answer resets them; while open only the probe counts: an answer closes
// it, a failure opens it for another cool-down; no verdict counts nothing.
func TestBreakerRelease(t *testing.T) {
	b := Breaker{TripAfter: 3, CoolDown: time.Minute}
	at := t0.Add(2 * time.Minute)
	tripped := BreakerState{Failures: 3, LastError: "503", TrippedAt: t0}
	probing := tripped
	probing.ProbeHolder, probing.ProbeUntil = "p", at.Add(time.Second)
	for _, c := range []struct {
		name    string
		breaker Breaker
		state   BreakerState
		holder  string
		outcome VendorOutcome
		want    BreakerState
	}{
		{"a failure counts", b, BreakerState{Failures: 1}, "a", VendorFailed, BreakerState{Failures: 2, LastError: "down"}},
		{"the last failure trips", b, BreakerState{Failures: 2}, "a", VendorFailed, BreakerState{Failures: 3, LastError: "down", TrippedAt: at}},
		{"an answer resets", b, BreakerState{Failures: 2, LastError: "503"}, "a", VendorAnswered, BreakerState{LastError: "503"}},
		{"no verdict counts nothing", b, BreakerState{Failures: 2}, "a", VendorNoVerdict, BreakerState{Failures: 2}},
		{"open: a request from before the trip", b, tripped, "a", VendorAnswered, tripped},
		{"open: a failure from before the trip", b, tripped, "a", VendorFailed, tripped},
		{"the probe answers: closed", b, probing, "p", VendorAnswered, BreakerState{LastError: "503"}},
		{"the probe fails: open again", b, probing, "p", VendorFailed, BreakerState{Failures: 4, LastError: "down", TrippedAt: at}},
		{"the probe says nothing: open, no probe", b, probing, "p", VendorNoVerdict, tripped},
		{"no breaker: the probe ends, nothing counts", Breaker{}, probing, "p", VendorFailed, tripped},
		{"no breaker: nothing counts", Breaker{}, BreakerState{Failures: 1}, "a", VendorFailed, BreakerState{Failures: 1}},
		{"no holder is no probe", b, BreakerState{Failures: 3, TrippedAt: t0}, "", VendorAnswered, BreakerState{Failures: 3, TrippedAt: t0}},
	} {
		if got := c.breaker.Release(c.state, c.holder, c.outcome, "down", at); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
