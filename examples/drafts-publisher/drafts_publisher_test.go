package draftspublisher_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"allot"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/internal/devstack"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/internal/report"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/paidvendor/vendorapi"
	"allot/pipeline"
	"allot/workflows"
)

const (
	pipelineName = "drafts-publisher"
	// blogKey is the blog's API key: the worker reads it from
	// BLOG_API_KEY, and it must show up nowhere else.
	blogKey = "sk-blog-test-3e81c4-DO-NOT-LEAK"
	// The pipeline's zone and cap, as pipelines.toml has them.
	zone        = "America/New_York"
	capPerDay   = 3
	slotsPerDay = 4
)

// draft is one draft the test adds, with its payload's fields.
type draft struct {
	ref, readyAt, title, body string
}

// payload is the draft's payload as the README writes it.
func (d draft) payload() string {
	return fmt.Sprintf(`{"title": %q, "body": %q}`, d.title, d.body)
}

func (d draft) add() []string {
	return []string{"input", "add", "--pipeline", pipelineName, "--ref", d.ref, "--ready-at", d.readyAt, "--payload", d.payload()}
}

// The README's drafts and commands, in its order. The test runs each
// starter line as written (with --json, to read what it printed);
// readmeCommands keeps the README and these lists the same.
var (
	readmeDrafts = []draft{
		{"draft-101", "2026-09-14T08:00:00-04:00", "Autumn timetable", "Trains run every 20 minutes from Monday."},
		{"draft-102", "2026-09-14T08:15:00-04:00", "Station works", "The north entrance is closed until Friday."},
		{"draft-103", "2026-09-14T08:30:00-04:00", "New bike racks", "Two hundred more spaces at the east exit."},
		{"draft-104", "2026-09-14T08:45:00-04:00", "Lost and found", "The office moves to platform 1."},
		{"draft-105", "2026-09-15T10:00:00-04:00", "Night buses", "Line N4 runs again from Tuesday."},
	}
	createSchedule = []string{"schedule", "create", "--pipeline", pipelineName, "--paused"}
	readmeBackfill = []string{"schedule", "backfill", "--pipeline", pipelineName, "--from", "2026-09-13T00:00:00-04:00", "--to", "2026-09-15T00:00:00-04:00"}
	listInputs     = []string{"input", "list", "--pipeline", pipelineName}
	listEpisodes   = []string{"episodes", "--pipeline", pipelineName}
	statsCommand   = []string{"stats", "--pipeline", pipelineName}
	checkCommand   = []string{"check"}
)

// readmeStarterLines are the README's starter lines: the five drafts, the
// first again, then the schedule and what it did.
func readmeStarterLines() [][]string {
	var lines [][]string
	for _, d := range readmeDrafts {
		lines = append(lines, d.add())
	}
	return append(lines, readmeDrafts[0].add(), createSchedule, readmeBackfill, listInputs, listEpisodes, statsCommand, checkCommand)
}

// One environment for the whole example: the embedded server, allot's
// worker, the starter and render-draft binaries as real processes, a
// simulated blog. Its parts run in order on days of their own, and each
// builds on what the ones before left (the drafts are the pipeline's, not
// a day's: a draft not published on its day waits for the next slots):
//
//  1. the README: five drafts, a backfill of Sunday and Monday through the
//     paused schedule (Sunday finds nothing ready, Monday publishes three
//     and stops at the cap), and again, changing nothing;
//  2. slots and manual runs of one day, each started several times at
//     once through the starter binary and operator.Runs, race for the
//     three drafts ready: each draft is claimed by one episode and
//     published once, every other run is at the cap;
//  3. a day on which no draft is ready (one is, from the day after): its
//     slots are skipped no_ready_input, recorded and counted as normal
//     skips, and nothing is published;
//  4. a backfill of three days with more drafts ready than the cap lets
//     through: three episodes a day, the nine oldest drafts, the fourth
//     slot of each day at the cap; again, it changes nothing; starter
//     check passes.
func TestDraftsPublisher(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries and starts the embedded server")
	}
	readmeCommands(t)
	e := newEnv(t)

	for _, part := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"README: a backfill of a day without drafts and a day at the cap", e.readme},
		{"slots racing for one day's drafts", e.concurrentSlots},
		{"a day without ready drafts", e.dayWithoutDrafts},
		{"the cap across a 3-day backfill, twice", e.capAcrossBackfill},
	} {
		if !t.Run(part.name, part.run) {
			return
		}
	}

	// Every episode published its own draft exactly once, every draft
	// was claimed at most once, and the ledger holds.
	e.t = t
	eps := e.episodes("")
	if len(eps) != 3+3+9 {
		t.Fatalf("%d episodes, want 15: %+v", len(eps), eps)
	}
	e.wantPublished(eps)
	if n := e.sim.ChargeCount(); n != len(eps) {
		t.Fatalf("the blog holds %d posts for %d episodes", n, len(eps))
	}
	if n := len(e.posts()); n != len(eps) {
		t.Fatalf("the blog was sent %d posts for %d episodes", n, len(eps))
	}
	byState := map[ledger.InputState][]string{}
	for _, in := range e.inputs() {
		byState[in.State] = append(byState[in.State], in.Ref)
	}
	if len(byState[ledger.InputClaimed]) != len(eps) || !slices.Equal(byState[ledger.InputReady], []string{"draft-509", "draft-510"}) {
		t.Fatalf("inputs by state: %v", byState)
	}
	e.wantCheckOK()
	if strings.Contains(e.worker.Output.String(), blogKey) {
		t.Fatal("the worker logged the blog's API key")
	}
}

// 1. The README's commands: five drafts (and the first again), the
// schedule created paused, a backfill of Sunday 2026-09-13 and Monday
// 2026-09-14. Sunday's slots find nothing ready by their nominal times;
// Monday's claim the three oldest drafts, one each, and the fourth is at
// the cap. Backfilled again, nothing changes.
func (e *env) readme(t *testing.T) {
	e.t = t
	for i, d := range append(slices.Clone(readmeDrafts), readmeDrafts[0]) {
		var res ledger.AddInputResult
		e.json(&res, d.add()...)
		if wantAdded := i < len(readmeDrafts); res.Added != wantAdded || res.Input.Ref != d.ref || res.Input.State != ledger.InputReady ||
			!res.Input.ReadyAt.Equal(mustTime(d.readyAt)) {
			t.Fatalf("input add %s (the %d. add): %+v, want added %v", d.ref, i+1, res, wantAdded)
		}
		e.drafts[d.ref] = d
	}
	// The same reference with another payload is refused, and changes
	// nothing.
	changed := readmeDrafts[0]
	changed.body = "Trains run every 15 minutes."
	if out, err := e.starter(append(changed.add(), "--json")...); err == nil || !strings.Contains(string(out), allot.InputConflict) {
		t.Fatalf("input add of draft-101 with another payload: %v\n%s", err, out)
	}

	var sched operator.ScheduleResult
	e.json(&sched, createSchedule...)
	if !sched.Paused || sched.Spec.Cron != "0 9,13,17,21 * * *" || sched.Spec.Jitter != 10*time.Minute {
		t.Fatalf("schedule: %+v", sched)
	}

	var res operator.BackfillResult
	e.json(&res, readmeBackfill...)
	if !res.Sent || res.Runs != 8 || res.Progress == nil || *res.Progress != (operator.BackfillProgress{Total: 8, Done: 8, Started: 8, Allocated: 3, Skipped: 5}) ||
		res.First.Format(time.RFC3339) != "2026-09-13T13:00:00Z" || res.Last.Format(time.RFC3339) != "2026-09-15T01:00:00Z" {
		t.Fatalf("backfill: %+v, progress %+v", res, res.Progress)
	}
	monday := e.waitCompleted("2026-09-14", 3)
	// Sequence i claimed the i-th oldest draft: every Monday slot sees
	// draft-101 to -104 ready, and each allocation takes the oldest left.
	e.wantClaims(monday, "draft-101", "draft-102", "draft-103")
	e.wantPublished(monday)
	e.wantDay("2026-09-13", map[string]int{allot.ReasonNoReadyInput: 4})
	e.wantDay("2026-09-14", map[string]int{allot.ReasonNewEpisode: 3, allot.ReasonCapReached: 1})

	ins := e.inputs()
	want := map[string]string{"draft-101": "2026-09-14-0", "draft-102": "2026-09-14-1", "draft-103": "2026-09-14-2", "draft-104": "", "draft-105": ""}
	if len(ins) != len(want) {
		t.Fatalf("starter input list: %+v", ins)
	}
	for _, in := range ins {
		ep, ok := want[in.Ref]
		wantState := map[bool]ledger.InputState{true: ledger.InputClaimed, false: ledger.InputReady}[ep != ""]
		if !ok || in.EpisodeID != ep || in.State != wantState {
			t.Fatalf("starter input list: %s is %s by %q, want %s by %q", in.Ref, in.State, in.EpisodeID, wantState, ep)
		}
	}
	var listed report.EpisodesResult
	e.json(&listed, listEpisodes...)
	if len(listed.Episodes) != 3 {
		t.Fatalf("starter episodes: %+v", listed.Episodes)
	}
	for i, ep := range listed.Episodes {
		if ep.ID != fmt.Sprintf("2026-09-14-%d", i) || ep.Status != string(allot.OutcomeCompleted) {
			t.Fatalf("starter episodes: %+v", listed.Episodes)
		}
	}
	stats := e.stats()
	if got := runCounts(stats); !maps.Equal(got, map[string]int{"allocated/new_episode": 3, "skipped/cap_reached": 1, "skipped/no_ready_input": 4}) ||
		stats.RunsTotal != 8 || len(stats.WorthALook) != 0 || stats.EpisodesTotal != 3 {
		t.Fatalf("starter stats: runs %v, %+v", got, stats)
	}
	e.wantCheckOK()

	// The same range again: every slot has its recorded run, so nothing
	// starts and nothing changes.
	before := e.state()
	var again operator.BackfillResult
	e.json(&again, readmeBackfill...)
	if again.Progress == nil || *again.Progress != (operator.BackfillProgress{Total: 8, Done: 8, AlreadyDone: 8}) {
		t.Fatalf("backfill again: %+v, progress %+v", again, again.Progress)
	}
	if after := e.state(); after != before {
		t.Fatalf("backfilling again changed something:\nbefore %s\nafter  %s", before, after)
	}
}

// 2. Wednesday 2026-09-16: three drafts are ready (draft-104, left over
// at Monday's cap; Tuesday's, which no slot ran for; one of Wednesday's).
// The four slots
// and three manual runs of the day are each started four times at once,
// twice through the starter binary and twice through operator.Runs: each
// key runs once and all its starts see the same answer; three episodes,
// one per draft, oldest first; each draft published once; every other run
// at the cap.
func (e *env) concurrentSlots(t *testing.T) {
	e.t = t
	const day = "2026-09-16"
	d := draft{"draft-301", "2026-09-16T08:00:00-04:00", "Wednesday market", "Stalls on the concourse from noon."}
	e.addDraft(d)
	if ready := refs(e.inputs("--state", "ready")); !slices.Equal(ready, []string{"draft-104", "draft-105", "draft-301"}) {
		t.Fatalf("ready before the race: %v", ready)
	}

	type start struct {
		key     string
		nominal time.Time
		manual  string // the --key of a manual run
	}
	var starts []start
	for _, slot := range e.slots(day) {
		starts = append(starts, start{key: allot.AllocationKey(pipelineName, slot), nominal: slot})
	}
	for i, hour := range []int{10, 14, 18} {
		manual := fmt.Sprintf("manual-%s-%d", day, i)
		starts = append(starts, start{key: pipelineName + "/" + manual, nominal: time.Date(2026, 9, 16, hour, 30, 0, 0, e.ny), manual: manual})
	}

	type answer struct {
		key, via string
		res      operator.RunResult
		err      error
	}
	var (
		mu      sync.Mutex
		answers []answer
		wg      sync.WaitGroup
		gate    = make(chan struct{})
	)
	ctx, cancel := allottest.Context(t, 3*time.Minute)
	defer cancel()
	for _, s := range starts {
		args := []string{"run", "--pipeline", pipelineName, "--nominal-time", s.nominal.Format(time.RFC3339), "--wait", "--json"}
		in := operator.RunInput{Pipeline: pipelineName, NominalTime: s.nominal, Wait: true}
		if s.manual != "" {
			args = append(args, "--key", s.manual)
			in.Key = s.manual
		}
		for range 2 {
			wg.Go(func() {
				<-gate
				var a answer
				a.key, a.via = s.key, "starter"
				out, err := e.starter(args...)
				if a.err = err; err == nil {
					a.err = json.Unmarshal(out, &a.res)
				}
				if a.err != nil {
					a.err = fmt.Errorf("%w\n%s", a.err, out)
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			})
			wg.Go(func() {
				<-gate
				res, err := e.runs.Run(ctx, in)
				mu.Lock()
				answers = append(answers, answer{key: s.key, via: "operator.Runs", res: res, err: err})
				mu.Unlock()
			})
		}
	}
	close(gate)
	wg.Wait()

	byKey := map[string]workflows.ScheduledRunResult{}
	for _, a := range answers {
		if a.err != nil {
			t.Fatalf("%s run of %s: %v", a.via, a.key, a.err)
		}
		r := a.res.Result
		if a.res.WorkflowID != a.key || r == nil || r.Period != day {
			t.Fatalf("%s run of %s: %+v", a.via, a.key, a.res)
		}
		seen, ok := byKey[a.key]
		if ok && (seen.Outcome != r.Outcome || seen.Reason != r.Reason || seen.EpisodeID != r.EpisodeID || seen.Input != r.Input) {
			t.Fatalf("two starts of %s answered differently: %+v and %+v", a.key, seen, *r)
		}
		byKey[a.key] = *r
	}
	if len(answers) != 4*len(starts) || len(byKey) != len(starts) {
		t.Fatalf("%d answers for %d keys, want %d for %d", len(answers), len(byKey), 4*len(starts), len(starts))
	}
	claimed := map[string]string{} // episode -> draft
	for key, r := range byKey {
		switch {
		case r.Outcome == allot.OutcomeAllocated && r.Reason == allot.ReasonNewEpisode && r.Input != "":
			if _, dup := claimed[r.EpisodeID]; dup {
				t.Fatalf("episode %s allocated to two keys", r.EpisodeID)
			}
			claimed[r.EpisodeID] = r.Input
		case r.Outcome == allot.OutcomeSkipped && r.Reason == allot.ReasonCapReached && r.EpisodeID == "" && r.Input == "":
		default:
			t.Fatalf("run of %s: %+v, want allocated with a draft or skipped at the cap", key, r)
		}
	}
	// Allocation order is sequence order, and each took the oldest draft
	// left: all three were ready by every run's nominal time.
	if want := map[string]string{day + "-0": "draft-104", day + "-1": "draft-105", day + "-2": "draft-301"}; !maps.Equal(claimed, want) {
		t.Fatalf("episodes claimed %v, want %v", claimed, want)
	}
	// However often it was started, each key ran once.
	outcomes := e.runOutcomes()
	for _, s := range starts {
		if o := outcomes[s.key]; len(o) != 1 || o[0].Outcome != byKey[s.key].Outcome || o[0].EpisodeID != byKey[s.key].EpisodeID {
			t.Fatalf("recorded runs of %s: %+v, want one, as answered (%+v)", s.key, o, byKey[s.key])
		}
	}

	eps := e.waitCompleted(day, 3)
	e.wantClaims(eps, "draft-104", "draft-105", "draft-301")
	e.wantPublished(eps)

	// starter input list: every draft so far claimed, each by one episode
	// of its own; none left ready.
	ins := e.inputs()
	owners := map[string]string{}
	for _, in := range ins {
		if in.State != ledger.InputClaimed || in.EpisodeID == "" {
			t.Fatalf("starter input list: %s is %s by %q, want claimed", in.Ref, in.State, in.EpisodeID)
		}
		if other, dup := owners[in.EpisodeID]; dup {
			t.Fatalf("episode %s claimed %s and %s", in.EpisodeID, other, in.Ref)
		}
		owners[in.EpisodeID] = in.Ref
	}
	if len(ins) != 6 || owners[day+"-0"] != "draft-104" || owners[day+"-1"] != "draft-105" || owners[day+"-2"] != "draft-301" {
		t.Fatalf("starter input list: %+v", ins)
	}
}

// 3. Thursday 2026-09-17: every draft is claimed, and the one added now is
// ready only from Friday. The day's four slots, run as the schedule would
// run them, are skipped with no_ready_input: recorded in the ledger,
// counted by starter stats as normal skips (not worth a look), nothing
// allocated and nothing published; Friday's draft waits.
func (e *env) dayWithoutDrafts(t *testing.T) {
	e.t = t
	const day = "2026-09-17"
	e.addDraft(draft{"draft-401", "2026-09-18T08:00:00-04:00", "Friday concert", "Brass band in the main hall at six."})
	before, posts, charges := e.stats(), len(e.posts()), e.sim.ChargeCount()

	for _, slot := range e.slots(day) {
		var r operator.RunResult
		e.json(&r, "run", "--pipeline", pipelineName, "--nominal-time", slot.Format(time.RFC3339), "--wait")
		if res := r.Result; r.Action != operator.RunStarted || res == nil || res.Outcome != allot.OutcomeSkipped || res.Reason != allot.ReasonNoReadyInput ||
			res.EpisodeID != "" || res.Input != "" || res.Period != day || r.WorkflowID != allot.AllocationKey(pipelineName, slot) {
			t.Fatalf("run at %s: %+v, result %+v", slot.Format(time.RFC3339), r, r.Result)
		}
	}
	e.wantDay(day, map[string]int{allot.ReasonNoReadyInput: 4})
	if eps := e.episodes(day); len(eps) != 0 {
		t.Fatalf("episodes of %s: %+v", day, eps)
	}
	if ready := e.inputs("--state", "ready"); len(ready) != 1 || ready[0].Ref != "draft-401" || ready[0].EpisodeID != "" {
		t.Fatalf("ready drafts: %+v, want Friday's draft-401 still waiting", ready)
	}
	if len(e.posts()) != posts || e.sim.ChargeCount() != charges {
		t.Fatalf("a day without drafts published something: %d posts and %d charges, were %d and %d", len(e.posts()), e.sim.ChargeCount(), posts, charges)
	}

	after := e.stats()
	wantRuns := runCounts(before)
	wantRuns["skipped/no_ready_input"] += 4
	if got := runCounts(after); !maps.Equal(got, wantRuns) || after.RunsTotal != before.RunsTotal+4 || after.EpisodesTotal != before.EpisodesTotal {
		t.Fatalf("starter stats after the day: runs %v (total %d), want %v (total %d)", got, after.RunsTotal, wantRuns, before.RunsTotal+4)
	}
	if len(after.WorthALook) != 0 {
		t.Fatalf("starter stats lists skips for no_ready_input as worth a look: %+v", after.WorthALook)
	}
	text := string(e.out(statsCommand...))
	line := regexp.MustCompile(fmt.Sprintf(`(?m)^skipped\s+no_ready_input\s+%d\s*$`, wantRuns["skipped/no_ready_input"]))
	if !line.MatchString(text) || strings.Contains(text, "WORTH A LOOK") {
		t.Fatalf("starter stats should count the skips as normal ones:\n%s", text)
	}
}

// 4. Monday 2026-09-21 to Wednesday 2026-09-23 through the schedule: eleven
// drafts ready (Friday's and ten of Sunday's), more than the three days'
// cap of nine lets through. The backfill allocates three episodes a day
// and skips the fourth slot of each at the cap, whatever order its runs
// allocate in; the nine oldest drafts are claimed and published once.
// Backfilled again, every run gets its answer back (the same episode and
// draft, or the cap) and nothing changes. starter check passes.
func (e *env) capAcrossBackfill(t *testing.T) {
	e.t = t
	days := []string{"2026-09-21", "2026-09-22", "2026-09-23"}
	var added []string
	for i := 1; i <= 10; i++ {
		d := draft{fmt.Sprintf("draft-5%02d", i), "2026-09-20T08:00:00-04:00", fmt.Sprintf("Week notes %d", i), fmt.Sprintf("Item %d of the week's notes.", i)}
		if i%2 == 0 {
			// Half of them from a file, as an editor's tool would.
			file := filepath.Join(e.dir, d.ref+".json")
			if err := os.WriteFile(file, []byte(d.payload()+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var res ledger.AddInputResult
			e.json(&res, "input", "add", "--pipeline", pipelineName, "--ref", d.ref, "--ready-at", d.readyAt, "--payload-file", file)
			if !res.Added {
				t.Fatalf("input add %s: %+v", d.ref, res)
			}
			e.drafts[d.ref] = d
		} else {
			e.addDraft(d)
		}
		added = append(added, d.ref)
	}
	if ready := refs(e.inputs("--state", "ready")); !slices.Equal(ready, append([]string{"draft-401"}, added...)) {
		t.Fatalf("ready before the backfill: %v", ready)
	}

	backfill := []string{"schedule", "backfill", "--pipeline", pipelineName, "--from", "2026-09-21T00:00:00-04:00", "--to", "2026-09-24T00:00:00-04:00"}
	var dry operator.BackfillResult
	e.json(&dry, append(backfill, "--dry-run")...)
	if dry.Sent || dry.Runs != 12 || dry.Existing == nil || *dry.Existing != 0 ||
		dry.First.Format(time.RFC3339) != "2026-09-21T13:00:00Z" || dry.Last.Format(time.RFC3339) != "2026-09-24T01:00:00Z" {
		t.Fatalf("backfill --dry-run: %+v", dry)
	}
	var res operator.BackfillResult
	e.json(&res, backfill...)
	if !res.Sent || res.Progress == nil || *res.Progress != (operator.BackfillProgress{Total: 12, Done: 12, Started: 12, Allocated: 9, Skipped: 3}) {
		t.Fatalf("backfill: %+v, progress %+v", res, res.Progress)
	}
	var eps []ledger.Episode
	for _, day := range days {
		eps = append(eps, e.waitCompleted(day, 3)...)
		e.wantDay(day, map[string]int{allot.ReasonNewEpisode: capPerDay, allot.ReasonCapReached: slotsPerDay - capPerDay})
	}
	// The nine oldest drafts, whichever day's slot took which.
	var claimed []string
	for _, ep := range eps {
		claimed = append(claimed, e.claimOf(ep.ID).Ref)
	}
	slices.Sort(claimed)
	if want := append([]string{"draft-401"}, added[:8]...); !slices.Equal(claimed, want) {
		t.Fatalf("the backfill's episodes claimed %v, want the nine oldest %v", claimed, want)
	}
	if ready := refs(e.inputs("--state", "ready")); !slices.Equal(ready, added[8:]) {
		t.Fatalf("ready after the backfill: %v, want %v", ready, added[8:])
	}
	e.wantPublished(eps)

	// The same range again, through the Schedule (--via-schedule starts
	// every time again, where the default skips the times already done):
	// nothing changes, and each run gets its first answer back from the
	// ledger, the same episode with the same draft.
	first := map[string]workflows.ScheduledRunResult{}
	for _, day := range days {
		for _, slot := range e.slots(day) {
			key := allot.AllocationKey(pipelineName, slot)
			first[key] = e.lastResult(key)
		}
	}
	before := e.state()
	var again operator.BackfillResult
	e.json(&again, append(slices.Clone(backfill), "--via-schedule")...)
	if again.Progress == nil || *again.Progress != (operator.BackfillProgress{Total: 12, Done: 12, Reused: 9, Skipped: 3}) {
		t.Fatalf("backfill again: %+v, progress %+v", again, again.Progress)
	}
	if after := e.state(); after != before {
		t.Fatalf("backfilling again changed something:\nbefore %s\nafter  %s", before, after)
	}
	for key, was := range first {
		now := e.lastResult(key)
		wantOutcome := map[bool]allot.Outcome{true: allot.OutcomeReused, false: allot.OutcomeSkipped}[was.EpisodeID != ""]
		if now.Outcome != wantOutcome || now.EpisodeID != was.EpisodeID || now.Input != was.Input || (was.EpisodeID == "" && now.Reason != allot.ReasonCapReached) {
			t.Fatalf("%s backfilled again: %+v; first %+v", key, now, was)
		}
	}
	for _, day := range days {
		if n := len(e.episodes(day)); n != capPerDay {
			t.Fatalf("%d episodes on %s after two backfills, cap %d", n, day, capPerDay)
		}
	}
	e.wantCheckOK()
}

// env is the example's environment.
type env struct {
	t       *testing.T // the running part's
	dir     string     // the shell's working directory
	dataDir string
	ledger  string
	vars    []string
	bin     string // starter
	sim     *paidvendortest.Simulator
	worker  *allottest.Process
	client  client.Client
	runs    *operator.Runs
	ny      *time.Location
	drafts  map[string]draft // every draft added, by reference

	mu   sync.Mutex
	sent []sent // the posts the blog was sent
}

// sent is one submission the blog received.
type sent struct {
	key    string
	params map[string]string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), drafts: map[string]draft{}}
	e.dataDir = filepath.Join(e.dir, "data")
	e.ledger = "sqlite:" + filepath.Join(e.dataDir, "allot.db")
	var err error
	if e.ny, err = time.LoadLocation(zone); err != nil {
		t.Fatal(err)
	}

	// The blog: posts cost nothing.
	e.sim = paidvendortest.NewSimulator(paidvendortest.SimConfig{
		APIKey: blogKey, Seed: 4, PricePerKind: map[string]paidvendor.Cost{"publish-post": {Amount: 0, Currency: "USD"}},
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == vendorapi.TasksPath {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req vendorapi.SubmitRequest
			_ = json.Unmarshal(body, &req)
			e.mu.Lock()
			e.sent = append(e.sent, sent{key: r.Header.Get(vendorapi.IdempotencyKeyHeader), params: req.Params})
			e.mu.Unlock()
		}
		e.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	shipped, err := os.ReadFile("pipelines.toml")
	if err != nil {
		t.Fatal(err)
	}
	const readmeURL = `"http://127.0.0.1:8804"`
	if strings.Count(string(shipped), readmeURL) != 1 {
		t.Fatalf("pipelines.toml should name %s once (the README runs the blog there)", readmeURL)
	}
	pipelinesFile := filepath.Join(e.dir, "pipelines.toml")
	if err := os.WriteFile(pipelinesFile, []byte(strings.Replace(string(shipped), readmeURL, `"`+srv.URL+`"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := pipeline.Load(pipelinesFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := set.Get(pipelineName)
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxPerPeriod != capPerDay || p.TimeZone != zone || !p.ClaimsInputs() {
		t.Fatalf("pipelines.toml: cap %d, zone %s, inputs %v; the test expects %d, %s, inputs", p.MaxPerPeriod, p.TimeZone, p.ClaimsInputs(), capPerDay, zone)
	}

	dev := allottest.StartDevWith(t, devstack.Config{DataDir: filepath.Join(e.dir, "server"), NoWorker: true, Headless: true})
	workerBin := allottest.BuildBinary(t, "allot/worker")
	e.bin = allottest.BuildBinary(t, "allot/starter")
	// The README's `go build -o data/bin/render-draft`, onto the PATH.
	bin := filepath.Join(e.dataDir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(allottest.BuildBinary(t, "allot/examples/drafts-publisher/render-draft"), filepath.Join(bin, "render-draft")); err != nil {
		t.Fatal(err)
	}
	e.vars = cleanenv.Environ(
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "BLOG_API_KEY="+blogKey,
		"TEMPORAL_ADDRESS="+dev.Info.Frontend, "TEMPORAL_NAMESPACE="+dev.Info.Namespace,
		"ALLOT_LEDGER="+e.ledger, "ALLOT_DATA_DIR="+e.dataDir, "ALLOT_PIPELINES="+pipelinesFile, "ALLOT_VENDOR_URL=")

	cmd := exec.Command(workerBin)
	cmd.Env, cmd.Dir = e.vars, e.dir
	e.worker = allottest.StartProcess(t, cmd)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker output:\n%s", e.worker.Output.String())
		}
	})
	e.worker.WaitOutput(t, regexp.MustCompile(`allot worker starting`), time.Minute)

	// operator.Runs, what the starter's run does, in the test's process.
	e.client = allottest.DialDev(t, dev.Info)
	e.runs = &operator.Runs{Client: e.client, Pipelines: set, TaskQueue: workflows.TaskQueue}
	return e
}

// slots are the schedule's four nominal times of a day in New York.
func (e *env) slots(day string) []time.Time {
	d, err := time.ParseInLocation(time.DateOnly, day, e.ny)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []time.Time
	for _, h := range []int{9, 13, 17, 21} {
		out = append(out, time.Date(d.Year(), d.Month(), d.Day(), h, 0, 0, 0, e.ny))
	}
	return out
}

// addDraft adds a draft with the starter, as an editor would.
func (e *env) addDraft(d draft) {
	e.t.Helper()
	var res ledger.AddInputResult
	e.json(&res, d.add()...)
	if !res.Added || res.Input.Ref != d.ref {
		e.t.Fatalf("input add %s: %+v", d.ref, res)
	}
	e.drafts[d.ref] = d
}

// inputs is `starter input list --json` with extra flags.
func (e *env) inputs(flags ...string) []ledger.Input {
	e.t.Helper()
	var ins []ledger.Input
	e.json(&ins, append(slices.Clone(listInputs), flags...)...)
	return ins
}

func refs(ins []ledger.Input) []string {
	out := []string{}
	for _, in := range ins {
		out = append(out, in.Ref)
	}
	return out
}

func (e *env) stats() report.StatsResult {
	e.t.Helper()
	var s report.StatsResult
	e.json(&s, statsCommand...)
	return s
}

// runCounts are stats' run counts by "outcome/reason".
func runCounts(s report.StatsResult) map[string]int {
	out := map[string]int{}
	for _, c := range s.Runs {
		out[string(c.Outcome)+"/"+c.Reason] += c.Count
	}
	return out
}

func (e *env) wantCheckOK() {
	e.t.Helper()
	var check report.CheckResult
	e.json(&check, checkCommand...)
	if !check.OK || len(check.Violations) != 0 || check.Artifacts == 0 {
		e.t.Fatalf("starter check: %+v", check)
	}
}

func (e *env) withLedger(f func(context.Context, *ledger.Ledger) error) {
	e.t.Helper()
	ctx := context.Background()
	led, err := ledger.OpenReadOnly(ctx, e.ledger)
	if err != nil {
		e.t.Fatal(err)
	}
	defer led.Close()
	if err := f(ctx, led); err != nil {
		e.t.Fatal(err)
	}
}

// episodes are the ledger's episodes of a day ("": all).
func (e *env) episodes(day string) []ledger.Episode {
	e.t.Helper()
	var eps []ledger.Episode
	e.withLedger(func(ctx context.Context, led *ledger.Ledger) (err error) {
		eps, err = led.ListEpisodes(ctx, pipelineName, day)
		return err
	})
	return eps
}

// claimOf is the draft an episode claimed, from the ledger.
func (e *env) claimOf(episode string) ledger.Input {
	e.t.Helper()
	var in *ledger.Input
	e.withLedger(func(ctx context.Context, led *ledger.Ledger) (err error) {
		in, err = led.EpisodeInput(ctx, pipelineName, episode)
		return err
	})
	if in == nil {
		e.t.Fatalf("episode %s claimed no draft", episode)
	}
	return *in
}

// runOutcomes are the recorded runs per allocation key, oldest first.
func (e *env) runOutcomes() map[string][]ledger.RunOutcome {
	e.t.Helper()
	var outs []ledger.RunOutcome
	e.withLedger(func(ctx context.Context, led *ledger.Ledger) (err error) {
		outs, err = led.RunOutcomes(ctx, pipelineName, time.Time{})
		return err
	})
	slices.SortStableFunc(outs, func(a, b ledger.RunOutcome) int { return a.RecordedAt.Compare(b.RecordedAt) })
	m := map[string][]ledger.RunOutcome{}
	for _, o := range outs {
		m[o.AllocationKey] = append(m[o.AllocationKey], o)
	}
	return m
}

// wantDay checks the first recorded run of each of the day's slots: in the
// day's period (New York's, though the 21:00 slot is the next day in UTC),
// counted by reason as want says.
func (e *env) wantDay(day string, want map[string]int) {
	e.t.Helper()
	outcomes := e.runOutcomes()
	got := map[string]int{}
	for _, slot := range e.slots(day) {
		key := allot.AllocationKey(pipelineName, slot)
		o := outcomes[key]
		if len(o) == 0 || o[0].Period != day {
			e.t.Fatalf("recorded runs of %s: %+v, want one in period %s", key, o, day)
		}
		got[o[0].Reason]++
	}
	if !maps.Equal(got, want) {
		e.t.Fatalf("the slots of %s were recorded %v, want %v", day, got, want)
	}
}

// waitCompleted waits (2 minutes) until the day has n episodes, each
// completed with its outcome recorded, and returns them.
func (e *env) waitCompleted(day string, n int) []ledger.Episode {
	e.t.Helper()
	deadline := allottest.Deadline(e.t, 2*time.Minute)
	for {
		eps := e.episodes(day)
		done := len(eps) == n
		for i, ep := range eps {
			if ep.Outcome == string(allot.OutcomeNeedsAttention) || ep.Outcome == string(allot.OutcomeFailed) {
				e.t.Fatalf("episode %s is %s: %s (starter episode show --pipeline %s --episode %s)", ep.ID, ep.Outcome, ep.OutcomeReason, pipelineName, ep.ID)
			}
			done = done && ep.Sequence == i && ep.Status == ledger.EpisodeCompleted && ep.Outcome == string(allot.OutcomeCompleted)
		}
		if done {
			return eps
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: episodes %+v, want %d completed", day, eps, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// wantClaims checks that the day's episodes, in sequence order, claimed
// these drafts.
func (e *env) wantClaims(eps []ledger.Episode, refs ...string) {
	e.t.Helper()
	var got []string
	for _, ep := range eps {
		got = append(got, e.claimOf(ep.ID).Ref)
	}
	if !slices.Equal(got, refs) {
		e.t.Fatalf("episodes %v claimed %v, want %v", eps, got, refs)
	}
}

// wantPublished checks each episode end to end: it claimed one draft, its
// post.md is that draft rendered and recorded with its sha256, and the
// blog was sent exactly one post for it (one request, one charge, under the
// step's idempotency key, naming the draft), which is the publish step's
// recorded reference; and no draft was published twice.
func (e *env) wantPublished(eps []ledger.Episode) {
	e.t.Helper()
	charges := map[string][]paidvendor.Charge{}
	for _, c := range e.sim.Charges() {
		charges[c.IdempotencyKey] = append(charges[c.IdempotencyKey], c)
	}
	byKey, byDraft := map[string][]sent{}, map[string]int{}
	for _, s := range e.posts() {
		byKey[s.key] = append(byKey[s.key], s)
		byDraft[s.params["input"]]++
	}
	for _, ep := range eps {
		in := e.claimOf(ep.ID)
		d, ok := e.drafts[in.Ref]
		if !ok || in.State != ledger.InputClaimed || in.EpisodeID != ep.ID {
			e.t.Fatalf("episode %s claimed %+v", ep.ID, in)
		}

		// render: post.md is the draft, recorded with its sha256.
		path := filepath.Join(e.dataDir, "artifacts", pipelineName, ep.ID, "post.md")
		data, err := os.ReadFile(path)
		want := fmt.Sprintf("# %s\n\n%s\n\n<!-- draft %s, episode %s -->\n", d.title, d.body, d.ref, ep.ID)
		if err != nil || string(data) != want {
			e.t.Fatalf("%s: %q (%v), want %q", path, data, err, want)
		}
		sum := sha256.Sum256(data)
		var steps []ledger.StepRecord
		var tasks []ledger.PaidTask
		e.withLedger(func(ctx context.Context, led *ledger.Ledger) (err error) {
			if steps, err = led.Steps(ctx, pipelineName, ep.ID); err != nil {
				return err
			}
			tasks, err = led.PaidTasks(ctx, pipelineName, ep.ID)
			return err
		})
		if len(steps) != 1 || steps[0].Step != "render" || steps[0].Status != allot.StepCompleted || len(steps[0].Outputs) != 1 ||
			steps[0].Outputs[0].SHA256 != hex.EncodeToString(sum[:]) {
			e.t.Fatalf("episode %s: step records %+v, want render with post.md's sha256", ep.ID, steps)
		}

		// publish: one post, one charge, naming the draft.
		key := allot.IdempotencyKey(pipelineName, ep.ID, "publish", 0)
		posts, cs := byKey[key], charges[key]
		if len(posts) != 1 || len(cs) != 1 {
			e.t.Fatalf("episode %s: the blog was sent %d posts and charged %d times under %s, want one", ep.ID, len(posts), len(cs), key)
		}
		if p := posts[0].params; p["input"] != d.ref || p["episode"] != ep.ID || p["channel"] != "news" || p["step"] != "publish" {
			e.t.Fatalf("episode %s: the blog was sent %v, want draft %s", ep.ID, p, d.ref)
		}
		if byDraft[d.ref] != 1 {
			e.t.Fatalf("draft %s was published %d times", d.ref, byDraft[d.ref])
		}
		if len(tasks) != 1 || tasks[0].Step != "publish" || tasks[0].RemoteRef != cs[0].TaskID || tasks[0].IdempotencyKey != key ||
			(tasks[0].State != allot.PaidSubmitted && tasks[0].State != allot.PaidSucceeded) {
			e.t.Fatalf("episode %s: paid tasks %+v, want publish with the blog's %s", ep.ID, tasks, cs[0].TaskID)
		}
	}
}

func (e *env) posts() []sent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.sent)
}

// lastResult is the result of the latest ScheduledRun of a key.
func (e *env) lastResult(key string) workflows.ScheduledRunResult {
	e.t.Helper()
	ctx, cancel := allottest.Context(e.t, time.Minute)
	defer cancel()
	var r workflows.ScheduledRunResult
	if err := e.client.GetWorkflow(ctx, key, "").Get(ctx, &r); err != nil {
		e.t.Fatalf("result of %s: %v", key, err)
	}
	return r
}

// state is what a repeated backfill could change: the posts and charges,
// the inputs (with their claims), the episodes (with their outcomes).
func (e *env) state() string {
	e.t.Helper()
	data, err := json.Marshal(map[string]any{
		"posts": len(e.posts()), "charges": e.sim.ChargeCount(), "inputs": e.inputs(), "episodes": e.episodes(""),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return string(data)
}

// starter runs the real starter binary, as an operator at a shell would,
// and returns its stdout; safe from any goroutine.
func (e *env) starter(args ...string) ([]byte, error) {
	return e.cli().Run(args...)
}

func (e *env) cli() allottest.Starter { return allottest.Starter{Bin: e.bin, Dir: e.dir, Env: e.vars} }

func (e *env) out(args ...string) []byte {
	e.t.Helper()
	return e.cli().Out(e.t, args...)
}

func (e *env) json(v any, args ...string) {
	e.t.Helper()
	e.cli().JSON(e.t, v, args...)
}

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// readmeCommands fails unless the README's shell block has the starter
// lines this test runs, in this order, builds render-draft onto the PATH
// and runs the blog where pipelines.toml has it.
func readmeCommands(t *testing.T) {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(readme), "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	var got [][]string
	for _, line := range strings.Split(block, "\n") {
		if rest, ok := strings.CutPrefix(line, "go run ./starter "); ok {
			got = append(got, allottest.SplitCommand(t, rest))
		}
	}
	if want := readmeStarterLines(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("the README's starter commands are\n%q\nthe test runs\n%q", got, want)
	}
	for _, s := range []string{"go run ./devserver --no-worker &", "--addr 127.0.0.1:8804", "go build -o data/bin/render-draft ./examples/drafts-publisher/render-draft",
		"PATH=$PWD/data/bin:$PATH", "BLOG_API_KEY=", "ALLOT_PIPELINES=examples/drafts-publisher/pipelines.toml", "go run ./worker &"} {
		if !strings.Contains(block, s) {
			t.Fatalf("the README's commands lack %q, which the test relies on", s)
		}
	}
}
