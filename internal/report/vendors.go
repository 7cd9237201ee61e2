package report

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"allot"
	"allot/internal/ledger"
	"allot/pipeline"
)

// VendorView is one vendor as `starter vendor list` shows it: its state
// and the limits the workers enforce, both from the ledger (shared by
// every worker; docs/design.md, "Vendor controls").
type VendorView struct {
	Name string `json:"name"`
	// Status is active, paused or tripped; Reason says why not active
	// (the first pause's reason; "tripped: <last error>" for a tripped
	// breaker), Since since when.
	Status     string    `json:"status"`
	Reason     string    `json:"reason,omitempty"`
	Since      time.Time `json:"since,omitzero"`
	PausedBy   string    `json:"paused_by,omitempty"`
	PausePolls bool      `json:"pause_polls,omitempty"`
	// LaterPauses counts the pause requests after the first one of the
	// current pause; LatestPause is the last of them (its reason, who,
	// when). `starter vendor list --history` shows them all.
	LaterPauses int                      `json:"later_pauses,omitempty"`
	LatestPause *ledger.VendorPauseEvent `json:"latest_pause,omitempty"`
	// InFlight are the requests holding a slot now (sends and polls).
	InFlightSend int `json:"in_flight_send"`
	InFlightPoll int `json:"in_flight_poll"`
	// Tokens is the rate's bucket now (nil without a rate).
	Tokens *float64 `json:"tokens,omitempty"`
	// Failures are the breaker's consecutive failures, LastError the last.
	Failures  int    `json:"failures"`
	LastError string `json:"last_error,omitempty"`
	// Limits are the controls the workers enforce, as the last worker to
	// start recorded them in the ledger (LimitsBy, LimitsAt); LimitsKnown
	// is false when no worker recorded this vendor's yet. Unknown says the
	// pipeline file no longer names it (its state stays in the ledger).
	Limits      pipeline.VendorLimits `json:"limits"`
	LimitsKnown bool                  `json:"limits_known"`
	LimitsBy    string                `json:"limits_by,omitempty"`
	LimitsAt    time.Time             `json:"limits_at,omitzero"`
	Unknown     bool                  `json:"unknown,omitempty"`
}

func viewVendor(s ledger.VendorState, enforced EnforcedLimits, at time.Time) VendorView {
	limits := enforced.Limits
	v := VendorView{
		Name: s.Vendor, Status: s.Status(), Reason: s.Reason(), PausedBy: s.PausedBy, PausePolls: s.PausePolls,
		InFlightSend: s.InFlightSend, InFlightPoll: s.InFlightPoll, Failures: s.Failures, LastError: s.LastError,
		Limits: limits, LimitsKnown: enforced.Known, LimitsBy: enforced.Worker, LimitsAt: enforced.At,
	}
	switch {
	case s.Paused:
		v.Since = s.PausedAt
	case s.Tripped():
		v.Since = s.TrippedAt
	}
	if limits.Rate > 0 {
		tokens := s.Tokens(ledger.VendorLimits{Rate: limits.Rate, Burst: limits.BurstSize()}, at)
		v.Tokens = &tokens
	}
	return v
}

// EnforcedLimits are a vendor's limits as the workers recorded them in
// the ledger at start; Known is false when none did.
type EnforcedLimits struct {
	Limits pipeline.VendorLimits
	Known  bool
	Worker string
	At     time.Time
}

// ReadEnforcedLimits reads the limits the workers recorded, by vendor; a
// nil ledger (not created yet) has none.
func ReadEnforcedLimits(ctx context.Context, led *ledger.Ledger) (map[string]EnforcedLimits, error) {
	out := map[string]EnforcedLimits{}
	if led == nil {
		return out, nil
	}
	rows, err := led.EnforcedVendorLimits(ctx)
	if err != nil {
		return nil, err
	}
	for name, r := range rows {
		var l pipeline.VendorLimits
		if err := json.Unmarshal([]byte(r.Limits), &l); err != nil {
			return nil, fmt.Errorf("the limits of vendor %s recorded by worker %s: %w", name, r.Worker, err)
		}
		out[name] = EnforcedLimits{Limits: l, Known: true, Worker: r.Worker, At: r.RecordedAt}
	}
	return out, nil
}

// ListVendors lists every vendor of the pipeline file (and the default
// one), and any other the ledger has state of, by name, with the limits
// the workers recorded.
func ListVendors(ctx context.Context, led *ledger.Ledger, set *pipeline.Set) ([]VendorView, error) {
	at := time.Now()
	states := map[string]ledger.VendorState{}
	var history []ledger.VendorPauseEvent
	if led != nil {
		ss, err := led.VendorStates(ctx, at)
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			states[s.Vendor] = s
		}
		if history, err = led.VendorPauseHistory(ctx, ""); err != nil {
			return nil, err
		}
	}
	enforced, err := ReadEnforcedLimits(ctx, led)
	if err != nil {
		return nil, err
	}
	view := func(s ledger.VendorState) VendorView {
		v := viewVendor(s, enforced[s.Vendor], at)
		if s.Paused {
			v.LaterPauses, v.LatestPause = laterPauses(history, s)
		}
		return v
	}
	known := set.ControlledVendors()
	var out []VendorView
	for _, name := range known {
		s, ok := states[name]
		if !ok {
			s = ledger.VendorState{Vendor: name}
		}
		out = append(out, view(s))
	}
	var others []string
	for name := range states {
		if !slices.Contains(known, name) {
			others = append(others, name)
		}
	}
	slices.Sort(others)
	for _, name := range others {
		v := view(states[name])
		v.Unknown = true
		out = append(out, v)
	}
	return out, nil
}

// laterPauses counts the pause requests of s's vendor after the one that
// began its current pause (the first since its last resume), and returns
// the last of them.
func laterPauses(history []ledger.VendorPauseEvent, s ledger.VendorState) (int, *ledger.VendorPauseEvent) {
	n, seenFirst := 0, false
	var latest *ledger.VendorPauseEvent
	for i, e := range history {
		switch {
		case e.Vendor != s.Vendor:
		case e.Action == "resume":
			n, seenFirst, latest = 0, false, nil
		case !seenFirst:
			seenFirst = true // the pause shown as the vendor's reason
		default:
			n, latest = n+1, &history[i]
		}
	}
	return n, latest
}

// VendorPauseHistory is every pause and resume request, oldest first, of
// one vendor or (name "") of all.
func VendorPauseHistory(ctx context.Context, led *ledger.Ledger, name string) ([]ledger.VendorPauseEvent, error) {
	if led == nil {
		return nil, nil
	}
	return led.VendorPauseHistory(ctx, name)
}

// VendorNow is a vendor's state as the workers act on it now, from the
// ledger: `episode show` prints it under a step waiting for the vendor,
// whose recorded wait (a probe time, say) may be stale.
type VendorNow struct {
	Vendor  string    `json:"vendor"`
	Status  string    `json:"status"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// VendorNowOf says what a step waiting for the vendor waits for now: its
// pause, its breaker under the limits the workers recorded (a breaker no
// longer configured stops nobody), or nothing (the wait ends at the
// step's next attempt).
func VendorNowOf(s ledger.VendorState, enforced EnforcedLimits, at time.Time) VendorNow {
	now := VendorNow{Vendor: s.Vendor, Status: s.Status(), At: at}
	const next = "the wait ends at the step's next attempt"
	switch {
	case s.Paused:
		now.Message = fmt.Sprintf("paused since %s by %s: %s; its steps go on after: %s", s.PausedAt.Format(time.RFC3339), dash(s.PausedBy), s.PauseReason, allot.VendorResumeCommand(s.Vendor))
	case s.Tripped() && !enforced.Known:
		now.Message = fmt.Sprintf("tripped since %s (%s); no worker has recorded the limits it enforces, so when its probe goes is not known", s.TrippedAt.Format(time.RFC3339), s.LastError)
	case s.Tripped() && enforced.Limits.TripAfter <= 0:
		now.Status = "active"
		now.Message = fmt.Sprintf("active: its breaker is no longer configured (no trip_after in the limits worker %s recorded at %s); %s",
			enforced.Worker, enforced.At.Format(time.RFC3339), next)
	case s.Tripped():
		probe := s.TrippedAt.Add(enforced.Limits.CoolDownDuration())
		if probe.After(at) {
			now.Message = fmt.Sprintf("tripped since %s (%s); one probe goes at %s", s.TrippedAt.Format(time.RFC3339), s.LastError, probe.Format(time.RFC3339))
		} else {
			now.Message = fmt.Sprintf("tripped since %s (%s); its cool-down is over: the step's next attempt is the probe", s.TrippedAt.Format(time.RFC3339), s.LastError)
		}
	default:
		now.Message = "active: " + next
	}
	return now
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// vendorNow reads a vendor's state and the workers' limits of it now.
func vendorNow(ctx context.Context, led *ledger.Ledger, vendor string) (*VendorNow, error) {
	at := time.Now()
	s, err := led.VendorStateOf(ctx, vendor, at)
	if err != nil {
		return nil, err
	}
	enforced, err := ReadEnforcedLimits(ctx, led)
	if err != nil {
		return nil, err
	}
	now := VendorNowOf(s, enforced[vendor], at)
	return &now, nil
}
