package pipeline

// Fuzz targets for what comes from outside into this package: the pipeline
// file (Parse) and the nominal times whose periods it computes (PeriodOf,
// with time zones and period_offset). Seeds are in testdata/fuzz/<target>;
// `go test` runs them, .ci/fuzz explores further.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"allot"
)

var (
	dayPeriod  = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})$`)
	weekPeriod = regexp.MustCompile(`^(\d{4})-W(\d{2})$`)
)

// parsePeriod reads a period back: its first civil day (as noon UTC, so
// that no zone moves it) and its length in days.
func parsePeriod(k PeriodKind, s string) (time.Time, int, error) {
	if k == Day {
		m := dayPeriod.FindStringSubmatch(s)
		if m == nil {
			return time.Time{}, 0, fmt.Errorf("%q is not YYYY-MM-DD", s)
		}
		y, _ := strconv.Atoi(m[1])
		mo, _ := strconv.Atoi(m[2])
		d, _ := strconv.Atoi(m[3])
		day := time.Date(y, time.Month(mo), d, 12, 0, 0, 0, time.UTC)
		if day.Year() != y || int(day.Month()) != mo || day.Day() != d {
			return time.Time{}, 0, fmt.Errorf("%q is not a calendar day", s)
		}
		return day, 1, nil
	}
	m := weekPeriod.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, 0, fmt.Errorf("%q is not YYYY-Www", s)
	}
	y, _ := strconv.Atoi(m[1])
	w, _ := strconv.Atoi(m[2])
	jan4 := time.Date(y, time.January, 4, 12, 0, 0, 0, time.UTC)
	monday := jan4.AddDate(0, 0, -((int(jan4.Weekday())+6)%7)+(w-1)*7)
	if gy, gw := monday.ISOWeek(); gy != y || gw != w {
		return time.Time{}, 0, fmt.Errorf("%q is not an ISO week", s)
	}
	return monday, 7, nil
}

// civilDay is the calendar day of t in t's location, as noon UTC.
func civilDay(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 12, 0, 0, 0, time.UTC)
}

// FuzzPeriodOf: the period of a nominal time is a function of the instant
// alone (not of the zone it is written in, of its fraction of a second,
// which the allocation key drops, or of what was computed before); it is
// the calendar period of the time in the pipeline's zone, shifted by
// period_offset (whole days as calendar days, right across DST changes); and
// it is in canonical form, parsing back to a period that holds that day.
func FuzzPeriodOf(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind, zone, offset string, sec, nsec int64, viewOffset int32) {
		p := &Pipeline{Name: "fuzz", Period: PeriodKind(kind), TimeZone: zone, PeriodOffset: offset, Steps: []Step{{Name: "plan", Kind: Local}}}
		if err := p.normalize(); err != nil {
			if err.Error() == "" {
				t.Fatal("a refused pipeline has an empty error")
			}
			return
		}
		if p.Location() == time.Local {
			t.Fatalf("time_zone %q was accepted as the host's zone: periods would differ from host to host", zone)
		}
		nominal := time.Unix(sec, nsec)
		if nominal.Year() < 300 || nominal.Year() > 9700 {
			return // the nominal time window refuses these long before; offsets reach ±292 years
		}
		got := p.PeriodOf(nominal)

		// Stable: the zone the time is written in and the fraction of a
		// second the key drops change nothing.
		for _, same := range []time.Time{nominal.UTC(), nominal.In(time.FixedZone("view", int(viewOffset%(26*3600)))), nominal.Truncate(time.Second)} {
			if other := p.PeriodOf(same); other != got {
				t.Fatalf("PeriodOf(%s) = %s but PeriodOf(%s) = %s (zone %s, offset %q)", nominal, got, same, other, zone, offset)
			}
		}
		// Sequence-independent: periods computed in between change nothing.
		for _, d := range []time.Duration{-7 * 24 * time.Hour, time.Hour, 400 * 24 * time.Hour} {
			p.PeriodOf(nominal.Add(d))
		}
		if again := p.PeriodOf(nominal); again != got {
			t.Fatalf("PeriodOf(%s) = %s, then %s", nominal, got, again)
		}

		// The calendar: the day of the time in the pipeline's zone, after
		// the offset.
		local := nominal.In(p.Location())
		var day time.Time
		switch {
		case p.offsetDays != 0:
			day = civilDay(local).AddDate(0, 0, p.offsetDays)
		default:
			day = civilDay(nominal.Add(p.offset).In(p.Location()))
		}
		if want := PeriodOf(p.Period, day); got != want {
			t.Fatalf("PeriodOf(%s) in %s with period_offset %q = %s, want %s (local %s)", nominal, p.Location(), offset, got, want, local)
		}

		// Round trip: canonical text for a period that holds the day.
		start, days, err := parsePeriod(p.Period, got)
		if err != nil {
			t.Fatalf("PeriodOf(%s) = %s: %v", nominal, got, err)
		}
		if back := PeriodOf(p.Period, start); back != got {
			t.Fatalf("period %s parses to %s, which formats as %s", got, start, back)
		}
		if day.Before(start) || !day.Before(start.AddDate(0, 0, days)) {
			t.Fatalf("period %s (from %s) does not hold the day %s", got, start, day)
		}
	})
}

// FuzzParse: a pipeline file never panics the parser; parsing is
// deterministic; an accepted file holds only usable settings, re-validates,
// and comes back the same when written out and read again; a refused one
// says what is wrong and where.
func FuzzParse(f *testing.F) {
	f.Add(DefaultConfig)
	f.Fuzz(func(t *testing.T, data []byte) {
		const source = "fuzz.toml"
		set, err := Parse(data, source)
		set2, err2 := Parse(data, source)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error() && !typeMismatch(data)) {
			t.Fatalf("Parse is not deterministic: %v, then %v", err, err2)
		}
		if err != nil {
			checkRefusal(t, data, err)
			checkRefusal(t, data, err2)
			return
		}
		for _, name := range set.Names() {
			p, err := set.Get(name)
			if err != nil {
				t.Fatalf("Get(%q) of a parsed set: %v", name, err)
			}
			checkUsable(t, set, p)
		}
		for _, n := range set.ControlledVendors() {
			checkLimitsUsable(t, n, set.Limits(n))
		}
		if a, b := describeSet(t, set), describeSet(t, set2); a != b {
			t.Fatalf("Parse is not deterministic:\n%s\nthen\n%s", a, b)
		}
		for _, name := range set.Names() {
			p, _ := set.Get(name)
			cp := *p
			cp.Steps = append([]Step(nil), p.Steps...)
			if err := cp.normalize(); err != nil {
				t.Fatalf("pipeline %q was accepted but does not re-validate: %v", name, err)
			}
			if a, b := describePipeline(t, p), describePipeline(t, &cp); a != b {
				t.Fatalf("normalizing pipeline %q again changed it:\n%s\n%s", name, a, b)
			}
		}
		// Written out and read again: the same set.
		var out bytes.Buffer
		fl := file{}
		for _, n := range set.VendorNames() {
			v, _ := set.Vendor(n)
			fl.Vendors = append(fl.Vendors, v)
		}
		if d := set.Limits(DefaultVendor); d != (VendorLimits{}) {
			fl.Vendors = append(fl.Vendors, Vendor{Name: DefaultVendor, VendorLimits: d})
		}
		for _, n := range set.Names() {
			p, _ := set.Get(n)
			fl.Pipelines = append(fl.Pipelines, *p)
		}
		fl.Budgets = set.Budgets()
		for _, b := range fl.Budgets {
			if b.Location() == time.Local || b.Limit.Amount <= 0 || b.Limit.Amount > allot.MaxBudgetLimit || allot.CheckCurrency(b.Limit.Currency) != nil {
				t.Fatalf("accepted budget is not usable: %+v", b)
			}
		}
		if err := toml.NewEncoder(&out).Encode(fl); err != nil {
			t.Fatalf("an accepted set does not encode: %v", err)
		}
		again, err := Parse(out.Bytes(), "rewritten.toml")
		if err != nil {
			t.Fatalf("an accepted set, written out, is refused: %v\n%s", err, out.String())
		}
		if a, b := describeSet(t, set), describeSet(t, again); a != b {
			t.Fatalf("an accepted set changed when written out and read again:\n%s\n%s", a, b)
		}
	})
}

// checkUsable asserts what the worker relies on in an accepted pipeline.
func checkUsable(t *testing.T, set *Set, p *Pipeline) {
	t.Helper()
	if ValidateName(p.Name) != nil || (p.Period != ISOWeek && p.Period != Day) || p.location == nil || p.location == time.Local || p.MaxPerPeriod < 0 || len(p.Steps) == 0 {
		t.Fatalf("accepted pipeline is not usable: %+v", p)
	}
	if p.StallAfterDuration() <= 0 || p.maxAhead <= 0 || p.offset%time.Second != 0 {
		t.Fatalf("pipeline %q: accepted durations are not usable: stall %s, max ahead %s, offset %s", p.Name, p.StallAfterDuration(), p.maxAhead, p.offset)
	}
	if p.Schedule != nil {
		if _, err := p.Schedule.Spec(); err != nil {
			t.Fatalf("pipeline %q: accepted schedule does not validate: %v", p.Name, err)
		}
	}
	seen := map[string]bool{}
	for _, s := range p.Steps {
		if !stepPattern.MatchString(s.Name) || seen[s.Name] {
			t.Fatalf("pipeline %q: accepted step name %q is invalid or repeated", p.Name, s.Name)
		}
		seen[s.Name] = true
		if s.Kind != Approval && s.Kind != Exec && s.Kind != Activity && s.Action == "" {
			t.Fatalf("pipeline %q: accepted %s step %q has no action", p.Name, s.Kind, s.Name)
		}
		if s.TimeoutDuration() <= 0 {
			t.Fatalf("pipeline %q: step %q has timeout %s", p.Name, s.Name, s.TimeoutDuration())
		}
		for _, c := range s.RetryExitCodeList() {
			if c < 1 || c > 255 {
				t.Fatalf("pipeline %q: step %q retries on exit code %d", p.Name, s.Name, c)
			}
		}
		if r := s.Retry; r != nil {
			// Temporal's retry policy: a coefficient of at least 1 (0:
			// the default) and at most MaxInt32 attempts (0: unlimited).
			if b := r.BackoffCoefficient; b != 0 && (math.IsNaN(b) || math.IsInf(b, 0) || b < 1) {
				t.Fatalf("pipeline %q: step %q was accepted with retry.backoff_coefficient %v", p.Name, s.Name, b)
			}
			if r.MaximumAttempts < 0 || r.MaximumAttempts > math.MaxInt32 {
				t.Fatalf("pipeline %q: step %q was accepted with retry.maximum_attempts %d, which Temporal cannot take", p.Name, s.Name, r.MaximumAttempts)
			}
		}
		if s.Kind.Remote() && s.Vendor != "" && s.Vendor != DefaultVendor {
			if _, ok := set.Vendor(s.Vendor); !ok {
				t.Fatalf("pipeline %q: step %q names unknown vendor %q", p.Name, s.Name, s.Vendor)
			}
		}
	}
}

// checkLimitsUsable asserts what the vendor gate relies on in accepted
// controls.
func checkLimitsUsable(t *testing.T, name string, l VendorLimits) {
	t.Helper()
	if l.MaxInFlight < 0 || l.Rate < 0 || math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0) || l.TripAfter < 0 || l.Burst < 0 || (l.Rate > 0 && l.BurstSize() < 1) {
		t.Fatalf("vendor %q: accepted controls are not usable: %+v", name, l)
	}
	if d := l.SendTimeoutDuration(); d < MinSendTimeout || d > MaxSendTimeout || l.CoolDownDuration() <= 0 || l.Horizon() < 0 {
		t.Fatalf("vendor %q: accepted durations are not usable: %+v", name, l)
	}
}

// checkRefusal asserts that a refused file's error says what is wrong: it
// names the file, and the pipeline or vendor it is about (or the TOML line,
// or the file-level problem).
func checkRefusal(t *testing.T, data []byte, err error) {
	t.Helper()
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "pipeline file fuzz.toml")
	if !ok || len(strings.TrimLeft(rest, ": ")) < 10 {
		t.Fatalf("refusal does not name the file or the problem: %q", msg)
	}
	var raw file
	md, derr := toml.NewDecoder(bytes.NewReader(data)).Decode(&raw)
	switch {
	case typeMismatch(data):
		// Which mismatch it names can vary: see typeMismatch.
		// The setting, its line and what it takes (or the decoder's
		// words, with its key, for a value no setting explains).
		if !strings.Contains(msg, "line ") || !strings.Contains(msg, " takes ") && !strings.Contains(msg, "money is") && !strings.Contains(msg, "last key ") {
			t.Fatalf("a TOML type error without its key: %q", msg)
		}
		return
	case derr != nil:
		if !strings.Contains(msg, "toml:") || !strings.Contains(msg, "line ") {
			t.Fatalf("a TOML error without its line: %q", msg)
		}
		return
	}
	switch {
	case keyInFile(data, md.Undecoded()) != nil:
		if !strings.Contains(msg, "api_key_env") || !strings.Contains(msg, "api_key_file") {
			t.Fatalf("a vendor's key in the file, but the refusal is %q", msg)
		}
		return
	case len(md.Undecoded()) > 0:
		if !strings.Contains(msg, "unknown key "+md.Undecoded()[0].String()) {
			t.Fatalf("unknown keys %v, but the refusal is %q", md.Undecoded(), msg)
		}
		return
	case miscased(md) != "":
		if !strings.Contains(msg, "key "+miscased(md)+":") {
			t.Fatalf("key %s is not in lowercase, but the refusal is %q", miscased(md), msg)
		}
		return
	case len(raw.Pipelines) == 0:
		if !strings.Contains(msg, "defines no pipelines") {
			t.Fatalf("a file without pipelines refused with %q", msg)
		}
		return
	}
	// The refusal names the pipeline, the vendor or the budget it is
	// about, as that kind of thing: a vendor's bad name is not called a
	// pipeline name.
	named := false
	for _, b := range raw.Budgets {
		if strings.Contains(msg, fmt.Sprintf("budget %q", b.Name)) {
			named = true
		}
	}
	for _, p := range raw.Pipelines {
		if strings.Contains(msg, fmt.Sprintf("pipeline %q", p.Name)) || strings.Contains(msg, fmt.Sprintf("pipeline name %q", p.Name)) {
			named = true
		}
	}
	for _, v := range raw.Vendors {
		if strings.Contains(msg, fmt.Sprintf("vendor %q", v.Name)) || strings.Contains(msg, fmt.Sprintf("vendor name %q", v.Name)) {
			named = true
		}
	}
	if !named {
		t.Fatalf("refusal names none of the file's pipelines, vendors or budgets: %q", msg)
	}
	if m := regexp.MustCompile(`pipeline name ("(?:[^"\\]|\\.)*")`).FindStringSubmatch(msg); m != nil {
		name, _ := strconv.Unquote(m[1])
		found := false
		for _, p := range raw.Pipelines {
			found = found || p.Name == name
		}
		if !found {
			t.Fatalf("refusal calls %s a pipeline name, but no [[pipeline]] has it: %q", m[1], msg)
		}
	}
}

// typeMismatch reports whether data is well-formed TOML that does not fit
// the file's types. Of several such mismatches the decoder reports the
// first it meets walking Go maps, so which one varies from run to run
// (BurntSushi/toml's unify iterates the table's map); each names its key.
func typeMismatch(data []byte) bool {
	var doc map[string]any
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return false
	}
	var raw file
	_, err := toml.Decode(string(data), &raw)
	return err != nil
}

// miscased is the first key of the file that spells a setting in another
// case than its own, or "".
func miscased(md toml.MetaData) string {
	for _, k := range md.Keys() {
		for i, part := range k {
			if i > 0 && k[i-1] == "params" {
				break
			}
			if part != strings.ToLower(part) {
				return k.String()
			}
		}
	}
	return ""
}

// describePipeline renders everything Parse decided about a pipeline.
func describePipeline(t *testing.T, p *Pipeline) string {
	t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("encode pipeline %q: %v", p.Name, err)
	}
	funcs := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		funcs[i] = s.Func
	}
	return fmt.Sprintf("%s %s %d %v %s %s %s %s %v", data, p.location, p.offsetDays, p.offset, p.minTime, p.maxAhead, p.stallAfter, p.Plan(), funcs)
}

func describeSet(t *testing.T, s *Set) string {
	t.Helper()
	var b strings.Builder
	for _, n := range s.VendorNames() {
		v, _ := s.Vendor(n)
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("encode vendor %q: %v", n, err)
		}
		fmt.Fprintf(&b, "vendor %s %s\n", data, v.CallTimeout())
	}
	fmt.Fprintf(&b, "default vendor %+v\n", s.Limits(DefaultVendor))
	for _, n := range s.Names() {
		p, _ := s.Get(n)
		fmt.Fprintf(&b, "pipeline %s\n", describePipeline(t, p))
	}
	for _, bu := range s.Budgets() {
		data, err := json.Marshal(bu)
		if err != nil {
			t.Fatalf("encode budget %q: %v", bu.Name, err)
		}
		fmt.Fprintf(&b, "budget %s %s\n", data, bu.Location())
	}
	return b.String()
}
