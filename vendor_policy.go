package allot

// Vendor controls as arithmetic (docs/design.md, "Vendor controls"): the
// token bucket of a vendor's rate, the slots of max_in_flight and the
// circuit breaker's closed, open and half-open states. Pure: the ledger
// reads a vendor's state and leases and calls these in one write
// transaction under the vendor's lock, then writes what they return.

import (
	"math"
	"time"
)

// TokenBucket is a vendor's rate: Rate submissions per second, up to Burst
// (at least one) saved up. A zero Rate is no cap.
type TokenBucket struct {
	Rate  float64
	Burst int
}

// BucketLevel is a bucket's tokens in thousandths of a submission as of
// At; a zero At is a bucket never drawn, which is full.
type BucketLevel struct {
	Milli int64
	At    time.Time
}

// Level is the bucket in thousandths at at: refilled at Rate since the
// level's time, up to Burst.
func (b TokenBucket) Level(l BucketLevel, at time.Time) int64 {
	full := int64(max(b.Burst, 1)) * 1000
	if l.At.IsZero() {
		return full
	}
	elapsed := at.Sub(l.At).Seconds()
	if elapsed <= 0 {
		return min(l.Milli, full)
	}
	add := elapsed * b.Rate * 1000
	if add >= float64(full) {
		return full
	}
	return min(full, l.Milli+int64(math.Floor(add)))
}

// Take draws one submission's token at at and returns the level after.
// Under one token it takes nothing and says how long until there is one
// (at least a millisecond).
func (b TokenBucket) Take(l BucketLevel, at time.Time) (after BucketLevel, wait time.Duration, ok bool) {
	tokens := b.Level(l, at)
	if tokens < 1000 {
		wait := time.Duration(float64(1000-tokens) / (b.Rate * 1000) * float64(time.Second))
		return l, max(wait, time.Millisecond), false
	}
	return BucketLevel{Milli: tokens - 1000, At: at}, 0, true
}

// SlotLease is one request's slot at a vendor, held until Expires.
type SlotLease struct {
	Holder  string
	Expires time.Time
}

// MaxInFlight caps the requests at a vendor at once; 0 is no cap.
type MaxInFlight int

// Admit reports whether holder may take a slot beside the live leases:
// the leases of other holders must fill fewer than the cap (holder's own
// lease is its slot, taken again). Others counts them, and soonest is the
// first of their expiries: when a slot may be free.
func (m MaxInFlight) Admit(live []SlotLease, holder string) (ok bool, others int, soonest time.Time) {
	for _, ls := range live {
		if ls.Holder == holder {
			continue
		}
		others++
		if soonest.IsZero() || ls.Expires.Before(soonest) {
			soonest = ls.Expires
		}
	}
	return m <= 0 || others < int(m), others, soonest
}

// Breaker is a vendor's circuit breaker: TripAfter consecutive failures
// open it (0: no breaker), and CoolDown after it opened one request, the
// probe, goes.
type Breaker struct {
	TripAfter int
	CoolDown  time.Duration
}

// BreakerState is where a vendor's breaker stands: its consecutive
// failures and the last one's text, when it opened (zero: closed), and
// who holds its probe until when.
type BreakerState struct {
	Failures    int
	LastError   string
	TrippedAt   time.Time
	ProbeHolder string
	ProbeUntil  time.Time
}

// Tripped reports whether the breaker is open (or half-open, probing).
func (s BreakerState) Tripped() bool { return !s.TrippedAt.IsZero() }

// BreakerGate is the breaker's answer to a request.
type BreakerGate int

// The breaker's answers.
const (
	// BreakerPass: closed, or no breaker: the request goes.
	BreakerPass BreakerGate = iota
	// BreakerProbe: open and cooled down, with no other probe under way:
	// the request goes as the probe (half-open).
	BreakerProbe
	// BreakerCooling: open, within its cool-down: wait until it ends.
	BreakerCooling
	// BreakerProbing: open, and another holder's probe is under way.
	BreakerProbing
)

// Admit is the breaker's answer to holder's request at at, and when a
// request it stops may ask again (for BreakerCooling, when the probe may
// go).
func (b Breaker) Admit(s BreakerState, holder string, at time.Time) (gate BreakerGate, retryAt time.Time) {
	if !s.Tripped() || b.TripAfter <= 0 {
		return BreakerPass, time.Time{}
	}
	reopen := s.TrippedAt.Add(b.CoolDown)
	switch {
	case at.Before(reopen):
		return BreakerCooling, reopen
	case s.ProbeHolder != "" && s.ProbeHolder != holder && at.Before(s.ProbeUntil):
		// Within a second: the probe may end before its lease does.
		return BreakerProbing, minTime(s.ProbeUntil, at.Add(time.Second))
	}
	return BreakerProbe, time.Time{}
}

// VendorOutcome is what a request's answer says about the vendor, for the
// breaker.
type VendorOutcome string

// Request outcomes.
const (
	// VendorAnswered: the vendor answered (2xx, 4xx, 404, 501): it is up.
	VendorAnswered VendorOutcome = "answered"
	// VendorFailed: unreachable, 5xx, timed out.
	VendorFailed VendorOutcome = "failed"
	// VendorNoVerdict: nothing was sent, or an answer that says neither
	// (429); the breaker does not count it.
	VendorNoVerdict VendorOutcome = "none"
)

// Release counts the outcome of holder's granted request at at. Holder's
// probe ends. A failure adds to the consecutive failures (errText its
// reason) and at TripAfter opens the breaker; an answer resets them and
// closes it. While it is open only its probe's outcome counts: an answer
// closes it, a failure opens it for another cool-down.
func (b Breaker) Release(s BreakerState, holder string, outcome VendorOutcome, errText string, at time.Time) BreakerState {
	probe := s.ProbeHolder == holder && holder != ""
	if probe {
		s.ProbeHolder, s.ProbeUntil = "", time.Time{}
	}
	if b.TripAfter <= 0 {
		return s
	}
	switch {
	case s.Tripped() && !probe:
		// A request that went before the trip: the probe decides.
	case outcome == VendorAnswered:
		s.Failures, s.TrippedAt = 0, time.Time{}
	case outcome == VendorFailed:
		s.Failures++
		s.LastError = errText
		if probe || s.Failures >= b.TripAfter {
			s.TrippedAt = at
		}
	}
	return s
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// VendorKind is what a request does at the vendor: a send (a submission,
// which a pause stops and the rate counts) or a poll (a look-up, a status
// poll or a download, which only a pause of polls stops).
type VendorKind string

// Request kinds.
const (
	VendorSend VendorKind = "send"
	VendorPoll VendorKind = "poll"
)
