package pipeline

import (
	"strings"
	"testing"
	"time"
)

func deadlinePipeline(t *testing.T, period, zone, extra string) *Pipeline {
	t.Helper()
	file := "[[pipeline]]\nname = \"p\"\nperiod = \"" + period + "\"\ntime_zone = \"" + zone + "\"\n" + extra + "\n  [[pipeline.step]]\n  name = \"s\"\n  kind = \"paid\"\n"
	set, err := Parse([]byte(file), "test")
	if err != nil {
		t.Fatal(err)
	}
	p, err := set.Get("p")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func at(t *testing.T, zone, local string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", local, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// "4d9h" of an ISO week is Friday 09:00 on the wall clock of the pipeline's
// zone, in an ordinary week, in the weeks whose clocks change (the change
// falls between the week's start and its deadline), and in the last ISO
// week of a year, which starts in December and is due in January.
func TestDeadlineIsWallClockInTheZone(t *testing.T) {
	for _, c := range []struct {
		name, period, zone, deadline, periodName, due string
	}{
		{"ordinary week", "iso-week", "Europe/Berlin", "4d9h", "2026-W32", "2026-08-07 09:00"},
		// Europe: clocks go forward Sunday 2026-03-29; a deadline on that
		// Sunday at noon is noon, not 13:00.
		{"spring-forward Sunday", "iso-week", "Europe/Berlin", "6d12h", "2026-W13", "2026-03-29 12:00"},
		// Clocks go back Sunday 2026-10-25.
		{"fall-back Sunday", "iso-week", "Europe/Berlin", "6d12h", "2026-W43", "2026-10-25 12:00"},
		// New York: forward Sunday 2026-03-08, which ends ISO week 10.
		{"US spring-forward", "iso-week", "America/New_York", "6d23h", "2026-W10", "2026-03-08 23:00"},
		// The change is on Sunday; a deadline in the next week lands on
		// the wall clock too.
		{"days past the week", "iso-week", "America/New_York", "8d9h", "2026-W10", "2026-03-10 09:00"},
		// 2026 has 53 ISO weeks: W53 starts Monday 2026-12-28.
		{"last ISO week of 2026", "iso-week", "Europe/Berlin", "4d9h", "2026-W53", "2027-01-01 09:00"},
		// 2027-W01 starts Monday 2027-01-04.
		{"first ISO week of 2027", "iso-week", "Europe/Berlin", "4d9h", "2027-W01", "2027-01-08 09:00"},
		// 2025 has 52: W01 of 2026 starts Monday 2025-12-29.
		{"week 1 starting in December", "iso-week", "UTC", "0d9h", "2026-W01", "2025-12-29 09:00"},
		{"day across spring-forward", "day", "Europe/Berlin", "9h", "2026-03-29", "2026-03-29 09:00"},
		{"day due the next morning", "day", "Europe/Berlin", "1d6h", "2026-10-25", "2026-10-26 06:00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := deadlinePipeline(t, c.period, c.zone, `deadline = "`+c.deadline+`"`)
			due, warn, err := p.Due(c.periodName)
			if err != nil {
				t.Fatal(err)
			}
			if want := at(t, c.zone, c.due); !due.Equal(want) {
				t.Fatalf("%s of %s due %s, want %s", c.deadline, c.periodName, due.In(want.Location()), want)
			}
			if !warn.IsZero() {
				t.Fatalf("no warn_before, but a warning time %s", warn)
			}
			// NextDue finds the same period from just before its deadline,
			// and the one after from its deadline on.
			got, next, _, err := p.NextDue(due.Add(-time.Second))
			if err != nil || got != c.periodName || !next.Equal(due) {
				t.Fatalf("NextDue(just before) = %s %s %v, want %s %s", got, next, err, c.periodName, due)
			}
			got, next, _, err = p.NextDue(due)
			if err != nil || got == c.periodName || !next.After(due) {
				t.Fatalf("NextDue(at the deadline) = %s %s %v, want the next period", got, next, err)
			}
		})
	}
}

// NextDue walks the periods in order across the turn of a year with 53
// ISO weeks, each due once.
func TestNextDueWalksEveryPeriodOnce(t *testing.T) {
	p := deadlinePipeline(t, "iso-week", "Europe/Berlin", "deadline = \"4d9h\"\nwarn_before = \"2h\"")
	after := at(t, "Europe/Berlin", "2026-12-01 00:00")
	var got []string
	for range 6 {
		period, due, warn, err := p.NextDue(after)
		if err != nil {
			t.Fatal(err)
		}
		if !warn.Equal(due.Add(-2 * time.Hour)) {
			t.Fatalf("%s: warning %s, want 2h before %s", period, warn, due)
		}
		got = append(got, period)
		after = due
	}
	if want := "2026-W49 2026-W50 2026-W51 2026-W52 2026-W53 2027-W01"; strings.Join(got, " ") != want {
		t.Fatalf("periods %v, want %s", got, want)
	}
}

// A deadline that cannot be read, or that a period could never meet, is
// refused with the setting named and how to write it.
func TestDeadlineRefusals(t *testing.T) {
	for name, c := range map[string]struct{ extra, want string }{
		"words":             {`deadline = "friday"`, `deadline "friday"`},
		"zero":              {`deadline = "0d"`, "the offset is zero"},
		"negative":          {`deadline = "-1d"`, "not a whole number"},
		"too many days":     {`deadline = "400d"`, "from 0 to 366"},
		"fraction":          {`deadline = "1d1.5s"`, "fraction of a second"},
		"warn without":      {`warn_before = "1h"`, "need a deadline"},
		"bad warn":          {"deadline = \"4d9h\"\nwarn_before = \"soon\"", `warn_before "soon"`},
		"negative episodes": {"deadline = \"4d9h\"\ndeadline_episodes = -1", "deadline_episodes is -1"},
		"more than the cap": {"deadline = \"4d9h\"\ndeadline_episodes = 3\nmax_episodes_per_period = 2", "could never have enough"},
	} {
		t.Run(name, func(t *testing.T) {
			file := "[[pipeline]]\nname = \"p\"\n" + c.extra + "\n  [[pipeline.step]]\n  name = \"s\"\n  kind = \"paid\"\n"
			_, err := Parse([]byte(file), "test")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error naming %q", err, c.want)
			}
		})
	}
	p := deadlinePipeline(t, "iso-week", "UTC", "")
	if p.HasDeadline() || p.DeadlineSpec() != "" || p.DeadlineEpisodesNeeded() != 0 {
		t.Fatal("a pipeline without a deadline has one")
	}
	if _, _, err := p.Due("2026-W32"); err == nil {
		t.Fatal("Due of a pipeline without a deadline")
	}
	q := deadlinePipeline(t, "iso-week", "UTC", "deadline = \"4d9h\"\nwarn_before = \"90m\"")
	if want := "deadline=4d9h0m0s episodes=1 period=iso-week zone=UTC warn_before=1h30m0s"; q.DeadlineSpec() != want {
		t.Fatalf("spec %q, want %q", q.DeadlineSpec(), want)
	}
}

// NominalIn is a time whose period is the one asked, with or without a
// period_offset.
func TestNominalInFallsInThePeriod(t *testing.T) {
	for _, extra := range []string{"", `period_offset = "-1d"`, `period_offset = "30h"`} {
		for _, kind := range []string{"day", "iso-week"} {
			p := deadlinePipeline(t, kind, "Pacific/Auckland", extra)
			for _, period := range map[string][]string{"day": {"2026-03-29", "2027-01-01"}, "iso-week": {"2026-W53", "2027-W01"}}[kind] {
				n, err := p.NominalIn(period)
				if err != nil || p.PeriodOf(n) != period {
					t.Fatalf("%s %s: NominalIn(%s) = %s (period %s), %v", kind, extra, period, n, p.PeriodOf(n), err)
				}
			}
		}
	}
}
