package chaos

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"allot/pipeline"
)

// Scale sizes a chaos run.
type Scale struct {
	Name string
	// From and To bound the nominal times, [From, To): Mondays in UTC.
	From, To time.Time
	// Load is how long load and faults go on; Drain how long the run may
	// then take to settle every episode.
	Load, Drain time.Duration
	// Kills is how many times a worker is SIGKILLed during Load.
	Kills int
	// VideoDays and DailyDays are when chaos-video and chaos-daily's
	// schedules fire.
	VideoDays, DailyDays []time.Weekday
	// ManualPerWeek: manual runs (own keys) per scheduled pipeline and
	// week; StrictPerWeek: runs of chaos-strict per week; BatchPerWeek:
	// runs of chaos-batch per week.
	ManualPerWeek, StrictPerWeek, BatchPerWeek int
	// DupScheduled: per scheduled pipeline and week, scheduled times that
	// are also started by hand, concurrently, besides the backfills.
	DupScheduled int
	// MaxDup is the most concurrent starts of one request.
	MaxDup int
	// TaskDuration is how long the simulated vendor takes per task.
	TaskDuration time.Duration
}

// Scales are the documented sizes.
var Scales = map[string]Scale{
	// small runs in CI: five ISO weeks across the new year
	// (2026-W51..2027-W02; 2026 has a W53), about 60 episodes.
	"small": {
		Name: "small",
		From: time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC), To: time.Date(2027, 1, 18, 0, 0, 0, 0, time.UTC),
		// A clean run drains in about 30 s; the bound is for a loaded CI
		// machine, and is only reached when something is wrong.
		Load: 90 * time.Second, Drain: 5 * time.Minute,
		Kills:     8,
		VideoDays: []time.Weekday{time.Monday}, DailyDays: []time.Weekday{time.Tuesday, time.Friday},
		ManualPerWeek: 2, StrictPerWeek: 1, BatchPerWeek: 3, DupScheduled: 2, MaxDup: 3,
		TaskDuration: time.Second,
	},
	// full is for long runs: 16 ISO weeks (2026-W45..2027-W08), about 310
	// episodes over 30 minutes of faults.
	"full": {
		Name: "full",
		From: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), To: time.Date(2027, 2, 22, 0, 0, 0, 0, time.UTC),
		Load: 30 * time.Minute, Drain: 15 * time.Minute,
		Kills:     90,
		VideoDays: []time.Weekday{time.Monday, time.Thursday}, DailyDays: nil,
		ManualPerWeek: 3, StrictPerWeek: 2, BatchPerWeek: 6, DupScheduled: 2, MaxDup: 4,
		TaskDuration: 2 * time.Second,
	},
}

// Kinds of plan events.
const (
	evBackfill     = "backfill"
	evManual       = "manual"
	evDupScheduled = "dup-scheduled"
	evKill         = "kill"
	// evWorkersOutage: every worker is down at once for Down, across
	// several of chaos-catchup's scheduled times.
	evWorkersOutage = "workers-outage"
	// evCatchUpPause pauses chaos-catchup's schedule.
	evCatchUpPause    = "catch-up-pause"
	evVendorRestart   = "vendor-restart"
	evTemporalRestart = "temporal-restart"
	// evVendorPause: an operator pauses Vendor (starter vendor pause:
	// the default vendor, then the activity-adapter vendor) and resumes
	// it after Down.
	evVendorPause = "vendor-pause"
	// evVendorOutage: the default vendor is killed for Down (20 s): its
	// breaker trips, and closes when it is back.
	evVendorOutage = "vendor-outage"
)

// Ways a run is started.
const (
	viaOperator = "operator" // operator.Runs.Run, as the starter does in-process
	viaStarter  = "starter"  // the real starter binary
	viaSDK      = "sdk"      // a plain SDK start with the Schedule's options (UseExisting)
)

// event is one thing the chaos run does, At after the load began.
type event struct {
	At       time.Duration
	Kind     string
	Pipeline string
	From, To time.Time     // backfill
	Nominal  time.Time     // manual, dup-scheduled
	Key      string        // manual: the key under the pipeline ("" = the Schedule's)
	Via      []string      // one start per entry, all at once
	Worker   int           // kill
	Down     time.Duration // kill, restarts: how long it stays down
	Vendor   string        // vendor-pause: the [[vendor]] paused
}

func (e event) String() string {
	switch e.Kind {
	case evBackfill:
		return fmt.Sprintf("%s %s %s [%s, %s)", e.At.Round(time.Millisecond), e.Kind, e.Pipeline, e.From.Format(time.RFC3339), e.To.Format(time.RFC3339))
	case evManual, evDupScheduled:
		return fmt.Sprintf("%s %s %s %s key=%q via=%s", e.At.Round(time.Millisecond), e.Kind, e.Pipeline, e.Nominal.Format(time.RFC3339), e.Key, strings.Join(e.Via, ","))
	case evKill:
		return fmt.Sprintf("%s %s worker-%d down=%s", e.At.Round(time.Millisecond), e.Kind, e.Worker, e.Down.Round(time.Millisecond))
	case evVendorPause:
		return fmt.Sprintf("%s %s %s down=%s", e.At.Round(time.Millisecond), e.Kind, e.Vendor, e.Down.Round(time.Millisecond))
	default:
		return fmt.Sprintf("%s %s down=%s", e.At.Round(time.Millisecond), e.Kind, e.Down.Round(time.Millisecond))
	}
}

// catchUpEnd is the share of the load after which chaos-catchup's
// schedule is paused: before the Temporal restart (from half the load on),
// so that the Schedule starts every one of its times.
const catchUpEnd = 0.45

// vendorPause is how long an operator keeps a vendor paused.
const vendorPause = 15 * time.Second

// vendorOutage is how long the default vendor is down once: long enough
// for its breaker to trip (trip_after 3) and probe a few times.
const vendorOutage = 20 * time.Second

// plan is the whole load and fault schedule of a run: a function of the
// seed, the scale and the number of workers only.
type plan struct {
	Events []event
	Digest string
}

func newRand(seed uint64, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream^0x9e3779b97f4a7c15))
}

func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

func frac(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }

func pickVia(r *rand.Rand) string {
	switch r.IntN(3) {
	case 0:
		return viaStarter
	case 1:
		return viaSDK
	default:
		return viaOperator
	}
}

func vias(r *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = pickVia(r)
	}
	return out
}

// weeks are the Mondays of [sc.From, sc.To).
func weeks(sc Scale) []time.Time {
	var out []time.Time
	for w := sc.From; w.Before(sc.To); w = w.AddDate(0, 0, 7) {
		out = append(out, w)
	}
	return out
}

// newPlan derives the run's events from the seed.
func newPlan(seed uint64, sc Scale, workers int) plan {
	r := newRand(seed, 1)
	ws := weeks(sc)
	n := len(ws)
	var evs []event
	sched := schedules(sc)
	scheduled := []string{PipelineVideo, PipelineReview, PipelineDaily}
	loadEnd := frac(sc.Load, 0.85)
	for _, p := range scheduled {
		// Two backfills cover every week: [w_i, w_i+2), sent in order of
		// i but overlapping in time, so neighbours race each other.
		for i := range n {
			to := sc.To
			if i+2 < n {
				to = ws[i+2]
			}
			at := frac(sc.Load, 0.7*float64(i)/float64(n)) + between(r, 0, frac(sc.Load, 0.15))
			evs = append(evs, event{At: at, Kind: evBackfill, Pipeline: p, From: ws[i], To: to})
		}
		for i, w := range ws {
			for m := range sc.ManualPerWeek {
				nominal := w.Add(between(r, 0, 7*24*time.Hour)).Truncate(time.Minute)
				evs = append(evs, event{At: between(r, 0, loadEnd), Kind: evManual, Pipeline: p, Nominal: nominal,
					Key: fmt.Sprintf("manual-%d-w%d-%d", seed, i, m), Via: vias(r, 1+r.IntN(sc.MaxDup))})
			}
			times := sched[p].times(w, w.AddDate(0, 0, 7))
			for range sc.DupScheduled {
				if len(times) == 0 {
					break
				}
				t := times[r.IntN(len(times))]
				evs = append(evs, event{At: between(r, 0, loadEnd), Kind: evDupScheduled, Pipeline: p, Nominal: t,
					Via: vias(r, 2+r.IntN(max(1, sc.MaxDup-1)))})
			}
		}
	}
	for i, w := range ws {
		for m := range sc.StrictPerWeek {
			nominal := w.Add(between(r, 0, 7*24*time.Hour)).Truncate(time.Minute)
			evs = append(evs, event{At: between(r, 0, loadEnd), Kind: evManual, Pipeline: PipelineStrict, Nominal: nominal,
				Key: fmt.Sprintf("manual-%d-w%d-%d", seed, i, m), Via: vias(r, 1+r.IntN(sc.MaxDup))})
		}
	}
	// chaos-batch's runs: drawn after the others, so that their times stay
	// what they were for a seed; duplicated like the rest, so a batch item
	// is asked for by several runs of one key.
	for i, w := range ws {
		for m := range sc.BatchPerWeek {
			nominal := w.Add(between(r, 0, 7*24*time.Hour)).Truncate(time.Minute)
			evs = append(evs, event{At: between(r, 0, loadEnd), Kind: evManual, Pipeline: PipelineBatch, Nominal: nominal,
				Key: fmt.Sprintf("manual-%d-w%d-%d", seed, i, m), Via: vias(r, 1+r.IntN(sc.MaxDup))})
		}
	}
	// Faults: their own stream, so a change of the load keeps them.
	f := newRand(seed, 2)
	for range sc.Kills {
		evs = append(evs, event{At: between(f, frac(sc.Load, 0.05), frac(sc.Load, 0.95)), Kind: evKill,
			Worker: f.IntN(workers), Down: between(f, 300*time.Millisecond, 3*time.Second)})
	}
	evs = append(evs,
		event{At: between(f, frac(sc.Load, 0.25), frac(sc.Load, 0.5)), Kind: evVendorRestart, Down: between(f, time.Second, 3*time.Second)},
		event{At: between(f, frac(sc.Load, 0.5), frac(sc.Load, 0.75)), Kind: evTemporalRestart, Down: between(f, time.Second, 2*time.Second)},
		event{At: between(f, frac(sc.Load, 0.1), frac(sc.Load, 0.25)), Kind: evVendorPause, Vendor: pipeline.DefaultVendor, Down: vendorPause},
		event{At: between(f, frac(sc.Load, 0.55), frac(sc.Load, 0.7)), Kind: evVendorOutage, Down: vendorOutage},
	)
	// The activity-adapter vendor's pause: drawn after the others, so
	// that their times stay what they were for a seed; early, like the
	// default vendor's, and over before the vendors' restart can begin (a
	// quarter into the load). A call of its activities that passed the gate before the
	// pause and fails while the vendor is down is retried by Temporal
	// without asking the gate again, so a restart in the pause could let
	// a retry reach the paused vendor (chaos/README.md).
	evs = append(evs, event{At: between(f, frac(sc.Load, 0.05), frac(sc.Load, 0.25)-vendorPause-time.Second), Kind: evVendorPause, Vendor: ActivityVendor, Down: vendorPause})
	// chaos-catchup's schedule runs from the start of the load until
	// catchUpEnd, before the Temporal restart; every worker is down once
	// across several of its times.
	evs = append(evs,
		event{At: between(f, frac(sc.Load, 0.15), frac(sc.Load, 0.25)), Kind: evWorkersOutage, Down: 3*CatchUpInterval + CatchUpGrace},
		event{At: frac(sc.Load, catchUpEnd), Kind: evCatchUpPause})
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].At < evs[j].At })
	h := sha256.New()
	for _, e := range evs {
		fmt.Fprintln(h, e.String())
	}
	return plan{Events: evs, Digest: hex.EncodeToString(h.Sum(nil))[:12]}
}
