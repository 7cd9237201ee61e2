package ledger

// Vendor controls (docs/design.md, "Vendor controls"): an operator's pause,
// the circuit breaker, the slots of max_in_flight and the token bucket of
// rate, per vendor, in the ledger so that every worker and pipeline shares
// them. Every change to a vendor's rows is one write transaction under the
// vendor's lock (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory lock),
// so two workers never both take the last slot or token, or both probe.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strings"
	"time"

	"allot"
)

// VendorKind is what a request does at the vendor (allot's noun).
type VendorKind = allot.VendorKind

// Request kinds (allot's).
const (
	VendorSend = allot.VendorSend
	VendorPoll = allot.VendorPoll
)

// VendorWait says why a request may not go now.
type VendorWait string

// Reasons to wait: the reasons an episode waiting for the vendor shows
// (stage waiting_vendor).
const (
	WaitNone    VendorWait = ""
	WaitPaused  VendorWait = allot.ReasonVendorPaused
	WaitTripped VendorWait = allot.ReasonVendorTripped
	WaitBusy    VendorWait = allot.ReasonVendorBusy
	WaitRate    VendorWait = allot.ReasonVendorRate
)

// VendorLimits are a vendor's shared limits, as the gate applies them
// (pipeline.VendorLimits gives them).
type VendorLimits struct {
	MaxInFlight int
	Rate        float64 // submissions per second; 0: no cap
	Burst       int
	TripAfter   int // 0: no breaker
	CoolDown    time.Duration
}

func (v VendorLimits) bucket() allot.TokenBucket {
	return allot.TokenBucket{Rate: v.Rate, Burst: v.Burst}
}

func (v VendorLimits) breaker() allot.Breaker {
	return allot.Breaker{TripAfter: v.TripAfter, CoolDown: v.CoolDown}
}

// Gated reports whether a request needs a write: a slot, a token or the
// breaker's count. Without, only the pause is read.
func (v VendorLimits) Gated() bool { return v.MaxInFlight > 0 || v.Rate > 0 || v.TripAfter > 0 }

// VendorRequest asks for one request at a vendor.
type VendorRequest struct {
	Vendor string
	// Holder names the request: the lease's owner, unique per request
	// (an activity attempt and its call).
	Holder string
	Kind   VendorKind
	Limits VendorLimits
	// Lease is how long the slot (and a probe) holds unless renewed or
	// released: a killed holder's slot comes back after it.
	Lease time.Duration
	// At is the time of the request; zero is the ledger's clock.
	At time.Time
}

// VendorGrant is the gate's answer.
type VendorGrant struct {
	// Granted: the request may go. Then Held says a lease or probe was
	// written that ReleaseVendor must release, with the request's outcome.
	Granted bool `json:"granted"`
	Held    bool `json:"held,omitempty"`
	// Probe: this request is the breaker's one probe after its cool-down.
	Probe bool `json:"probe,omitempty"`
	// Wait, Reason and RetryAt say why not, for people and when to ask
	// again.
	Wait    VendorWait `json:"wait,omitempty"`
	Reason  string     `json:"reason,omitempty"`
	RetryAt time.Time  `json:"retry_at,omitzero"`
}

// VendorOutcome is what a request's answer says about the vendor (the
// domain's allot.VendorOutcome, which the breaker counts).
type VendorOutcome = allot.VendorOutcome

// Request outcomes, for the breaker.
const (
	VendorAnswered  = allot.VendorAnswered
	VendorFailed    = allot.VendorFailed
	VendorNoVerdict = allot.VendorNoVerdict
)

// VendorRelease ends a granted request.
type VendorRelease struct {
	Vendor  string
	Holder  string
	Outcome VendorOutcome
	// Error is the failure's text, for the breaker's reason.
	Error  string
	Limits VendorLimits
	At     time.Time
}

// VendorState is one vendor's shared state, as `starter vendor list` shows
// it.
type VendorState struct {
	Vendor      string    `json:"vendor"`
	Paused      bool      `json:"paused"`
	PausePolls  bool      `json:"pause_polls,omitempty"`
	PauseReason string    `json:"pause_reason,omitempty"`
	PausedBy    string    `json:"paused_by,omitempty"`
	PausedAt    time.Time `json:"paused_at,omitzero"`
	Failures    int       `json:"failures"`
	LastError   string    `json:"last_error,omitempty"`
	TrippedAt   time.Time `json:"tripped_at,omitzero"`
	ProbeHolder string    `json:"probe_holder,omitempty"`
	ProbeUntil  time.Time `json:"probe_until,omitzero"`
	// TokensMilli is the token bucket in thousandths of a submission, as of
	// RefilledAt (zero: never drawn, a full bucket).
	TokensMilli int64     `json:"tokens_milli"`
	RefilledAt  time.Time `json:"refilled_at,omitzero"`
	UpdatedAt   time.Time `json:"updated_at,omitzero"`
	// InFlight counts the live leases by kind (read with the state).
	InFlightSend int `json:"in_flight_send"`
	InFlightPoll int `json:"in_flight_poll"`
}

// Tripped reports whether the breaker is open (or half-open, probing).
func (s VendorState) Tripped() bool { return s.breaker().Tripped() }

func (s VendorState) breaker() allot.BreakerState {
	return allot.BreakerState{Failures: s.Failures, LastError: s.LastError, TrippedAt: s.TrippedAt, ProbeHolder: s.ProbeHolder, ProbeUntil: s.ProbeUntil}
}

func (s *VendorState) setBreaker(b allot.BreakerState) {
	s.Failures, s.LastError, s.TrippedAt, s.ProbeHolder, s.ProbeUntil = b.Failures, b.LastError, b.TrippedAt, b.ProbeHolder, b.ProbeUntil
}

func (s VendorState) bucket() allot.BucketLevel {
	return allot.BucketLevel{Milli: s.TokensMilli, At: s.RefilledAt}
}

// Status is the state in one word: paused, tripped or active.
func (s VendorState) Status() string {
	switch {
	case s.Paused:
		return "paused"
	case s.Tripped():
		return "tripped"
	}
	return "active"
}

// Reason says why the vendor does not take requests: the operator's reason,
// or "tripped: <last error>"; "" when active.
func (s VendorState) Reason() string {
	switch {
	case s.Paused:
		return s.PauseReason
	case s.Tripped():
		return "tripped: " + s.LastError
	}
	return ""
}

// Tokens is the bucket at time at, refilled at rate up to burst.
func (s VendorState) Tokens(l VendorLimits, at time.Time) float64 {
	return float64(l.bucket().Level(s.bucket(), at)) / 1000
}

// errVendorName: a vendor name the ledger cannot key state by.
var errVendorName = errors.New("vendor name is empty")

// vendorLockKey maps a vendor to the key of its advisory lock.
func vendorLockKey(vendor string) int64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, "allot/ledger/vendor/"+vendor)
	return int64(h.Sum64())
}

// lockVendorTx takes the vendor's lock where BEGIN did not (PostgreSQL;
// the same advisory lock statement as an episode's, with another key).
func (l *Ledger) lockVendorTx(ctx context.Context, tx *sql.Tx, vendor string) error {
	if l.d.lockEpisode == "" {
		return nil
	}
	if _, err := tx.ExecContext(ctx, l.d.q(l.d.lockEpisode), vendorLockKey(vendor)); err != nil {
		return fmt.Errorf("ledger %s: lock vendor %s: %w", l.where, vendor, err)
	}
	return nil
}

const vendorStateCols = `vendor, paused, pause_polls, pause_reason, paused_by, paused_at, failures, last_error,
	tripped_at, probe_holder, probe_until, tokens_milli, refilled_at, updated_at`

func (l *Ledger) queryVendorStates(ctx context.Context, db querier, where string, args ...any) ([]VendorState, error) {
	rows, err := db.QueryContext(ctx, l.d.q(`SELECT `+vendorStateCols+` FROM vendor_state `+where+` ORDER BY vendor`), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: query vendor state: %w", l.where, err)
	}
	defer rows.Close()
	var out []VendorState
	for rows.Next() {
		var s VendorState
		if err := rows.Scan(&s.Vendor, &s.Paused, &s.PausePolls, &s.PauseReason, &s.PausedBy, dbTime{&s.PausedAt}, &s.Failures, &s.LastError,
			dbTime{&s.TrippedAt}, &s.ProbeHolder, dbTime{&s.ProbeUntil}, &s.TokensMilli, dbTime{&s.RefilledAt}, dbTime{&s.UpdatedAt}); err != nil {
			return nil, fmt.Errorf("ledger %s: read vendor state: %w", l.where, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: read vendor state: %w", l.where, err)
	}
	return out, nil
}

// vendorState reads one vendor's row; a vendor without one is active with
// a full bucket.
func (l *Ledger) vendorState(ctx context.Context, db querier, vendor string) (VendorState, error) {
	ss, err := l.queryVendorStates(ctx, db, `WHERE vendor = ?`, vendor)
	if err != nil || len(ss) == 0 {
		return VendorState{Vendor: vendor}, err
	}
	return ss[0], nil
}

func (l *Ledger) saveVendorState(ctx context.Context, tx *sql.Tx, s VendorState, at time.Time) error {
	s.UpdatedAt = normTime(at)
	if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO vendor_state (`+vendorStateCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (vendor) DO UPDATE SET paused = excluded.paused, pause_polls = excluded.pause_polls,
			pause_reason = excluded.pause_reason, paused_by = excluded.paused_by, paused_at = excluded.paused_at,
			failures = excluded.failures, last_error = excluded.last_error, tripped_at = excluded.tripped_at,
			probe_holder = excluded.probe_holder, probe_until = excluded.probe_until,
			tokens_milli = excluded.tokens_milli, refilled_at = excluded.refilled_at, updated_at = excluded.updated_at`),
		s.Vendor, s.Paused, s.PausePolls, s.PauseReason, s.PausedBy, l.d.timeArg(s.PausedAt), s.Failures, s.LastError,
		l.d.timeArg(s.TrippedAt), s.ProbeHolder, l.d.timeArg(s.ProbeUntil), s.TokensMilli, l.d.timeArg(s.RefilledAt), l.d.timeArg(s.UpdatedAt)); err != nil {
		return fmt.Errorf("ledger %s: save the state of vendor %s: %w", l.where, s.Vendor, err)
	}
	return nil
}

// vendorTx runs fn on the vendor's state in one write transaction under its
// lock, and saves the state fn leaves if it changed.
func (l *Ledger) vendorTx(ctx context.Context, vendor string, at time.Time, fn func(tx *sql.Tx, s *VendorState) error) (VendorState, error) {
	if strings.TrimSpace(vendor) == "" {
		return VendorState{}, invalid("%v: name the vendor", errVendorName)
	}
	var out VendorState
	err := l.writeTx(ctx, func(tx *sql.Tx) error {
		if err := l.lockVendorTx(ctx, tx, vendor); err != nil {
			return err
		}
		before, err := l.vendorState(ctx, tx, vendor)
		if err != nil {
			return err
		}
		s := before
		if err := fn(tx, &s); err != nil {
			return err
		}
		if s != before {
			s.UpdatedAt = at
			if err := l.saveVendorState(ctx, tx, s, at); err != nil {
				return err
			}
		}
		out = s
		return nil
	})
	return out, err
}

func vendorAt(at time.Time) time.Time {
	if at.IsZero() {
		return now()
	}
	return normTime(at)
}

// pauseWait is why a pause stops a request of kind; "" if it does not.
func (s VendorState) pauseWait(kind VendorKind, at time.Time) (VendorGrant, bool) {
	if !s.Paused || (kind == VendorPoll && !s.PausePolls) {
		return VendorGrant{}, false
	}
	what := "sends"
	if s.PausePolls {
		what = "sends and polls"
	}
	return VendorGrant{Wait: WaitPaused, Reason: fmt.Sprintf("vendor %s is paused (%s) by %s since %s: %s", s.Vendor, what, orDash(s.PausedBy),
		s.PausedAt.Format(time.RFC3339), s.PauseReason), RetryAt: at.Add(pausedRecheck)}, true
}

// pausedRecheck is how soon a paused vendor is asked again: the resume is
// seen within it.
const pausedRecheck = 5 * time.Second

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// AcquireVendor asks whether a request may go to a vendor now. A pause (of
// sends, or of every request) or an open breaker says wait; after the
// vendor's cool-down one request, the probe, goes for all workers; with
// max_in_flight the request takes a slot (a lease until req.Lease, renewed
// by RenewVendorLease) if one is free; a send with a rate takes a token.
// Nothing is taken unless everything is granted. A vendor without limits
// costs one read.
func (l *Ledger) AcquireVendor(ctx context.Context, req VendorRequest) (VendorGrant, error) {
	at := vendorAt(req.At)
	switch {
	case strings.TrimSpace(req.Vendor) == "":
		return VendorGrant{}, invalid("%v: name the vendor", errVendorName)
	case req.Kind != VendorSend && req.Kind != VendorPoll:
		return VendorGrant{}, invalid("vendor %s: request kind %q is neither send nor poll", req.Vendor, req.Kind)
	case req.Limits.Gated() && (req.Holder == "" || req.Lease <= 0):
		return VendorGrant{}, invalid("vendor %s: a request under limits needs its holder and a lease duration", req.Vendor)
	}
	if !req.Limits.Gated() {
		s, err := l.vendorState(ctx, l.r, req.Vendor)
		if err != nil {
			return VendorGrant{}, err
		}
		if g, wait := s.pauseWait(req.Kind, at); wait {
			return g, nil
		}
		return VendorGrant{Granted: true}, nil
	}
	var grant VendorGrant
	_, err := l.vendorTx(ctx, req.Vendor, at, func(tx *sql.Tx, s *VendorState) error {
		if g, wait := s.pauseWait(req.Kind, at); wait {
			grant = g
			return nil
		}
		lim := req.Limits
		gate, retryAt := lim.breaker().Admit(s.breaker(), req.Holder, at)
		switch gate {
		case allot.BreakerCooling:
			grant = VendorGrant{Wait: WaitTripped, Reason: fmt.Sprintf("vendor %s tripped at %s after %d failures (tripped: %s); one probe goes at %s",
				s.Vendor, s.TrippedAt.Format(time.RFC3339), s.Failures, s.LastError, retryAt.Format(time.RFC3339)), RetryAt: retryAt}
			return nil
		case allot.BreakerProbing:
			grant = VendorGrant{Wait: WaitTripped, Reason: fmt.Sprintf("vendor %s tripped (tripped: %s); its probe is under way", s.Vendor, s.LastError),
				RetryAt: retryAt}
			return nil
		}
		probe := gate == allot.BreakerProbe
		if lim.MaxInFlight > 0 {
			live, err := l.liveLeases(ctx, tx, req.Vendor, at)
			if err != nil {
				return err
			}
			if free, others, soonest := allot.MaxInFlight(lim.MaxInFlight).Admit(live, req.Holder); !free {
				grant = VendorGrant{Wait: WaitBusy, Reason: fmt.Sprintf("vendor %s has %d of max_in_flight %d requests in flight", s.Vendor, others, lim.MaxInFlight), RetryAt: soonest}
				return nil
			}
		}
		if req.Kind == VendorSend && lim.Rate > 0 {
			after, wait, ok := lim.bucket().Take(s.bucket(), at)
			if !ok {
				grant = VendorGrant{Wait: WaitRate, Reason: fmt.Sprintf("vendor %s is at its rate of %g submissions per second (burst %d)", s.Vendor, lim.Rate, max(lim.Burst, 1)),
					RetryAt: at.Add(wait)}
				return nil
			}
			s.TokensMilli, s.RefilledAt = after.Milli, after.At
		}
		grant = VendorGrant{Granted: true, Probe: probe}
		if probe {
			s.ProbeHolder, s.ProbeUntil = req.Holder, at.Add(req.Lease)
			grant.Held = true
		}
		if lim.MaxInFlight > 0 {
			if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO vendor_leases (vendor, holder, kind, acquired_at, expires_at) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (vendor, holder) DO UPDATE SET kind = excluded.kind, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at`),
				req.Vendor, req.Holder, string(req.Kind), l.d.timeArg(at), l.d.timeArg(at.Add(req.Lease))); err != nil {
				return fmt.Errorf("ledger %s: take a slot of vendor %s: %w", l.where, req.Vendor, err)
			}
			grant.Held = true
		}
		if lim.TripAfter > 0 {
			grant.Held = true // the outcome counts for the breaker
		}
		return nil
	})
	if err != nil {
		return VendorGrant{}, err
	}
	return grant, nil
}

// liveLeases deletes the vendor's expired leases and returns the others.
func (l *Ledger) liveLeases(ctx context.Context, tx *sql.Tx, vendor string, at time.Time) ([]allot.SlotLease, error) {
	if _, err := tx.ExecContext(ctx, l.d.q(`DELETE FROM vendor_leases WHERE vendor = ? AND expires_at <= ?`), vendor, l.d.timeArg(at)); err != nil {
		return nil, fmt.Errorf("ledger %s: drop expired slots of vendor %s: %w", l.where, vendor, err)
	}
	return l.leases(ctx, tx, vendor, at)
}

func (l *Ledger) leases(ctx context.Context, db querier, vendor string, at time.Time) ([]allot.SlotLease, error) {
	rows, err := db.QueryContext(ctx, l.d.q(`SELECT holder, expires_at FROM vendor_leases WHERE vendor = ? AND expires_at > ? ORDER BY holder`), vendor, l.d.timeArg(at))
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read the slots of vendor %s: %w", l.where, vendor, err)
	}
	defer rows.Close()
	var out []allot.SlotLease
	for rows.Next() {
		var ls allot.SlotLease
		if err := rows.Scan(&ls.Holder, dbTime{&ls.Expires}); err != nil {
			return nil, fmt.Errorf("ledger %s: read a slot of vendor %s: %w", l.where, vendor, err)
		}
		out = append(out, ls)
	}
	return out, rows.Err()
}

// RenewVendorLease moves the expiry of holder's slot (and probe) to until,
// while its request runs. A lease that is gone (it expired and another
// request took the slot) is not written again: the caller's request goes on,
// one over the limit, rather than cut a send in half.
func (l *Ledger) RenewVendorLease(ctx context.Context, vendor, holder string, until time.Time) error {
	if holder == "" || until.IsZero() {
		return invalid("vendor %s: a renewal needs the holder and the new expiry", vendor)
	}
	_, err := l.vendorTx(ctx, vendor, now(), func(tx *sql.Tx, s *VendorState) error {
		if _, err := tx.ExecContext(ctx, l.d.q(`UPDATE vendor_leases SET expires_at = ? WHERE vendor = ? AND holder = ?`),
			l.d.timeArg(until), vendor, holder); err != nil {
			return fmt.Errorf("ledger %s: renew a slot of vendor %s: %w", l.where, vendor, err)
		}
		if s.ProbeHolder == holder {
			s.ProbeUntil = normTime(until)
		}
		return nil
	})
	return err
}

// ReleaseVendor ends a granted request that held a slot, a probe or a
// breaker count: the slot is freed, and the outcome counts for the breaker.
// A failure adds to the consecutive failures, and at trip_after opens the
// breaker with the failure as its reason; an answer resets them. While the
// breaker is open only its probe's outcome counts: an answer closes it, a
// failure opens it again for another cool-down. Releasing twice changes
// nothing more.
func (l *Ledger) ReleaseVendor(ctx context.Context, rel VendorRelease) (VendorState, error) {
	if rel.Holder == "" {
		return VendorState{}, invalid("vendor %s: a release needs the request's holder", rel.Vendor)
	}
	at := vendorAt(rel.At)
	return l.vendorTx(ctx, rel.Vendor, at, func(tx *sql.Tx, s *VendorState) error {
		if _, err := tx.ExecContext(ctx, l.d.q(`DELETE FROM vendor_leases WHERE vendor = ? AND holder = ?`), rel.Vendor, rel.Holder); err != nil {
			return fmt.Errorf("ledger %s: free a slot of vendor %s: %w", l.where, rel.Vendor, err)
		}
		s.setBreaker(rel.Limits.breaker().Release(s.breaker(), rel.Holder, rel.Outcome, truncate(rel.Error, 500), at))
		return nil
	})
}

// truncate cuts s to n bytes at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// VendorPause is an operator's pause of a vendor.
type VendorPause struct {
	Vendor string
	Reason string
	By     string
	// Polls pauses look-ups, polls and downloads too, not only sends.
	Polls bool
	At    time.Time
}

// PauseVendor pauses a vendor for every worker: no send (and with Polls no
// request at all) goes to it until ResumeVendor. Pausing a paused vendor
// keeps the first pause (its reason, who and since: the reason people
// look for) and may only widen it to polls; every request is kept in the
// pause history (VendorPauseHistory). The reason is required: every wait
// says why.
func (l *Ledger) PauseVendor(ctx context.Context, p VendorPause) (VendorState, error) {
	if strings.TrimSpace(p.Reason) == "" {
		return VendorState{}, invalid("pausing vendor %s needs a reason (--reason TEXT): every waiting episode shows it", p.Vendor)
	}
	at := vendorAt(p.At)
	reason, by := truncate(p.Reason, 500), truncate(p.By, 200)
	return l.vendorTx(ctx, p.Vendor, at, func(tx *sql.Tx, s *VendorState) error {
		if !s.Paused {
			s.PausedAt, s.PauseReason, s.PausedBy = at, reason, by
		}
		s.Paused, s.PausePolls = true, s.PausePolls || p.Polls
		return l.addVendorPause(ctx, tx, VendorPauseEvent{Vendor: p.Vendor, Action: "pause", Reason: reason, By: by, Polls: p.Polls, At: at})
	})
}

// ResumeVendor lets requests go to a vendor again: it lifts an operator's
// pause and closes a tripped breaker (its failures start from zero).
// Resuming an active vendor changes nothing; resuming a paused one is
// kept in the pause history.
func (l *Ledger) ResumeVendor(ctx context.Context, vendor string, at time.Time) (VendorState, error) {
	return l.ResumeVendorBy(ctx, vendor, "", at)
}

// ResumeVendorBy is ResumeVendor naming who resumes, for the history.
func (l *Ledger) ResumeVendorBy(ctx context.Context, vendor, by string, at time.Time) (VendorState, error) {
	return l.ResumeVendorWhy(ctx, vendor, by, "", at)
}

// ResumeVendorWhy is ResumeVendorBy with why, for the history too.
func (l *Ledger) ResumeVendorWhy(ctx context.Context, vendor, by, reason string, at time.Time) (VendorState, error) {
	return l.resumeVendor(ctx, vendor, by, reason, at, false)
}

// ErrVendorNotStopped refuses an operator's resume of a vendor neither
// paused nor tripped: there was nothing to resume.
var ErrVendorNotStopped = errors.New("the vendor is neither paused nor tripped")

// ResumeStoppedVendor is an operator's resume: ResumeVendorWhy, refused
// with ErrVendorNotStopped, writing nothing, when the vendor is active.
// The check is made in the transaction that resumes, under the vendor's
// lock, so of two operators resuming at once one resumes and the other is
// told there was nothing to resume (a check read before it would let both
// believe they had).
func (l *Ledger) ResumeStoppedVendor(ctx context.Context, vendor, by, reason string, at time.Time) (VendorState, error) {
	return l.resumeVendor(ctx, vendor, by, reason, at, true)
}

func (l *Ledger) resumeVendor(ctx context.Context, vendor, by, reason string, at time.Time, mustBeStopped bool) (VendorState, error) {
	at = vendorAt(at)
	return l.vendorTx(ctx, vendor, at, func(tx *sql.Tx, s *VendorState) error {
		if mustBeStopped && s.Status() == "active" {
			return ErrVendorNotStopped
		}
		if s.Paused {
			if err := l.addVendorPause(ctx, tx, VendorPauseEvent{Vendor: vendor, Action: "resume", Reason: reason, By: truncate(by, 200), At: at}); err != nil {
				return err
			}
		}
		s.Paused, s.PausePolls, s.PauseReason, s.PausedBy, s.PausedAt = false, false, "", "", time.Time{}
		s.Failures, s.TrippedAt, s.ProbeHolder, s.ProbeUntil = 0, time.Time{}, "", time.Time{}
		return nil
	})
}

// VendorPauseEvent is one operator request in a vendor's pause history.
type VendorPauseEvent struct {
	Vendor string    `json:"vendor"`
	Action string    `json:"action"` // pause or resume
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
	Polls  bool      `json:"polls,omitempty"`
	At     time.Time `json:"at"`
}

func (l *Ledger) addVendorPause(ctx context.Context, tx *sql.Tx, e VendorPauseEvent) error {
	if _, err := tx.ExecContext(ctx, l.d.q(`INSERT INTO vendor_pauses (vendor, action, reason, requested_by, polls, requested_at) VALUES (?, ?, ?, ?, ?, ?)`),
		e.Vendor, e.Action, e.Reason, e.By, e.Polls, l.d.timeArg(e.At)); err != nil {
		return fmt.Errorf("ledger %s: record the %s of vendor %s: %w", l.where, e.Action, e.Vendor, err)
	}
	return nil
}

// VendorPauseHistory lists the pause and resume requests of a vendor
// (every vendor when vendor is ""), oldest first.
func (l *Ledger) VendorPauseHistory(ctx context.Context, vendor string) ([]VendorPauseEvent, error) {
	q, args := `SELECT vendor, action, reason, requested_by, polls, requested_at FROM vendor_pauses ORDER BY id`, []any{}
	if vendor != "" {
		q, args = `SELECT vendor, action, reason, requested_by, polls, requested_at FROM vendor_pauses WHERE vendor = ? ORDER BY id`, []any{vendor}
	}
	rows, err := l.r.QueryContext(ctx, l.d.q(q), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: read the pause history: %w", l.where, err)
	}
	defer rows.Close()
	var out []VendorPauseEvent
	for rows.Next() {
		var e VendorPauseEvent
		if err := rows.Scan(&e.Vendor, &e.Action, &e.Reason, &e.By, &e.Polls, dbTime{&e.At}); err != nil {
			return nil, fmt.Errorf("ledger %s: read the pause history: %w", l.where, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// VendorStates lists every vendor with state in the ledger, by name, with
// its requests in flight at at (zero: now).
func (l *Ledger) VendorStates(ctx context.Context, at time.Time) ([]VendorState, error) {
	at = vendorAt(at)
	ss, err := l.queryVendorStates(ctx, l.r, ``)
	if err != nil {
		return nil, err
	}
	rows, err := l.r.QueryContext(ctx, l.d.q(`SELECT vendor, kind, COUNT(*) FROM vendor_leases WHERE expires_at > ? GROUP BY vendor, kind ORDER BY vendor, kind`), l.d.timeArg(at))
	if err != nil {
		return nil, fmt.Errorf("ledger %s: count vendor slots: %w", l.where, err)
	}
	defer rows.Close()
	counts := map[string]map[VendorKind]int{}
	for rows.Next() {
		var (
			vendor, kind string
			n            int
		)
		if err := rows.Scan(&vendor, &kind, &n); err != nil {
			return nil, fmt.Errorf("ledger %s: count vendor slots: %w", l.where, err)
		}
		if counts[vendor] == nil {
			counts[vendor] = map[VendorKind]int{}
		}
		counts[vendor][VendorKind(kind)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger %s: count vendor slots: %w", l.where, err)
	}
	seen := map[string]bool{}
	for i := range ss {
		seen[ss[i].Vendor] = true
		ss[i].InFlightSend, ss[i].InFlightPoll = counts[ss[i].Vendor][VendorSend], counts[ss[i].Vendor][VendorPoll]
	}
	for vendor, c := range counts {
		if !seen[vendor] {
			ss = append(ss, VendorState{Vendor: vendor, InFlightSend: c[VendorSend], InFlightPoll: c[VendorPoll]})
		}
	}
	return ss, nil
}

// VendorStateOf is one vendor's state (active and empty if it has none).
func (l *Ledger) VendorStateOf(ctx context.Context, vendor string, at time.Time) (VendorState, error) {
	ss, err := l.VendorStates(ctx, at)
	if err != nil {
		return VendorState{}, err
	}
	for _, s := range ss {
		if s.Vendor == vendor {
			return s, nil
		}
	}
	return VendorState{Vendor: vendor}, nil
}
