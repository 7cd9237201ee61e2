package pipeline

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"allot"
)

// CatchUp is a schedule's catch-up policy: which of the times it missed
// (its run began later than the jitter and catch_up_grace allow, because
// workers or the server were down, or the schedule was paused) still run.
// The others are recorded as skipped, reason missed_catch_up
// (docs/design.md, "Catch-up").
type CatchUp struct {
	Mode string `json:"mode"` // allot.CatchUpSkip, CatchUpLatest, CatchUpAll or CatchUpUpTo
	N    int    `json:"n,omitempty"`
}

// Defaults and bounds of catch-up.
const (
	// DefaultCatchUpGrace lets a run begin five minutes late (a worker's
	// deploy, a busy queue) and still be on time.
	DefaultCatchUpGrace = 5 * time.Minute
	// MinCatchUpGrace is the least grace: a run that begins within it is
	// never a missed one, so a ScheduledRun that begins that soon asks
	// nothing (workflows.ScheduledRun).
	MinCatchUpGrace = time.Second
	// MaxCatchUpN bounds up_to:N.
	MaxCatchUpN = 10_000
)

// ParseCatchUp reads a catch_up setting; "" is "all".
func ParseCatchUp(s string) (CatchUp, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	switch v {
	case "", allot.CatchUpAll:
		return CatchUp{Mode: allot.CatchUpAll}, nil
	case allot.CatchUpSkip, allot.CatchUpLatest:
		return CatchUp{Mode: v}, nil
	}
	if rest, ok := strings.CutPrefix(v, allot.CatchUpUpTo+":"); ok {
		n, err := strconv.Atoi(rest)
		if err == nil && n >= 1 && n <= MaxCatchUpN {
			return CatchUp{Mode: allot.CatchUpUpTo, N: n}, nil
		}
	}
	return CatchUp{}, fmt.Errorf("catch_up %q is not a policy: use \"skip\", \"latest\", \"all\" or \"up_to:N\" with N from 1 to %d (e.g. catch_up = \"up_to:3\")", s, MaxCatchUpN)
}

// String is the policy as configured.
func (c CatchUp) String() string {
	if c.Mode == allot.CatchUpUpTo {
		return fmt.Sprintf("%s:%d", c.Mode, c.N)
	}
	if c.Mode == "" {
		return allot.CatchUpAll
	}
	return c.Mode
}

// Runs says whether a missed time runs, given how many later times were
// missed too (0: it is the latest missed one).
func (c CatchUp) Runs(laterMissed int) bool {
	switch c.Mode {
	case allot.CatchUpSkip:
		return false
	case allot.CatchUpLatest:
		return laterMissed == 0
	case allot.CatchUpUpTo:
		return laterMissed < c.N
	}
	return true
}

// countLimit is how many later missed times Runs needs counted to decide:
// none for all and skip.
func (c CatchUp) countLimit() int {
	switch c.Mode {
	case allot.CatchUpLatest:
		return 1
	case allot.CatchUpUpTo:
		return c.N
	}
	return 0
}

// MissedBy is the time after which a run of nominal that has not begun
// missed its time: the jitter may delay its start, and the grace more.
func (s ScheduleSpec) MissedBy(nominal time.Time) time.Time {
	return nominal.Add(s.Jitter + s.CatchUpGrace)
}

// CatchUpDecision is what a schedule's catch-up policy does with one
// nominal time whose run begins at a given moment.
type CatchUpDecision struct {
	// Missed: the run begins after MissedBy.
	Missed bool `json:"missed"`
	// LaterMissed counts the spec's later times missed by then too, up
	// to what the policy needs to know.
	LaterMissed int  `json:"later_missed"`
	Run         bool `json:"run"`
}

// DecideCatchUp applies the policy to a run of nominal that begins at now.
// zone is the pipeline's time zone (a cron spec's).
func (s ScheduleSpec) DecideCatchUp(zone string, nominal, now time.Time) (CatchUpDecision, error) {
	if !now.After(s.MissedBy(nominal)) {
		return CatchUpDecision{Run: true}, nil
	}
	d := CatchUpDecision{Missed: true}
	if limit := s.CatchUp.countLimit(); limit > 0 {
		later, err := s.Times(zone, nominal, now.Add(-(s.Jitter + s.CatchUpGrace)), limit)
		if err != nil {
			return CatchUpDecision{}, err
		}
		d.LaterMissed = len(later)
	}
	d.Run = s.CatchUp.Runs(d.LaterMissed)
	return d, nil
}

// Times lists the spec's nominal times in (after, until], in UTC, at most
// limit of them (limit <= 0: all). A cron spec runs in zone; an interval is
// aligned to the Unix epoch, as Temporal aligns one without an offset.
func (s ScheduleSpec) Times(zone string, after, until time.Time, limit int) ([]time.Time, error) {
	var out []time.Time
	full := func() bool { return limit > 0 && len(out) >= limit }
	switch {
	case s.Interval > 0:
		epoch := time.Unix(0, 0).UTC()
		since := after.Sub(epoch)
		t := epoch.Add(since - since%s.Interval)
		if !t.After(after) {
			t = t.Add(s.Interval)
		}
		for ; !t.After(until) && !full(); t = t.Add(s.Interval) {
			out = append(out, t.UTC())
		}
	case s.Cron != "":
		expr := s.Cron
		if zone != "" {
			expr = "CRON_TZ=" + zone + " " + expr
		}
		sched, err := cron.ParseStandard(expr)
		if err != nil {
			return nil, fmt.Errorf("cron %q in zone %q: %v", s.Cron, zone, err)
		}
		for t := sched.Next(after); !t.IsZero() && !t.After(until) && !full(); t = sched.Next(t) {
			out = append(out, t.UTC())
		}
	default:
		return nil, fmt.Errorf("the schedule has no timing: set cron or interval")
	}
	return out, nil
}
