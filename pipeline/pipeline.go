// Package pipeline reads the pipeline file (TOML; pipelines.toml here is
// the embedded default and the documented example of every field) into a
// Set: the recurring jobs (pipelines) with their steps, inputs, schedules
// and catch-up policies, the vendors their paid and effect steps name with
// those vendors' controls, and the budgets that cover them. It also holds
// the calendar rules that turn a nominal time into a period.
package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // periods in named zones must not depend on the host's zoneinfo

	"allot"
	"allot/internal/execstep"
)

// PeriodKind is the bucket that sequences count in.
type PeriodKind string

const (
	// ISOWeek buckets by ISO-8601 week, e.g. 2026-W32. It is the default.
	ISOWeek PeriodKind = "iso-week"
	// Day buckets by calendar day, e.g. 2026-08-07.
	Day PeriodKind = "day"
)

// StepKind is the vocabulary's step kind (allot.StepKind), whose rules
// are its methods. The short names below are this package's own: every
// other package says allot.KindPaid and so on.
type StepKind = allot.StepKind

const (
	Local    = allot.KindLocal
	Go       = allot.KindGo
	Exec     = allot.KindExec
	Activity = allot.KindActivity
	Paid     = allot.KindPaid
	Effect   = allot.KindEffect
	Approval = allot.KindApproval
)

// Local step actions the worker knows how to run.
const (
	ActionPlan     = "plan"     // writes plan.json describing the episode
	ActionAssemble = "assemble" // writes manifest.json listing artifacts with their hashes
	ActionPublish  = "publish"  // writes published.json
)

var localActions = []string{ActionPlan, ActionAssemble, ActionPublish}

// DefaultRetryExitCode is the exit code by which an exec step asks to be
// run again later (EX_TEMPFAIL of sysexits.h).
const DefaultRetryExitCode = 75

// Step is one stage of a pipeline, run in order. Which fields apply depends
// on the kind; the others must be left out.
type Step struct {
	Name string   `toml:"name" json:"name"`
	Kind StepKind `toml:"kind" json:"kind"`
	// Action is, for local steps, the built-in step (plan, assemble,
	// publish); for go steps, the registered function (also written
	// func); for paid and effect steps, the vendor's task kind. It
	// defaults to the step's name.
	Action string            `toml:"action" json:"action,omitempty"`
	Func   string            `toml:"func" json:"-"`
	Params map[string]string `toml:"params" json:"params,omitempty"`
	// Vendor names the [[vendor]] of a paid or effect step; "" is the
	// worker's default vendor (ALLOT_VENDOR_URL).
	Vendor string `toml:"vendor" json:"vendor,omitempty"`
	// Command is an exec step's program and arguments; the placeholders
	// of Placeholders are replaced. A program path with a slash that is
	// not absolute is relative to the pipeline file's directory; one
	// without is looked up in the worker's PATH.
	Command []string `toml:"command" json:"command,omitempty"`
	// Outputs are the files (relative to the episode's directory) an exec
	// step writes; each is hashed and recorded.
	Outputs []string `toml:"outputs" json:"outputs,omitempty"`
	// Env names the worker's environment variables an exec step gets on
	// top of PATH, HOME, LANG, TZ and its ALLOT_* variables. It is read
	// from the pipeline file, not pinned with the plan: it describes the
	// worker's machine, like PATH, and a fix to it applies to a retry.
	Env []string `toml:"env" json:"-"`
	// RetryExitCodes are the exit codes that mean "run me again later"
	// (default 75); any other non-zero exit parks the episode.
	RetryExitCodes []int `toml:"retry_exit_codes" json:"retry_exit_codes,omitempty"`
	// Timeout bounds one run of an exec or activity step (default 10m).
	Timeout string `toml:"timeout" json:"timeout,omitempty"`
	// Activity and TaskQueue name an activity step's activity type and
	// the queue its worker polls; Heartbeat is its heartbeat timeout
	// (none by default) and Retry its retry policy.
	Activity  string `toml:"activity" json:"activity,omitempty"`
	TaskQueue string `toml:"task_queue" json:"task_queue,omitempty"`
	Heartbeat string `toml:"heartbeat" json:"heartbeat,omitempty"`
	Retry     *Retry `toml:"retry" json:"retry,omitempty"`
	// MaxCost is the most one task of a paid (or effect) step may cost:
	// what a budget reserves for it when its vendor gives no quote. It is
	// pinned with the plan, so a later change applies to new episodes only.
	MaxCost *allot.Money `toml:"max_cost" json:"max_cost,omitempty"`
	// Batch sends a paid step's tasks in the vendor's batches, at its
	// batch price, with hours of latency (docs/design.md, "Batches"):
	// items of the step from many episodes go into one batch, closed at
	// BatchMaxItems items or when its first item has waited BatchMaxWait.
	// Pinned with the plan. A batch_max_items of 0 is never written out
	// (omitzero): written, it is refused (explicitZeros).
	Batch         bool   `toml:"batch" json:"batch,omitempty"`
	BatchMaxItems int    `toml:"batch_max_items,omitzero" json:"batch_max_items,omitempty"`
	BatchMaxWait  string `toml:"batch_max_wait" json:"batch_max_wait,omitempty"`
}

// Batch defaults: a batch closes at DefaultBatchMaxItems items or when its
// first item has waited DefaultBatchMaxWait; MaxBatchItems is the most a
// vendor takes in one batch (OpenAI's 50,000; Anthropic's 100,000).
const (
	DefaultBatchMaxItems = 1000
	DefaultBatchMaxWait  = time.Hour
	MaxBatchItems        = 50000
)

// BatchMaxWaitDuration is the step's batch_max_wait, or its default.
func (s Step) BatchMaxWaitDuration() time.Duration {
	if d, err := time.ParseDuration(s.BatchMaxWait); err == nil && d > 0 {
		return d
	}
	return DefaultBatchMaxWait
}

// BatchMaxItemsOrDefault is the step's batch_max_items, or its default.
func (s Step) BatchMaxItemsOrDefault() int {
	if s.BatchMaxItems > 0 {
		return s.BatchMaxItems
	}
	return DefaultBatchMaxItems
}

// Retry is an activity step's retry policy. Unset fields take Temporal's
// defaults (1 s, x2, 100 x the initial interval, unlimited attempts).
type Retry struct {
	InitialInterval    string  `toml:"initial_interval" json:"initial_interval,omitempty"`
	BackoffCoefficient float64 `toml:"backoff_coefficient" json:"backoff_coefficient,omitempty"`
	MaximumInterval    string  `toml:"maximum_interval" json:"maximum_interval,omitempty"`
	MaximumAttempts    int     `toml:"maximum_attempts" json:"maximum_attempts,omitempty"`
}

// DefaultStepTimeout bounds one run of an exec or activity step that names
// no timeout.
const DefaultStepTimeout = 10 * time.Minute

// TimeoutDuration is the step's timeout, or DefaultStepTimeout.
func (s Step) TimeoutDuration() time.Duration {
	if d, err := time.ParseDuration(s.Timeout); err == nil && d > 0 {
		return d
	}
	return DefaultStepTimeout
}

// RetryExitCodeList is the step's retry exit codes, or the default.
func (s Step) RetryExitCodeList() []int {
	if len(s.RetryExitCodes) > 0 {
		return s.RetryExitCodes
	}
	return []int{DefaultRetryExitCode}
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
	// PeriodOffset shifts the nominal time before its period is computed,
	// so that a job run at 00:05 to settle the day before is that day's
	// episode: "-1d" (calendar days in the pipeline's zone, right across
	// DST changes) or a duration ("-6h"). The allocation key stays the
	// nominal time.
	PeriodOffset string `toml:"period_offset" json:"period_offset,omitempty"`
	// StallAfter is how long a step may keep retrying before `starter
	// stats` and the allot_episodes_stalled gauge report its episode as
	// stalled (a duration, default DefaultStallAfter).
	StallAfter string `toml:"stall_after" json:"stall_after,omitempty"`
	// Inputs, when set, makes the pipeline consume inputs (`starter input
	// add`): each new episode claims one in its allocation, and a run with
	// none ready is skipped (no_ready_input).
	Inputs *Inputs `toml:"inputs" json:"inputs,omitempty"`
	// Deadline is when each period's work is due, as an offset from the
	// period's start in the pipeline's zone: calendar days, then
	// wall-clock time ("4d9h": Friday 09:00 of an ISO week). A period
	// short of DeadlineEpisodes completed episodes (default 1) then is
	// recorded as late, with its cause; WarnBefore (a duration) records a
	// warning that long before. See docs/design.md, "Period deadlines".
	// A deadline_episodes of 0 is never written out: written, it is refused.
	Deadline         string `toml:"deadline" json:"deadline,omitempty"`
	DeadlineEpisodes int    `toml:"deadline_episodes,omitzero" json:"deadline_episodes,omitempty"`
	WarnBefore       string `toml:"warn_before" json:"warn_before,omitempty"`

	// dir is the directory of the pipeline file, which relative command
	// paths start from; "" for a file that was not loaded from a path.
	dir        string
	location   *time.Location
	offsetDays int
	offset     time.Duration
	minTime    time.Time
	maxAhead   time.Duration
	stallAfter time.Duration

	deadlineDays  int
	deadlineClock time.Duration
	warnBefore    time.Duration
}

// DefaultStallAfter is how long a step may keep retrying before its episode
// is reported as stalled.
const DefaultStallAfter = 15 * time.Minute

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

// Inputs is how a pipeline consumes inputs.
type Inputs struct {
	// Claim is the policy: ClaimOldestReady (the default and, for now,
	// the only one).
	Claim string `toml:"claim" json:"claim"`
}

// ClaimOldestReady means a new episode claims the input with the earliest
// ready time (then the smallest reference) that is ready by the run's
// nominal time.
const ClaimOldestReady = "oldest_ready"

// ClaimsInputs reports whether the pipeline's episodes claim inputs.
func (p *Pipeline) ClaimsInputs() bool { return p.Inputs != nil }

// normalize fills defaults and validates; it is applied by Load and Parse.
func (p *Pipeline) normalize() error {
	if err := ValidateName(p.Name); err != nil {
		return err
	}
	if p.Inputs != nil {
		if p.Inputs.Claim == "" {
			p.Inputs.Claim = ClaimOldestReady
		}
		if p.Inputs.Claim != ClaimOldestReady {
			return fmt.Errorf("pipeline %q: inputs.claim %q is unknown: use %q", p.Name, p.Inputs.Claim, ClaimOldestReady)
		}
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
	if err == nil && loc == time.Local {
		// "Local" is whatever zone the host is set to: workers and
		// starters on other hosts would count other periods.
		err = errors.New(`"Local" is the host's zone, not a named one`)
	}
	if err != nil {
		return fmt.Errorf("pipeline %q: time_zone %q is not an IANA zone name (e.g. \"Europe/Berlin\"): %v", p.Name, p.TimeZone, err)
	}
	p.location = loc
	if err := p.normalizeWindow(); err != nil {
		return err
	}
	if err := p.normalizeOffset(); err != nil {
		return err
	}
	p.stallAfter = DefaultStallAfter
	if p.StallAfter != "" {
		d, err := time.ParseDuration(p.StallAfter)
		if err != nil || d <= 0 {
			return fmt.Errorf("pipeline %q: stall_after %q is not a positive duration (e.g. \"15m\")", p.Name, p.StallAfter)
		}
		p.stallAfter = d
	}
	if p.MaxPerPeriod < 0 {
		return fmt.Errorf("pipeline %q: max_episodes_per_period is %d: use 0 for no cap or a positive number", p.Name, p.MaxPerPeriod)
	}
	if err := p.normalizeDeadline(); err != nil {
		return err
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
		if err := s.normalize(); err != nil {
			return fmt.Errorf("pipeline %q: step %q: %w", p.Name, s.Name, err)
		}
		if err := p.checkPlaceholders(*s); err != nil {
			return fmt.Errorf("pipeline %q: step %q: %w", p.Name, s.Name, err)
		}
		if err := p.checkBatchWait(*s); err != nil {
			return fmt.Errorf("pipeline %q: step %q: %w", p.Name, s.Name, err)
		}
	}
	return nil
}

// Placeholders are the names an exec step's command may use in braces
// ({period}): the episode's, the step's params as param.NAME, and input
// for a pipeline that consumes inputs. The worker gives each also as an
// ALLOT_* variable.
func (p *Pipeline) Placeholders(s Step) []string {
	names := []string{"pipeline", "episode", "period", "sequence", "key", "nominal_time", "dir", "revision", "step", "idempotency_key"}
	if p.ClaimsInputs() {
		names = append(names, "input")
	}
	for _, k := range slices.Sorted(maps.Keys(s.Params)) {
		names = append(names, "param."+k)
	}
	return names
}

// checkPlaceholders refuses an exec step whose command names a placeholder
// that no episode has, before any episode runs it.
func (p *Pipeline) checkPlaceholders(s Step) error {
	if s.Kind != Exec {
		return nil
	}
	used, err := execstep.Placeholders(s.Command)
	if err != nil {
		return fmt.Errorf("command: %w", err)
	}
	known := p.Placeholders(s)
	for _, name := range used {
		if slices.Contains(known, name) {
			continue
		}
		valid := make([]string, len(known))
		for i, k := range known {
			valid[i] = "{" + k + "}"
		}
		hint := ""
		switch param, isParam := strings.CutPrefix(name, "param."); {
		case isParam:
			hint = fmt.Sprintf(": add %s to the step's params, or use", param)
		case name == "input":
			hint = ": {input} is the claimed input of a pipeline with [pipeline.inputs]; use"
		default:
			hint = ", which is not a placeholder: use"
		}
		return fmt.Errorf("command names {%s}%s one of %s (write {{ and }} for literal braces)", name, hint, strings.Join(valid, ", "))
	}
	return nil
}

// checkOutput refuses an output that is not a file path inside the
// episode's directory: empty, absolute, the directory itself ("." or
// "a/.."), or above it ("../x"). A name that only starts with two dots
// ("..data.csv") is a file like any other.
func checkOutput(o string) error {
	if !filepath.IsLocal(o) || filepath.Clean(o) == "." {
		return fmt.Errorf("output %q must be a file path inside the episode's directory, e.g. \"settlement.csv\" or \"out/settlement.csv\"", o)
	}
	return nil
}

// AlwaysPassedEnv are the worker's variables every exec step gets, besides
// its own ALLOT_* variables and the names its env lists.
var AlwaysPassedEnv = []string{"PATH", "HOME", "LANG", "TZ"}

var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkEnv refuses env names an exec step must not take from the worker:
// allot's own settings (ALLOT_*; the step's ALLOT_* variables are given
// anyway) and Temporal's connection and credentials (TEMPORAL_*). The
// vendors' key variables are refused by the set (checkExecEnv).
func checkEnv(names []string) error {
	seen := map[string]bool{}
	for _, name := range names {
		switch {
		case !envNamePattern.MatchString(name):
			return fmt.Errorf("env %q is not a variable name: use letters, digits and '_', not starting with a digit", name)
		case seen[name]:
			return fmt.Errorf("env names %s twice", name)
		case slices.Contains(AlwaysPassedEnv, name):
			return fmt.Errorf("env names %s, which every exec step gets (%s): remove it", name, strings.Join(AlwaysPassedEnv, ", "))
		case strings.HasPrefix(name, "ALLOT_"):
			return fmt.Errorf("env names %s: ALLOT_* variables are the worker's settings and keys, never a step's; the step gets its own ALLOT_* variables anyway: remove it", name)
		case strings.HasPrefix(name, "TEMPORAL_"):
			return fmt.Errorf("env names %s: TEMPORAL_* variables hold the worker's Temporal connection and credentials, which exec steps never get: remove it", name)
		}
		seen[name] = true
	}
	return nil
}

// CommandPath is where the worker finds an exec step's program: a path
// with a slash that is not absolute is relative to the pipeline file's
// directory (the worker's working directory for a file parsed from
// memory); a bare name is left for a look-up in PATH.
func (p *Pipeline) CommandPath(program string) string {
	if !strings.ContainsRune(program, '/') && !strings.ContainsRune(program, filepath.Separator) || filepath.IsAbs(program) {
		return program
	}
	if p.dir == "" {
		if abs, err := filepath.Abs(program); err == nil {
			return abs
		}
		return program
	}
	return filepath.Join(p.dir, program)
}

// Dir is the directory of the pipeline file p was loaded from; "" for a
// file parsed from memory.
func (p *Pipeline) Dir() string { return p.dir }

// normalize fills a step's defaults and refuses fields its kind does not
// take, so that a misplaced setting never silently does nothing.
func (s *Step) normalize() error {
	used := map[string]bool{
		"action": s.Action != "" && s.Kind != Go, "func": s.Func != "", "params": len(s.Params) > 0,
		"vendor": s.Vendor != "", "command": len(s.Command) > 0, "outputs": len(s.Outputs) > 0,
		"retry_exit_codes": len(s.RetryExitCodes) > 0, "timeout": s.Timeout != "", "activity": s.Activity != "",
		"task_queue": s.TaskQueue != "", "heartbeat": s.Heartbeat != "", "retry": s.Retry != nil, "env": len(s.Env) > 0,
		"max_cost": s.MaxCost != nil, "batch": s.Batch, "batch_max_items": s.BatchMaxItems != 0, "batch_max_wait": s.BatchMaxWait != "",
	}
	allowed := map[StepKind][]string{
		Local:    {"action", "params"},
		Go:       {"func", "params"},
		Exec:     {"command", "outputs", "retry_exit_codes", "timeout", "params", "env"},
		Activity: {"activity", "task_queue", "timeout", "heartbeat", "retry", "params"},
		Paid:     {"action", "params", "vendor", "max_cost", "batch", "batch_max_items", "batch_max_wait"},
		Effect:   {"action", "params", "vendor", "max_cost"},
		Approval: {},
	}
	fields, ok := allowed[s.Kind]
	if !ok {
		kinds := make([]string, len(allot.StepKinds))
		for i, k := range allot.StepKinds {
			kinds[i] = fmt.Sprintf("%q", k)
		}
		return fmt.Errorf("kind %q is unknown: use one of %s", s.Kind, strings.Join(kinds, ", "))
	}
	for _, name := range []string{"action", "func", "params", "vendor", "command", "outputs", "retry_exit_codes", "timeout", "activity", "task_queue", "heartbeat", "retry", "env", "max_cost",
		"batch", "batch_max_items", "batch_max_wait"} {
		if used[name] && !contains(fields, name) {
			return fmt.Errorf("a %s step takes no %s: remove it (a %s step takes %s)", s.Kind, name, s.Kind, orNothing(fields))
		}
	}
	switch s.Kind {
	case Local:
		if s.Action == "" {
			s.Action = s.Name
		}
		if !contains(localActions, s.Action) {
			return fmt.Errorf("unknown local action %q: use one of %s, or kind \"go\" for a step registered in your worker", s.Action, strings.Join(localActions, ", "))
		}
	case Go:
		if s.Action == "" {
			s.Action = s.Func
		}
		if s.Action == "" {
			s.Action = s.Name
		}
	case Exec:
		if len(s.Command) == 0 || strings.TrimSpace(s.Command[0]) == "" {
			return fmt.Errorf("an exec step needs command = [\"program\", \"arg\", ...]")
		}
		for _, o := range s.Outputs {
			if err := checkOutput(o); err != nil {
				return err
			}
		}
		if err := checkEnv(s.Env); err != nil {
			return err
		}
		for _, c := range s.RetryExitCodes {
			if c <= 0 || c > 255 {
				return fmt.Errorf("retry exit code %d is not an exit code (1-255)", c)
			}
		}
	case Activity:
		if s.Activity == "" || s.TaskQueue == "" {
			return fmt.Errorf("an activity step needs activity = \"ActivityType\" and task_queue = \"queue\"")
		}
		if s.Heartbeat != "" {
			if _, err := positive("heartbeat", s.Heartbeat); err != nil {
				return err
			}
		}
		if err := s.Retry.validate(); err != nil {
			return err
		}
	case Paid, Effect:
		// The action is the vendor's task kind.
		if s.Action == "" {
			s.Action = s.Name
		}
		if s.MaxCost != nil {
			if err := checkMoney(*s.MaxCost, "max_cost", allot.MaxAmount); err != nil {
				return err
			}
		}
		if err := s.checkBatch(); err != nil {
			return err
		}
	}
	if s.Timeout != "" {
		if _, err := positive("timeout", s.Timeout); err != nil {
			return err
		}
	}
	return nil
}

// checkBatch refuses batch settings that would do nothing or too much.
func (s *Step) checkBatch() error {
	if !s.Batch && (s.BatchMaxItems != 0 || s.BatchMaxWait != "") {
		return fmt.Errorf("batch_max_items and batch_max_wait apply to a step in batch mode: add batch = true, or remove them")
	}
	if s.BatchMaxItems < 0 || s.BatchMaxItems > MaxBatchItems {
		return fmt.Errorf("batch_max_items %d is outside 1..%d (the most a vendor takes in one batch)", s.BatchMaxItems, MaxBatchItems)
	}
	if s.BatchMaxWait != "" {
		if _, err := positive("batch_max_wait", s.BatchMaxWait); err != nil {
			return err
		}
	}
	return nil
}

func (r *Retry) validate() error {
	if r == nil {
		return nil
	}
	// In the file's order, so that the same file gets the same error.
	for _, f := range []struct{ name, v string }{{"initial_interval", r.InitialInterval}, {"maximum_interval", r.MaximumInterval}} {
		if f.v != "" {
			if _, err := positive("retry."+f.name, f.v); err != nil {
				return err
			}
		}
	}
	if b := r.BackoffCoefficient; math.IsNaN(b) || math.IsInf(b, 0) {
		return fmt.Errorf("retry.backoff_coefficient %v is not a number: use one of at least 1, e.g. 2", b)
	}
	if r.BackoffCoefficient != 0 && r.BackoffCoefficient < 1 {
		return fmt.Errorf("retry.backoff_coefficient %v is below 1", r.BackoffCoefficient)
	}
	if r.MaximumAttempts < 0 {
		return fmt.Errorf("retry.maximum_attempts %d is negative: use 0 for unlimited", r.MaximumAttempts)
	}
	if r.MaximumAttempts > math.MaxInt32 {
		// Temporal's retry policy holds an int32: more would wrap around.
		return fmt.Errorf("retry.maximum_attempts %d is over Temporal's limit of %d: use 0 for unlimited", r.MaximumAttempts, math.MaxInt32)
	}
	return nil
}

func orNothing(xs []string) string {
	if len(xs) == 0 {
		return "nothing else"
	}
	return strings.Join(xs, ", ")
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

// StallAfterDuration is how long a step may keep retrying before the
// episode counts as stalled.
func (p *Pipeline) StallAfterDuration() time.Duration {
	if p.stallAfter <= 0 {
		return DefaultStallAfter
	}
	return p.stallAfter
}

// Location is the pipeline's time zone.
func (p *Pipeline) Location() *time.Location {
	if p.location == nil {
		return time.UTC
	}
	return p.location
}

// PeriodOf returns the period the nominal time t falls in, in the
// pipeline's zone, after the pipeline's period_offset.
func (p *Pipeline) PeriodOf(t time.Time) string {
	local := t.In(p.Location())
	if p.offsetDays != 0 {
		// Shift the calendar date, not the instant: local.AddDate lands on
		// a wall-clock time that a DST change at midnight (America/Santiago,
		// America/Havana) or a skipped day (Pacific/Apia, 2011-12-30) does
		// not have, and Go moves it into a neighbouring day.
		y, m, d := local.Date()
		return PeriodOf(p.Period, time.Date(y, m, d+p.offsetDays, 12, 0, 0, 0, time.UTC))
	}
	return PeriodOf(p.Period, local.Add(p.offset))
}

// maxOffsetDays bounds a period_offset in days as time.Duration bounds
// one in hours (about 292 years).
const maxOffsetDays = int(math.MaxInt64 / int64(24*time.Hour))

func (p *Pipeline) normalizeOffset() error {
	v := strings.TrimSpace(p.PeriodOffset)
	if v == "" {
		return nil
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n == 0 {
			return fmt.Errorf("pipeline %q: period_offset %q: write whole days like \"-1d\", or a duration like \"-6h\"", p.Name, p.PeriodOffset)
		}
		if n > maxOffsetDays || n < -maxOffsetDays {
			return fmt.Errorf("pipeline %q: period_offset %q is more than %d days", p.Name, p.PeriodOffset, maxOffsetDays)
		}
		p.offsetDays = n
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d == 0 {
		return fmt.Errorf("pipeline %q: period_offset %q: write whole days like \"-1d\", or a duration like \"-6h\"", p.Name, p.PeriodOffset)
	}
	if d%time.Second != 0 {
		// The allocation key carries the nominal time to the second: the
		// period must be the same for the key's time and the input's.
		return fmt.Errorf("pipeline %q: period_offset %q has a fraction of a second: use whole seconds, e.g. \"-6h\"", p.Name, p.PeriodOffset)
	}
	p.offset = d
	return nil
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
	case Month:
		return t.Format("2006-01")
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
