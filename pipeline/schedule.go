package pipeline

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// OverlapPolicies are the overlap policies a schedule may use, by their
// names in config and flags.
var OverlapPolicies = []string{"allow_all", "buffer_all", "buffer_one", "skip", "cancel_other", "terminate_other"}

// DefaultOverlap runs every nominal time as its own ScheduledRun at once.
// ScheduledRuns are short and keyed by nominal time, and the ledger's lock
// serialises their allocations, so nothing needs to wait and no nominal time
// is dropped (skip would drop one, and only the schedule's counters would
// know).
const DefaultOverlap = "allow_all"

// MinCatchupWindow is Temporal's lower bound for a schedule's catch-up window.
const MinCatchupWindow = 10 * time.Second

// Schedule is a pipeline's Temporal Schedule, as configured.
type Schedule struct {
	Cron          string `toml:"cron" json:"cron,omitempty"`
	Interval      string `toml:"interval" json:"interval,omitempty"`
	Jitter        string `toml:"jitter" json:"jitter,omitempty"`
	Overlap       string `toml:"overlap" json:"overlap,omitempty"`
	CatchupWindow string `toml:"catchup_window" json:"catchup_window,omitempty"`
	MaxBackfill   string `toml:"max_backfill" json:"max_backfill,omitempty"`
	// MaxBackfillRuns is how many runs one backfill may start without
	// --yes (0: DefaultMaxBackfillRuns).
	MaxBackfillRuns int `toml:"max_backfill_runs" json:"max_backfill_runs,omitempty"`
	// CatchUp is what the schedule runs of the times it missed: "skip",
	// "latest", "all" (default) or "up_to:N" (see CatchUp).
	CatchUp string `toml:"catch_up" json:"catch_up,omitempty"`
	// CatchUpGrace is how late (beyond the jitter) a scheduled run may
	// begin and still count as on time (default DefaultCatchUpGrace).
	CatchUpGrace string `toml:"catch_up_grace" json:"catch_up_grace,omitempty"`
}

// ScheduleSpec is a validated schedule, ready to send.
type ScheduleSpec struct {
	Cron          string        `json:"cron,omitempty"`
	Interval      time.Duration `json:"interval,omitempty"`
	Jitter        time.Duration `json:"jitter"`
	Overlap       string        `json:"overlap"`
	CatchupWindow time.Duration `json:"catchup_window"`
	MaxBackfill   time.Duration `json:"max_backfill"`
	// MaxBackfillRuns: a backfill that would start more runs needs --yes.
	MaxBackfillRuns int           `json:"max_backfill_runs"`
	CatchUp         CatchUp       `json:"catch_up"`
	CatchUpGrace    time.Duration `json:"catch_up_grace"`
}

// Defaults of a schedule's settings.
const (
	DefaultCatchupWindow = 24 * time.Hour
	DefaultMaxBackfill   = 90 * 24 * time.Hour
)

// DefaultMaxBackfillRuns is how many runs one backfill may start without
// the operator's explicit consent (--yes).
const DefaultMaxBackfillRuns = 100

// Merge lays override's non-empty fields over s. Setting a cron clears the
// interval and the other way round; an override that sets both keeps both,
// so that Spec refuses it instead of silently dropping one.
func (s Schedule) Merge(override Schedule) Schedule {
	switch {
	case override.Cron != "" && override.Interval != "":
		s.Cron, s.Interval = override.Cron, override.Interval
	case override.Cron != "":
		s.Cron, s.Interval = override.Cron, ""
	case override.Interval != "":
		s.Interval, s.Cron = override.Interval, ""
	}
	if override.Jitter != "" {
		s.Jitter = override.Jitter
	}
	if override.Overlap != "" {
		s.Overlap = override.Overlap
	}
	if override.CatchupWindow != "" {
		s.CatchupWindow = override.CatchupWindow
	}
	if override.MaxBackfill != "" {
		s.MaxBackfill = override.MaxBackfill
	}
	if override.MaxBackfillRuns != 0 {
		s.MaxBackfillRuns = override.MaxBackfillRuns
	}
	if override.CatchUp != "" {
		s.CatchUp = override.CatchUp
	}
	if override.CatchUpGrace != "" {
		s.CatchUpGrace = override.CatchUpGrace
	}
	return s
}

// Spec validates the schedule; every error names the setting and the fix.
func (s Schedule) Spec() (ScheduleSpec, error) {
	var out ScheduleSpec
	switch {
	case s.Cron == "" && s.Interval == "":
		return out, fmt.Errorf("the schedule has no timing: set cron (e.g. \"0 2 * * MON\") or interval (e.g. \"168h\") in the pipeline's [pipeline.schedule], or pass --cron / --interval")
	case s.Cron != "" && s.Interval != "":
		return out, fmt.Errorf("the schedule has both cron %q and interval %q: keep one", s.Cron, s.Interval)
	case s.Cron != "":
		if _, err := cron.ParseStandard(s.Cron); err != nil {
			return out, fmt.Errorf("cron %q is not a cron expression (minute hour day-of-month month day-of-week, e.g. \"0 2 * * MON\"): %v", s.Cron, err)
		}
		out.Cron = s.Cron
	default:
		d, err := positive("interval", s.Interval)
		if err != nil {
			return out, err
		}
		if d < time.Second {
			return out, fmt.Errorf("interval %s is under a second: a schedule acts at most once a second", d)
		}
		out.Interval = d
	}
	var err error
	if out.Jitter, err = nonNegative("jitter", s.Jitter, 0); err != nil {
		return out, err
	}
	if out.CatchupWindow, err = nonNegative("catchup_window", s.CatchupWindow, DefaultCatchupWindow); err != nil {
		return out, err
	}
	if out.CatchupWindow < MinCatchupWindow {
		return out, fmt.Errorf("catchup_window %s is under Temporal's minimum of %s", out.CatchupWindow, MinCatchupWindow)
	}
	if out.MaxBackfill, err = nonNegative("max_backfill", s.MaxBackfill, DefaultMaxBackfill); err != nil {
		return out, err
	}
	if out.MaxBackfillRuns, err = s.MaxBackfillRunCount(); err != nil {
		return out, err
	}
	if out.CatchUp, err = ParseCatchUp(s.CatchUp); err != nil {
		return out, err
	}
	if out.CatchUpGrace, err = nonNegative("catch_up_grace", s.CatchUpGrace, DefaultCatchUpGrace); err != nil {
		return out, err
	}
	if out.CatchUpGrace < MinCatchUpGrace {
		return out, fmt.Errorf("catch_up_grace %s is under %s: a scheduled run may always begin that late and be on time; write e.g. catch_up_grace = \"5m\"", out.CatchUpGrace, MinCatchUpGrace)
	}
	out.Overlap = strings.ReplaceAll(strings.ToLower(s.Overlap), "-", "_")
	if out.Overlap == "" {
		out.Overlap = DefaultOverlap
	}
	if !contains(OverlapPolicies, out.Overlap) {
		return out, fmt.Errorf("overlap policy %q is unknown: use one of %s", s.Overlap, strings.Join(OverlapPolicies, ", "))
	}
	return out, nil
}

// MaxBackfillRunCount is how many runs one backfill may start without
// --yes.
func (s Schedule) MaxBackfillRunCount() (int, error) {
	switch {
	case s.MaxBackfillRuns < 0:
		return 0, fmt.Errorf("max_backfill_runs %d is negative: give how many runs one backfill may start without --yes (default %d)", s.MaxBackfillRuns, DefaultMaxBackfillRuns)
	case s.MaxBackfillRuns == 0:
		return DefaultMaxBackfillRuns, nil
	}
	return s.MaxBackfillRuns, nil
}

// MaxBackfillDuration is the longest range one backfill may cover.
func (s Schedule) MaxBackfillDuration() (time.Duration, error) {
	return nonNegative("max_backfill", s.MaxBackfill, DefaultMaxBackfill)
}

func positive(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s %q is not a positive duration: write it like 90s, 15m or 168h", name, v)
	}
	return d, nil
}

func nonNegative(name, v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a duration: write it like 30s, 10m or 24h", name, v)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s %q must not be negative: write 0s for none, or a delay like 30s, 10m or 24h", name, v)
	}
	return d, nil
}
