// Package pipeline holds the definitions of recurring jobs (pipelines) and the
// calendar rules that turn a nominal time into a period.
package pipeline

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	_ "time/tzdata" // periods in named zones must not depend on the host's zoneinfo
)

// PeriodKind is the bucket that sequences count in.
type PeriodKind string

const (
	// ISOWeek buckets by ISO-8601 week, e.g. 2026-W32. It is the default.
	ISOWeek PeriodKind = "iso-week"
	// Day buckets by calendar day, e.g. 2026-08-07.
	Day PeriodKind = "day"
)

// StepKind says whether a step costs money.
type StepKind string

const (
	// Local steps run on the worker and spend nothing.
	Local StepKind = "local"
	// Paid steps submit work to a vendor.
	Paid StepKind = "paid"
	// Approval steps wait for an operator's approve or reject.
	Approval StepKind = "approval"
)

// Local step actions the worker knows how to run.
const (
	ActionPlan     = "plan"     // writes plan.json describing the episode
	ActionAssemble = "assemble" // writes manifest.json listing artifacts with their hashes
	ActionPublish  = "publish"  // writes published.json
)

var localActions = []string{ActionPlan, ActionAssemble, ActionPublish}

// Step is one stage of a pipeline, run in order.
type Step struct {
	Name   string            `toml:"name" json:"name"`
	Kind   StepKind          `toml:"kind" json:"kind"`
	Action string            `toml:"action" json:"action,omitempty"`
	Params map[string]string `toml:"params" json:"params,omitempty"`
}

// Pipeline is a named recurring job.
type Pipeline struct {
	Name         string     `toml:"name" json:"name"`
	Period       PeriodKind `toml:"period" json:"period"`
	TimeZone     string     `toml:"time_zone" json:"time_zone"`
	MaxPerPeriod int        `toml:"max_episodes_per_period" json:"max_episodes_per_period,omitempty"`
	// AutoApprove passes approval steps without an operator (demos, tests).
	AutoApprove bool   `toml:"auto_approve" json:"auto_approve,omitempty"`
	Steps       []Step `toml:"step" json:"steps"`
	// Schedule is the pipeline's Temporal Schedule; optional.
	Schedule *Schedule `toml:"schedule" json:"schedule,omitempty"`
	// NominalTimeMin and NominalTimeMaxAhead bound the nominal times a run
	// may have: not before NominalTimeMin (RFC3339, default
	// DefaultNominalTimeMin) and not more than NominalTimeMaxAhead past now
	// (default DefaultNominalTimeMaxAhead). A time outside is refused before
	// anything is started.
	NominalTimeMin      string `toml:"nominal_time_min" json:"nominal_time_min,omitempty"`
	NominalTimeMaxAhead string `toml:"nominal_time_max_ahead" json:"nominal_time_max_ahead,omitempty"`

	location *time.Location
	minTime  time.Time
	maxAhead time.Duration
}

// Defaults of the nominal time window.
const (
	DefaultNominalTimeMin      = "2000-01-01T00:00:00Z"
	DefaultNominalTimeMaxAhead = 366 * 24 * time.Hour
)

var (
	namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	stepPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
)

// ValidateName reports whether name is a valid pipeline name.
func ValidateName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("pipeline name %q is invalid: use 1-63 lowercase letters, digits and '-', starting with a letter or digit (pattern %s)", name, namePattern)
	}
	return nil
}

// normalize fills defaults and validates; it is applied by Load and Parse.
func (p *Pipeline) normalize() error {
	if err := ValidateName(p.Name); err != nil {
		return err
	}
	if p.Period == "" {
		p.Period = ISOWeek
	}
	if p.Period != ISOWeek && p.Period != Day {
		return fmt.Errorf("pipeline %q: period %q is unknown: use %q or %q", p.Name, p.Period, ISOWeek, Day)
	}
	if p.TimeZone == "" {
		p.TimeZone = "UTC"
	}
	loc, err := time.LoadLocation(p.TimeZone)
	if err != nil {
		return fmt.Errorf("pipeline %q: time_zone %q is not an IANA zone name (e.g. \"Europe/Berlin\"): %v", p.Name, p.TimeZone, err)
	}
	p.location = loc
	if err := p.normalizeWindow(); err != nil {
		return err
	}
	if p.MaxPerPeriod < 0 {
		return fmt.Errorf("pipeline %q: max_episodes_per_period is %d: use 0 for no cap or a positive number", p.Name, p.MaxPerPeriod)
	}
	if len(p.Steps) == 0 {
		return fmt.Errorf("pipeline %q has no steps: add at least one [[pipeline.step]]", p.Name)
	}
	if p.Schedule != nil {
		if _, err := p.Schedule.Spec(); err != nil {
			return fmt.Errorf("pipeline %q: schedule: %w", p.Name, err)
		}
	}
	seen := map[string]bool{}
	for i := range p.Steps {
		s := &p.Steps[i]
		if !stepPattern.MatchString(s.Name) {
			return fmt.Errorf("pipeline %q: step %d name %q is invalid: use lowercase letters, digits and '-'", p.Name, i+1, s.Name)
		}
		if seen[s.Name] {
			return fmt.Errorf("pipeline %q: step %q appears twice: step names must be unique", p.Name, s.Name)
		}
		seen[s.Name] = true
		switch s.Kind {
		case Local:
			if s.Action == "" {
				s.Action = s.Name
			}
			if !contains(localActions, s.Action) {
				return fmt.Errorf("pipeline %q: step %q has unknown local action %q: use one of %s", p.Name, s.Name, s.Action, strings.Join(localActions, ", "))
			}
		case Paid:
			// For a paid step the action is the vendor's task kind.
			if s.Action == "" {
				s.Action = s.Name
			}
		case Approval:
			if s.Action != "" || len(s.Params) > 0 {
				return fmt.Errorf("pipeline %q: approval step %q takes no action or params: remove them", p.Name, s.Name)
			}
		default:
			return fmt.Errorf("pipeline %q: step %q has kind %q: use %q, %q or %q", p.Name, s.Name, s.Kind, Local, Paid, Approval)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (p *Pipeline) normalizeWindow() error {
	min := p.NominalTimeMin
	if min == "" {
		min = DefaultNominalTimeMin
	}
	t, err := time.Parse(time.RFC3339, min)
	if err != nil {
		return fmt.Errorf("pipeline %q: nominal_time_min %q is not an RFC3339 time (e.g. %q)", p.Name, p.NominalTimeMin, DefaultNominalTimeMin)
	}
	p.minTime = t
	p.maxAhead = DefaultNominalTimeMaxAhead
	if p.NominalTimeMaxAhead != "" {
		d, err := time.ParseDuration(p.NominalTimeMaxAhead)
		if err != nil || d <= 0 {
			return fmt.Errorf("pipeline %q: nominal_time_max_ahead %q is not a positive duration (e.g. \"8760h\")", p.Name, p.NominalTimeMaxAhead)
		}
		p.maxAhead = d
	}
	return nil
}

// CheckNominalTime refuses a nominal time that no real run of the pipeline
// can have: the zero time, one before the pipeline's nominal_time_min, or
// one more than nominal_time_max_ahead after now. The error names the
// window and the settings that move it.
func (p *Pipeline) CheckNominalTime(t, now time.Time) error {
	min, maxAhead := p.minTime, p.maxAhead
	if min.IsZero() {
		min, _ = time.Parse(time.RFC3339, DefaultNominalTimeMin)
	}
	if maxAhead == 0 {
		maxAhead = DefaultNominalTimeMaxAhead
	}
	switch {
	case t.IsZero():
		return fmt.Errorf("pipeline %s: the nominal time is the zero time: give the time the run was planned for", p.Name)
	case t.Before(min):
		return fmt.Errorf("pipeline %s: nominal time %s is before %s: check the time, or lower the pipeline's nominal_time_min", p.Name, t.UTC().Format(time.RFC3339), min.Format(time.RFC3339))
	case t.After(now.Add(maxAhead)):
		return fmt.Errorf("pipeline %s: nominal time %s is more than %s ahead of now (%s): check the time, or raise the pipeline's nominal_time_max_ahead", p.Name, t.UTC().Format(time.RFC3339), maxAhead, now.UTC().Format(time.RFC3339))
	}
	return nil
}

// Location is the pipeline's time zone.
func (p *Pipeline) Location() *time.Location {
	if p.location == nil {
		return time.UTC
	}
	return p.location
}

// PeriodOf returns the period the nominal time t falls in, in the pipeline's zone.
func (p *Pipeline) PeriodOf(t time.Time) string {
	return PeriodOf(p.Period, t.In(p.Location()))
}

// Step returns the named step.
func (p *Pipeline) Step(name string) (Step, bool) {
	for _, s := range p.Steps {
		if s.Name == name {
			return s, true
		}
	}
	return Step{}, false
}

// StepNames lists the step names in order.
func (p *Pipeline) StepNames() []string {
	names := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		names[i] = s.Name
	}
	return names
}

// PaidStepNames lists the paid steps in order.
func (p *Pipeline) PaidStepNames() []string {
	var names []string
	for _, s := range p.Steps {
		if s.Kind == Paid {
			names = append(names, s.Name)
		}
	}
	return names
}

// PeriodOf formats the period of kind k that t falls in, using t's own location.
func PeriodOf(k PeriodKind, t time.Time) string {
	switch k {
	case Day:
		return t.Format("2006-01-02")
	default:
		year, week := t.ISOWeek()
		return fmt.Sprintf("%04d-W%02d", year, week)
	}
}

// Plan is what an episode is pinned to when it is allocated: the pipeline's
// steps (names, kinds, actions, params) in order, as JSON. An episode runs
// its pinned plan even after the pipeline file changes (invariant 14 of
// docs/design.md).
func (p *Pipeline) Plan() string {
	data, err := json.Marshal(p.Steps)
	if err != nil {
		// Steps are strings and string maps: they always encode.
		panic(fmt.Sprintf("pipeline %q: encode the plan: %v", p.Name, err))
	}
	return string(data)
}

// WithPlan returns a copy of p that runs the pinned plan instead of the
// steps configured now.
func (p *Pipeline) WithPlan(plan string) (*Pipeline, error) {
	var steps []Step
	if err := json.Unmarshal([]byte(plan), &steps); err != nil {
		return nil, fmt.Errorf("pipeline %q: the pinned plan is not a list of steps: %w", p.Name, err)
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("pipeline %q: the pinned plan has no steps", p.Name)
	}
	seen := map[string]bool{}
	for _, s := range steps {
		if s.Name == "" || seen[s.Name] {
			return nil, fmt.Errorf("pipeline %q: the pinned plan names step %q twice or not at all", p.Name, s.Name)
		}
		seen[s.Name] = true
	}
	cp := *p
	cp.Steps = steps
	return &cp, nil
}
