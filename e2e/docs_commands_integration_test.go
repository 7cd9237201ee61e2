package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/docstest"
	"allot/internal/ledgertest"
	"allot/paidvendor/paidvendortest"
	"allot/pipeline"
)

// docsPipelines is what the README and docs/ assume a reader runs: the
// devserver's weekly-video with its budget video-weekly
// (pipeline/pipelines.toml), the vendor videogen of
// docs/steps-and-vendors.md, and the pipeline drafts of docs/inputs.md.
func docsPipelines(t *testing.T) string {
	t.Helper()
	base := string(pipeline.DefaultConfig)
	for _, want := range []string{`name      = "video-weekly"`, `max_cost = { amount = 250, currency = "USD" }`} {
		if !strings.Contains(base, want) {
			t.Fatalf("pipeline/pipelines.toml lacks %s, which the docs' budget commands use", want)
		}
	}
	return base + `
[[vendor]]
name        = "videogen"
adapter     = "http"
url         = "https://api.videogen.example"
api_key_env = "VIDEOGEN_API_KEY"

[[pipeline]]
name   = "drafts"
period = "day"
max_episodes_per_period = 3
  [pipeline.inputs]
  claim = "oldest_ready"
  [[pipeline.step]]
  name = "publish"
  kind = "local"
`
}

// docStep is one documented starter command, run as written except for
// the names the test substitutes (an episode the page assumes is in some
// state, a vendor reference it elides as vt_...).
type docStep struct {
	line string // as written after `go run ./starter `
	// prep brings the cluster to the state the page describes and returns
	// the substitutions: written text -> what this run has.
	prep func(d *docsRun) map[string]string
	want string // a regular expression what it prints must match (and it exits 0)
	// elsewhere names the test that runs the command instead ("file
	// TestName", checked to exist), for one that needs another worker (the
	// custom worker's pipeline).
	elsewhere string
}

type docsRun struct {
	t       *testing.T
	c       *allottest.Cluster
	starter allottest.Starter
	out     string // what the last command printed
}

func (d *docsRun) run(args ...string) string {
	d.t.Helper()
	return string(d.starter.Out(d.t, args...))
}

// allocateAt allocates an episode of weekly-video at nominal and waits for
// it to reach stage.
func (d *docsRun) allocateAt(nominal time.Time, stage allot.Stage) string {
	d.t.Helper()
	ep := d.c.Allocate("weekly-video", nominal)
	d.c.WaitStage("weekly-video", ep, stage)
	return ep
}

// parkUnknown allocates episodes at nominal times whose video task's
// outcome is unknown (accepted, charged, the answer lost, no look-up), and
// lets the vendor answer look-ups again.
func (d *docsRun) parkUnknown(nominal ...time.Time) []string {
	d.t.Helper()
	if err := d.c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{LoseResponseAfterAccept: 1, NoLookup: true}); err != nil {
		d.t.Fatal(err)
	}
	var eps []string
	for _, n := range nominal {
		eps = append(eps, d.allocateAt(n, allot.StageNeedsAttention))
	}
	if err := d.c.Vendor.Sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		d.t.Fatal(err)
	}
	return eps
}

func week(y, w int) time.Time {
	// ISO week w of y starts on the Monday of the week holding January 4.
	jan4 := time.Date(y, 1, 4, 2, 0, 0, 0, time.UTC)
	monday := jan4.AddDate(0, 0, -((int(jan4.Weekday()) + 6) % 7))
	return monday.AddDate(0, 0, 7*(w-1))
}

// docSteps runs every starter command of the README and docs/, in an order
// that gives each the state its page describes.
func docSteps() []docStep {
	var unknown []string // episodes parked with an unknown outcome
	var adoptRef string
	var gated []string // episodes back at the approval gate after an operator's command
	return []docStep{
		// deploying.md and operating.md: register the search attributes.
		{line: `setup`, want: `AllotPipeline`},
		{line: `run --pipeline weekly-video --wait`, want: `allocated`},

		// README: the tour, on a demo episode of the week of 2026-11-30;
		// its shell variables hold what the command before printed.
		{line: `episodes --pipeline weekly-video`, prep: func(d *docsRun) map[string]string {
			ep := d.allocateAt(week(2026, 49), allot.StageWaitingApproval)
			d.run("episode", "approve", "--pipeline", "weekly-video", "--episode", ep, "--reason", "demo")
			if got := d.c.WaitEpisode("weekly-video", ep); got.Stage != allot.StageCompleted {
				d.t.Fatalf("the demo episode: %+v", got)
			}
			return nil
		}, want: `2026-W49-0`},
		{line: `runs --pipeline weekly-video`, want: `allocated`},
		{line: `run --pipeline weekly-video --nominal-time "$T" --wait`, prep: tourTime, want: `allocated \(new_episode\)`},
		{line: `run --pipeline weekly-video --nominal-time "$T" --wait`, prep: tourTime, want: `existing(.|\n)*reused: the key's run had finished, so nothing was started and nothing paid`},
		{line: `run --pipeline weekly-video --nominal-time "$T" --print-episode`, prep: tourTime, want: `(?m)^2026-W49-\d+$`},
		{line: `episode show --pipeline weekly-video --episode "$EP"`, prep: printedEpisode, want: `video`},
		{line: `costs --pipeline weekly-video`, want: `USD`},
		{line: `budget show video-weekly --period "$WEEK"`, prep: tourWeek, want: `video-weekly\s+2026-W49`},
		{line: `budget set-limit video-weekly --period "$WEEK" --limit 100000 --reason "the tour goes on"`, prep: tourWeek, want: `1000\.00`},
		// The devserver's demo schedule, which the tour slows.
		{line: `schedule update --pipeline weekly-video --interval 10m`, prep: func(d *docsRun) map[string]string {
			d.run("schedule", "create", "--pipeline", "weekly-video")
			return nil
		}, want: `interval +10m0s`},
		{line: `run --pipeline weekly-video --follow --print-episode`, prep: func(d *docsRun) map[string]string {
			d.run("schedule", "delete", "--pipeline", "weekly-video") // the operating.md steps create it
			return nil
		}, want: `(?m)^\d{4}-W\d{2}-\d+$`},
		{line: `episode show --pipeline weekly-video --episode "$EP"`, prep: printedEpisode, want: `waiting_approval`},
		{line: `episode approve --pipeline weekly-video --episode "$EP" --reason "looks right"`, prep: printedEpisode, want: `approved`},
		{line: `check`, want: `^ok: the ledger's invariants hold`},

		// inputs.md
		{line: `input add --pipeline drafts --ref draft-118 --payload '{"title": "Launch notes"}'`, want: `draft-118`},
		{line: `input add --pipeline drafts --ref draft-119 --ready-at 2026-08-04T09:00:00Z --payload-file draft-119.json`, prep: func(d *docsRun) map[string]string {
			if err := os.WriteFile(filepath.Join(d.starter.Dir, "draft-119.json"), []byte(`{"title": "Pricing"}`), 0o644); err != nil {
				d.t.Fatal(err)
			}
			return nil
		}, want: `draft-119`},
		{line: `input list --pipeline drafts --state ready --json`, want: `draft-118`},
		{line: `input withdraw --pipeline drafts --ref draft-119`, want: `withdrawn`},
		{line: `input list --pipeline drafts`, want: `draft-118`},

		// budgets.md, after the tour's paid tasks drew on the budget.
		{line: `budget list`, want: `video-weekly`},
		{line: `budget show video-weekly --period 2026-W32`, want: `video-weekly`},
		{line: `budget set-limit video-weekly --period 2026-W32 --limit 100000 --reason "launch week"`, want: `100000|1000\.00`},
		{line: `budget acknowledge video-weekly --period 2026-W20 --reason "spent before the budget existed"`, prep: func(d *docsRun) map[string]string {
			// A week the budget's records leave out: its video was charged
			// with nothing reserved, as before the budget existed.
			fixture := &ledgertest.Ledger{T: d.t, Led: d.c.Ledger}
			fixture.ChargeWithoutReservation("weekly-video", time.Date(2026, 5, 11, 2, 0, 0, 0, time.UTC), "vt_before_the_budget", 4000)
			return nil
		}, want: `acknowledged +weekly-video/2026-W20-0 step video`},

		// steps-and-vendors.md
		{line: `run --pipeline weekly-digest --nominal-time 2026-08-03T02:00:00Z --follow`, elsewhere: "examples/custom-worker/main_test.go TestDocsBuildAndRunTheCustomWorker"},
		{line: `vendor pause videogen --reason "bills twice since 09:10"`, want: `paused`},
		{line: `vendor list`, want: `videogen`},
		{line: `vendor list --history`, want: `videogen\s+pause\s+\S+\s+\S+\s+bills twice since 09:10`},
		{line: `vendor resume videogen`, want: `videogen`},
		{line: `vendor show videogen`, want: `a lost response is looked up by allot's idempotency key`},

		// operating.md, the starter CLI; the import first, so that its
		// weeks count as existing for the backfills below.
		{line: `import --pipeline weekly-video --from examples/import/weekly-video.jsonl`, want: `2026-W29`},
		{line: `run --pipeline weekly-video --nominal-time 2026-08-03T02:00:00Z --wait`, want: `allocated`},
		{line: `run --pipeline weekly-video --nominal-time 2026-08-03T02:00:00Z`, want: `reused|allocated`},
		{line: `run --pipeline weekly-video --nominal-time 2026-08-03T02:00:00Z --follow`, want: `waiting_approval`},
		{line: `episodes --pipeline weekly-video --period 2026-W32`, want: `2026-W32-0`},
		{line: `costs    --pipeline weekly-video --period 2026-W32`, want: `USD`},
		{line: `stats    --pipeline weekly-video --since 2026-08-01T00:00:00Z`, want: `allocated +new_episode`},
		{line: `runs     --pipeline weekly-video --since 2026-08-01T00:00:00Z --status running`, want: `weekly-video/episode/2026-W32-0 +Running`},
		{line: `budget list`, want: `video-weekly`},
		{line: `vendor list`, want: `videogen`},
		{line: `costs export --format focus --since 2026-08-01T00:00:00Z --until 2026-09-01T00:00:00Z`, want: `(?m)^BilledCost,BillingAccountId,`},

		// operating.md, the episode commands: 2026-W32-0 waits for its
		// approval; the others get an episode in the state they need.
		{line: `episode show       --pipeline weekly-video --episode 2026-W32-0`, want: `waiting_approval`},
		{line: `episode reject     --pipeline weekly-video --episode 2026-W32-0 --reason "off-brand"`, prep: func(d *docsRun) map[string]string {
			return map[string]string{"2026-W32-0": d.allocateAt(week(2026, 33), allot.StageWaitingApproval)}
		}, want: `rejected`},
		{line: `episode rework     --pipeline weekly-video --episode 2026-W32-0 --step video`, prep: func(d *docsRun) map[string]string {
			gated = append(gated, d.allocateAt(week(2026, 34), allot.StageWaitingApproval))
			return map[string]string{"2026-W32-0": gated[len(gated)-1]}
		}, want: `video`},
		{line: `episode reassemble --pipeline weekly-video --episode 2026-W32-0`, prep: func(d *docsRun) map[string]string {
			gated = append(gated, d.allocateAt(week(2026, 35), allot.StageWaitingApproval))
			return map[string]string{"2026-W32-0": gated[len(gated)-1]}
		}, want: `assemble`},
		{line: `episode approve    --pipeline weekly-video --episode 2026-W32-0 --reason "ok"`, want: `approved`},
		{line: `episode lookup     --pipeline weekly-video --episode 2026-W32-0 --step video`, prep: func(d *docsRun) map[string]string {
			unknown = d.parkUnknown(week(2026, 36), week(2026, 37), week(2026, 38), week(2026, 39))
			return map[string]string{"2026-W32-0": unknown[0]}
		}, want: `--adopt`},
		{line: `episode resolve    --pipeline weekly-video --episode 2026-W32-0 --step video --adopt vt_...`, prep: func(d *docsRun) map[string]string {
			m := regexp.MustCompile(`--adopt (\S+)`).FindStringSubmatch(d.out)
			if m == nil {
				d.t.Fatalf("the look-up printed no adopt command:\n%s", d.out)
			}
			adoptRef = m[1]
			return map[string]string{"2026-W32-0": unknown[0], "vt_...": adoptRef}
		}},
		{line: `episode resolve    --pipeline weekly-video --episode 2026-W32-0 --step video --resubmit`, prep: func(d *docsRun) map[string]string {
			return map[string]string{"2026-W32-0": unknown[1]}
		}},
		{line: `episode resolve    --pipeline weekly-video --episode 2026-W32-0 --step video --abandon --reason "refunded"`, prep: func(d *docsRun) map[string]string {
			return map[string]string{"2026-W32-0": unknown[2]}
		}},
		{line: `episode resolve --pipeline weekly-video --episode 2026-W32-0 --step video --abandon --reason "vendor gone"`,
			elsewhere: "e2e/vendor_abandon_integration_test.go TestAbandonEndsTheWaitForAVendorThatNeverComesBack"},
		{line: `episode resolve    --pipeline weekly-video --episode 2026-W32-0 --step video --retry`, prep: func(d *docsRun) map[string]string {
			return map[string]string{"2026-W32-0": unknown[3]}
		}},
		// Every episode the commands above sent back to the gate, approved
		// at once, a decision each.
		{line: `episode approve    --pipeline weekly-video --waiting --reason "ok"`, prep: func(d *docsRun) map[string]string {
			for _, ep := range append(gated, unknown...) {
				d.c.WaitStage("weekly-video", ep, allot.StageWaitingApproval)
			}
			return nil
		}, want: `approve +weekly-video/episode/\S+ +running`},
		{line: `episode resume     --pipeline weekly-video --episode 2026-W32-0`, prep: func(d *docsRun) map[string]string {
			ep := d.allocateAt(week(2026, 40), allot.StageWaitingApproval)
			if err := d.c.Client.TerminateWorkflow(d.c.Ctx(), allot.EpisodeWorkflowID("weekly-video", ep), "", "the page's case: no workflow runs it"); err != nil {
				d.t.Fatal(err)
			}
			return map[string]string{"2026-W32-0": ep}
		}, want: `started`},

		// operating.md, schedules and backfills.
		{line: `schedule create   --pipeline weekly-video`, want: `weekly-video`},
		{line: `schedule describe --pipeline weekly-video`, want: `cron +0 2 \* \* 1`},
		{line: `schedule update   --pipeline weekly-video --cron '0 2 * * MON'`, want: `weekly-video`},
		{line: `schedule list`, want: `weekly-video`},
		{line: `schedule pause    --pipeline weekly-video --note "vendor outage"`, want: `paused`},
		{line: `schedule describe --pipeline weekly-video`, want: `vendor outage`},
		{line: `schedule unpause  --pipeline weekly-video`, want: `paused +false`},
		{line: `schedule trigger  --pipeline weekly-video`, want: `ran +\S+ +weekly-video/scheduled-`},
		// The imported weeks W29-W31 count as existing; W28 allocates.
		{line: `schedule backfill --pipeline weekly-video --from 2026-07-06T00:00:00Z --to 2026-08-03T00:00:00Z --dry-run`, want: `already have episodes +3 `},
		{line: `schedule backfill --pipeline weekly-video --from 2026-07-06T00:00:00Z --to 2026-08-03T00:00:00Z`, want: `4/4 done, processed: 1 allocated`},
		{line: `schedule backfill --pipeline weekly-video --from 2026-01-05T00:00:00Z --to 2026-03-30T00:00:00Z --yes --rate 20`, want: `12/12 done, processed: 12 allocated`},
		{line: `schedule backfill --pipeline weekly-video --from 2026-07-06T00:00:00Z --to 2026-08-03T00:00:00Z --via-schedule`, want: `4/4 done, processed: 0 allocated, 4 reused`},
		{line: `schedule catch-up --pipeline weekly-video --dry-run`, want: `catch-up +weekly-video, policy`},
		{line: `schedule catch-up --pipeline weekly-video --until 2026-12-01T09:00:00Z`, want: `up to 2026-12-01T09:00:00Z`},
		{line: `schedule delete   --pipeline weekly-video`, want: `deleted`},
		{line: `schedule create   --pipeline weekly-video --interval 1h --jitter 30s`, want: `interval +1h0m0s\njitter +30s`},

		// troubleshooting.md: a schedule that no longer fires.
		{line: `schedule describe --pipeline weekly-video`, prep: func(d *docsRun) map[string]string {
			d.run("schedule", "pause", "--pipeline", "weekly-video", "--note", "vendor outage")
			return nil
		}, want: `paused +true\nnote +by \S+: vendor outage`},
		{line: `runs --pipeline weekly-video --status failed`, want: `0 execution`},
		{line: `schedule unpause --pipeline weekly-video`, want: `paused +false`},
		{line: `run --pipeline weekly-video --nominal-time 2026-12-01T09:00:00Z`, want: `existing`},

		// operating.md and deploying.md: the operator page serves until
		// interrupted; its own test runs both lines as written.
		{line: `console --addr 127.0.0.1:8091 --web-ui http://127.0.0.1:8233`, elsewhere: "e2e/console_integration_test.go TestConsoleServesThePageAsDocumented"},
		{line: `console --web-ui http://127.0.0.1:8080`, elsewhere: "e2e/console_integration_test.go TestConsoleServesThePageAsDocumented"},
		{line: `operator-token --name alice --file /etc/allot/console-tokens`, elsewhere: "e2e/console_integration_test.go TestConsoleActsAsDocumented"},
		{line: `console --addr 0.0.0.0:8090 --token-file /etc/allot/console-tokens --web-ui http://127.0.0.1:8080`, elsewhere: "e2e/console_integration_test.go TestConsoleActsAsDocumented"},

		// README: and the ledger holds after all of it.
		{line: `check`, want: `^ok: the ledger's invariants hold`},
	}
}

// The README tour's shell variables: T, its nominal time; EP, the episode
// the command before printed; WEEK, the ISO week of T.
func tourTime(*docsRun) map[string]string { return map[string]string{"$T": "2026-12-01T09:00:00Z"} }

func tourWeek(*docsRun) map[string]string { return map[string]string{"$WEEK": "2026-W49"} }

func printedEpisode(d *docsRun) map[string]string {
	return map[string]string{"$EP": episodeIn(d.t, d.out)}
}

// episodeIn is the one episode ID (2026-W49-3) in what a command printed.
func episodeIn(t *testing.T, out string) string {
	t.Helper()
	ids := regexp.MustCompile(`\b\d{4}-W\d{2}-\d+\b`).FindAllString(out, -1)
	if len(ids) == 0 {
		t.Fatalf("no episode in:\n%s", out)
	}
	return ids[len(ids)-1]
}

// Every starter command the README and docs/ show runs, as written, on a
// real server, worker, ledger and vendor, in the state its page describes,
// and does what the page says. A command added to a page that no step here
// runs fails the test, as does a step whose command no page shows.
func TestEveryDocumentedStarterCommandRuns(t *testing.T) {
	cmds, err := docstest.StarterCommands("..")
	if err != nil {
		t.Fatal(err)
	}
	steps := docSteps()
	key := func(line string) string { return strings.Join(allottest.SplitCommand(t, line), "\x1f") }
	inSteps := map[string]bool{}
	for _, s := range steps {
		inSteps[key(s.line)] = true
	}
	documented := map[string]bool{}
	for _, c := range cmds {
		if strings.HasPrefix(c.Line, "<") {
			continue // the general form: starter <command> [flags]
		}
		documented[key(c.Line)] = true
		if !inSteps[key(c.Line)] {
			t.Errorf("%s: `starter %s` is run by no test: add it to docSteps", c.Where, c.Line)
		}
	}
	for _, s := range steps {
		if !documented[key(s.line)] {
			t.Errorf("docSteps runs `starter %s`, which no page shows", s.line)
		}
		if s.elsewhere != "" {
			file, test, _ := strings.Cut(s.elsewhere, " ")
			src, err := os.ReadFile(filepath.Join("..", file))
			if err != nil || !strings.Contains(string(src), "func "+test+"(") {
				t.Errorf("`starter %s` is said to be run by %s in %s, which has no such test (%v)", s.line, test, file, err)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	toml := docsPipelines(t)
	c := allottest.NewClusterWithPipelines(t, []byte(toml))
	dir := t.TempDir()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// The pages' paths are the repository's: examples/ is where they say.
	if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	d := &docsRun{t: t, c: c, starter: allottest.Starter{Bin: allottest.BuildBinary(t, "allot/starter"), Dir: dir, Env: []string{
		"TEMPORAL_ADDRESS=" + c.Server.GetFrontendHostPort(), "TEMPORAL_NAMESPACE=" + c.Namespace,
		"TEMPORAL_CONFIG_FILE=" + filepath.Join(dir, "no-temporal-config.toml"),
		"ALLOT_LEDGER=" + c.LedgerURL, "ALLOT_PIPELINES=" + writeFile(t, toml), "ALLOT_DATA_DIR=" + c.Dir,
		"ALLOT_VENDOR_URL=" + c.Vendor.URL, "ALLOT_VENDOR_API_KEY=" + allottest.VendorKey,
		"VIDEOGEN_API_KEY=" + allottest.VendorKey, "USER=maria", "HOME=" + t.TempDir(),
	}}}
	for i, s := range steps {
		if s.elsewhere != "" {
			continue
		}
		line := s.line
		if s.prep != nil {
			for from, to := range s.prep(d) {
				line = strings.ReplaceAll(line, from, to)
			}
		}
		args := allottest.SplitCommand(t, line)
		out, err := d.starter.Run(args...)
		code := 0
		if err != nil {
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("step %d: `starter %s`: %v", i, line, err)
			}
			code = exit.ExitCode()
		}
		d.out = string(out)
		if err != nil {
			d.out += "\n" + err.Error()
		}
		t.Logf("step %d: starter %s\n%s", i, line, d.out)
		if code != 0 {
			t.Fatalf("step %d: `starter %s` exited %d, the page promises success:\n%s", i, line, code, d.out)
		}
		if s.want != "" && !regexp.MustCompile(s.want).MatchString(d.out) {
			t.Fatalf("step %d: `starter %s` printed no %q:\n%s", i, line, s.want, d.out)
		}
	}
	c.Vendor.AssertAtMostOneChargePerKey(t)
	c.MustCheck()
}
