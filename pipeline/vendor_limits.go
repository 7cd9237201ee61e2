package pipeline

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// VendorLimits are the controls of one vendor (docs/design.md, "Vendor
// controls"), the same fields on every [[vendor]] and, for the default
// vendor, in ALLOT_VENDOR_* variables or a [[vendor]] named "default".
// Durations stay as written (the file round-trips); the methods give their
// values. Zero values mean "no limit" (or the default where one is named).
type VendorLimits struct {
	// MaxInFlight caps the requests (sends, look-ups, polls, downloads)
	// at the vendor at once, across all workers; 0: no cap.
	MaxInFlight int `toml:"max_in_flight" json:"max_in_flight,omitempty"`
	// Rate caps submissions per second across all workers, with bursts of
	// up to Burst; 0: no cap.
	Rate  float64 `toml:"rate" json:"rate,omitempty"`
	Burst int     `toml:"burst" json:"burst,omitempty"`
	// TripAfter consecutive failures (unreachable, 5xx, timeouts) open the
	// breaker; 0: no breaker. CoolDown is how long it stays open before
	// one probe goes (default 30s).
	TripAfter int    `toml:"trip_after" json:"trip_after,omitempty"`
	CoolDown  string `toml:"cool_down" json:"cool_down,omitempty"`
	// IdempotencyHorizon is how long the vendor keeps idempotency keys;
	// "": forever (allot's vendor API).
	IdempotencyHorizon string `toml:"idempotency_horizon" json:"idempotency_horizon,omitempty"`
	// SendTimeout bounds one submission (default 30s).
	SendTimeout string `toml:"send_timeout" json:"send_timeout,omitempty"`
}

// Defaults of the vendor controls.
const (
	DefaultCoolDown    = 30 * time.Second
	DefaultSendTimeout = 30 * time.Second
	// MinSendTimeout and MaxSendTimeout bound send_timeout: a send must
	// fit in the submit activity's start-to-close timeout (5 minutes).
	MinSendTimeout = time.Second
	MaxSendTimeout = 4 * time.Minute
)

// DefaultVendorEnv lists the environment variables of the default vendor's
// controls, in the order README lists them.
var DefaultVendorEnv = []struct{ Env, Field string }{
	{"ALLOT_VENDOR_MAX_IN_FLIGHT", "max_in_flight"},
	{"ALLOT_VENDOR_RATE", "rate"},
	{"ALLOT_VENDOR_BURST", "burst"},
	{"ALLOT_VENDOR_TRIP_AFTER", "trip_after"},
	{"ALLOT_VENDOR_COOL_DOWN", "cool_down"},
	{"ALLOT_VENDOR_IDEMPOTENCY_HORIZON", "idempotency_horizon"},
	{"ALLOT_VENDOR_SEND_TIMEOUT", "send_timeout"},
}

// BurstSize is the token bucket's size: burst, or the rate rounded up
// (at least 1) when burst is not given.
func (l VendorLimits) BurstSize() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return max(1, int(math.Ceil(l.Rate)))
}

// CoolDownDuration is how long a tripped breaker stays open.
func (l VendorLimits) CoolDownDuration() time.Duration {
	if d, err := time.ParseDuration(l.CoolDown); err == nil && d > 0 {
		return d
	}
	return DefaultCoolDown
}

// Horizon is how long the vendor keeps idempotency keys; 0 for forever.
func (l VendorLimits) Horizon() time.Duration {
	if d, err := time.ParseDuration(l.IdempotencyHorizon); err == nil && d > 0 {
		return d
	}
	return 0
}

// SendTimeoutDuration bounds one submission.
func (l VendorLimits) SendTimeoutDuration() time.Duration {
	if d, err := time.ParseDuration(l.SendTimeout); err == nil && d > 0 {
		return d
	}
	return DefaultSendTimeout
}

// Gated reports whether anything but a pause applies: a cap on requests
// or submissions, or a breaker. Without these, a request only reads the
// vendor's pause.
func (l VendorLimits) Gated() bool { return l.MaxInFlight > 0 || l.Rate > 0 || l.TripAfter > 0 }

// check validates the controls; the message names the setting and how to
// write it.
func (l VendorLimits) check() error {
	switch {
	case l.MaxInFlight < 0 || l.MaxInFlight > 100000:
		return fmt.Errorf("max_in_flight = %d: give the most requests at once across all workers, 1 to 100000 (0 or none: no cap)", l.MaxInFlight)
	case math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0) || l.Rate < 0 || l.Rate > 1e6:
		return fmt.Errorf("rate = %v: give submissions per second across all workers, e.g. 2.0 or 0.5 (0 or none: no cap)", l.Rate)
	case l.Rate > 0 && l.Rate < 0.001:
		return fmt.Errorf("rate = %v is below one submission in 1000 s: give at least 0.001", l.Rate)
	case l.Burst < 0 || l.Burst > 100000:
		return fmt.Errorf("burst = %d: give the most submissions at once after a quiet spell, 1 to 100000", l.Burst)
	case l.Burst > 0 && l.Rate == 0:
		return fmt.Errorf("burst = %d needs a rate: set rate (submissions per second) too, or remove burst", l.Burst)
	case l.TripAfter < 0 || l.TripAfter > 100000:
		return fmt.Errorf("trip_after = %d: give the consecutive failures that open the breaker, 1 to 100000 (0 or none: no breaker)", l.TripAfter)
	case l.CoolDown != "" && l.TripAfter == 0:
		return fmt.Errorf("cool_down = %q needs a breaker: set trip_after too, or remove cool_down", l.CoolDown)
	}
	for _, d := range []struct{ name, v string }{{"cool_down", l.CoolDown}, {"idempotency_horizon", l.IdempotencyHorizon}, {"send_timeout", l.SendTimeout}} {
		if d.v == "" {
			continue
		}
		if _, err := positive(d.name, d.v); err != nil {
			return err
		}
	}
	if l.SendTimeout != "" {
		if d := l.SendTimeoutDuration(); d < MinSendTimeout || d > MaxSendTimeout {
			return fmt.Errorf("send_timeout = %q: give %s to %s (a send must end within the submit activity's 5-minute timeout)", l.SendTimeout, MinSendTimeout, MaxSendTimeout)
		}
	}
	if h := l.Horizon(); h > 0 && h < l.SendTimeoutDuration() {
		return fmt.Errorf("idempotency_horizon = %q is shorter than the send timeout %s: no lost send could ever be looked up; check the vendor's documentation", l.IdempotencyHorizon, l.SendTimeoutDuration())
	}
	return nil
}

// LimitsFromEnv reads the default vendor's controls from the ALLOT_VENDOR_*
// variables of DefaultVendorEnv; unset ones stay zero. A value that does
// not parse is an error that names the variable.
func LimitsFromEnv(getenv func(string) string) (VendorLimits, error) {
	var l VendorLimits
	for _, e := range DefaultVendorEnv {
		v := strings.TrimSpace(getenv(e.Env))
		if v == "" {
			continue
		}
		var err error
		switch e.Field {
		case "max_in_flight":
			l.MaxInFlight, err = strconv.Atoi(v)
		case "burst":
			l.Burst, err = strconv.Atoi(v)
		case "trip_after":
			l.TripAfter, err = strconv.Atoi(v)
		case "rate":
			l.Rate, err = strconv.ParseFloat(v, 64)
		case "cool_down":
			l.CoolDown = v
		case "idempotency_horizon":
			l.IdempotencyHorizon = v
		case "send_timeout":
			l.SendTimeout = v
		}
		if err != nil {
			return VendorLimits{}, fmt.Errorf("%s=%q is not a number: write it like the [[vendor]] setting %s", e.Env, v, e.Field)
		}
	}
	if err := l.check(); err != nil {
		return VendorLimits{}, fmt.Errorf("the default vendor's ALLOT_VENDOR_* settings: %w", err)
	}
	return l, nil
}

// fields lists the settings l gives, by their TOML names.
func (l VendorLimits) fields() []string {
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"max_in_flight", l.MaxInFlight != 0}, {"rate", l.Rate != 0}, {"burst", l.Burst != 0}, {"trip_after", l.TripAfter != 0},
		{"cool_down", l.CoolDown != ""}, {"idempotency_horizon", l.IdempotencyHorizon != ""}, {"send_timeout", l.SendTimeout != ""},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// normalizeDefault checks a [[vendor]] named "default": it carries the
// default vendor's controls only; its adapter is http, on the worker's
// ALLOT_VENDOR_URL with ALLOT_VENDOR_API_KEY(_FILE).
func (v *Vendor) normalizeDefault() error {
	if (v.Adapter != "" && v.Adapter != AdapterHTTP) || v.URL != "" || v.APIKeyEnv != "" || v.APIKeyFile != "" ||
		v.TaskQueue != "" || v.Activities != (VendorActivities{}) || v.Timeout != "" {
		return fmt.Errorf("vendor %q is reserved for the worker's %s (and %s): it carries settings only (max_in_flight, rate, burst, trip_after, cool_down, idempotency_horizon, send_timeout, bill_grace, bill_tolerance, batch_poll_every, batch_list_lag, batch_max_queued_items); remove adapter, url, api keys, task_queue, activities and timeout, or choose another name",
			v.Name, "ALLOT_VENDOR_URL", "ALLOT_VENDOR_API_KEY")
	}
	v.Adapter = AdapterHTTP
	return nil
}

// Limits are the controls of the named vendor ("" and "default": the
// default vendor); an unknown name has none.
func (s *Set) Limits(name string) VendorLimits {
	if name == "" || name == DefaultVendor {
		return s.defaultLimits
	}
	return s.vendors[name].VendorLimits
}

// WithDefaultLimits is a copy of the set whose default vendor has the
// controls env gives (from LimitsFromEnv). A setting given both there and
// in the file's [[vendor]] named "default" is refused: which one holds
// would be a guess.
func (s *Set) WithDefaultLimits(env VendorLimits) (*Set, error) {
	file := s.defaultLimits
	var both []string
	for _, f := range env.fields() {
		for _, g := range file.fields() {
			if f == g {
				both = append(both, f)
			}
		}
	}
	if len(both) > 0 {
		return nil, fmt.Errorf("the default vendor's %s is set both in ALLOT_VENDOR_* and in the pipeline file's [[vendor]] name = \"default\": keep one", strings.Join(both, ", "))
	}
	merged := file
	if env.MaxInFlight != 0 {
		merged.MaxInFlight = env.MaxInFlight
	}
	if env.Rate != 0 {
		merged.Rate = env.Rate
	}
	if env.Burst != 0 {
		merged.Burst = env.Burst
	}
	if env.TripAfter != 0 {
		merged.TripAfter = env.TripAfter
	}
	if env.CoolDown != "" {
		merged.CoolDown = env.CoolDown
	}
	if env.IdempotencyHorizon != "" {
		merged.IdempotencyHorizon = env.IdempotencyHorizon
	}
	if env.SendTimeout != "" {
		merged.SendTimeout = env.SendTimeout
	}
	if err := merged.check(); err != nil {
		return nil, fmt.Errorf("the default vendor's settings (ALLOT_VENDOR_* with [[vendor]] name = \"default\"): %w", err)
	}
	out := *s
	out.defaultLimits = merged
	return &out, nil
}

// ControlledVendors lists every vendor an operator can pause: the default
// vendor and the named ones, sorted, "default" first.
func (s *Set) ControlledVendors() []string {
	return append([]string{DefaultVendor}, s.VendorNames()...)
}
