package devstack_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/pipeline"
)

// temporalLine is devserver's "where to look" line naming the frontend: it
// is printed once everything runs.
var temporalLine = regexp.MustCompile(`Temporal:\s+(\S+) \(namespace`)

// pageLine is devserver's line naming the operator page, beside the Web
// UI's.
var pageLine = regexp.MustCompile(`page:\s+(http://\S+)`)

// startDevserver runs `go run ./devserver` as a user starts it, in its own
// process, with its state under dir/data, and waits until it is ready.
func startDevserver(t *testing.T, bin, dir string) *allottest.Process {
	t.Helper()
	cmd := exec.Command(bin, "--data-dir", filepath.Join(dir, "data"), "--port", "-1", "--ui-port", "-1",
		"--vendor-port", "-1", "--demo-interval", "2s", "--console-addr", "127.0.0.1:0")
	cmd.Dir, cmd.Env = dir, cleanenv.Environ()
	p := allottest.StartProcess(t, cmd)
	p.WaitOutput(t, temporalLine, 3*time.Minute)
	return p
}

// interrupt stops the devserver with SIGINT, as Ctrl-C does, and checks it
// exits 0, says so, and logged no ERROR: a stop is normal operation, and
// the demo's paid tasks (3 s each, a run every 2 s) are awaited when it
// comes, whose cancelled attempts the SDK logged as errors (issue 38 §5).
func interrupt(t *testing.T, p *allottest.Process) {
	t.Helper()
	p.Signal(t, syscall.SIGINT)
	if err := p.Wait(t, 60*time.Second); err != nil {
		t.Fatalf("devserver exit after SIGINT = %v, want 0\n%s", err, p.Output.String())
	}
	if !strings.Contains(p.Output.String(), "allot stopped") {
		t.Fatalf("devserver did not say it stopped:\n%s", p.Output.String())
	}
	if strings.Contains(p.Output.String(), "level=ERROR") {
		t.Fatalf("devserver logged an ERROR in normal operation and its stop:\n%s", p.Output.String())
	}
}

// completedEpisodes reads the ledger the way `starter episodes` does.
func completedEpisodes(t *testing.T, dir string) (completed []ledger.Episode, all []ledger.Episode) {
	t.Helper()
	led, err := ledger.OpenReadOnly(context.Background(), "sqlite:"+filepath.Join(dir, "data", "allot.db"))
	if err != nil {
		return nil, nil // not created yet
	}
	defer led.Close()
	all, err = led.ListEpisodes(context.Background(), "weekly-video", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		if e.Status == ledger.EpisodeCompleted {
			completed = append(completed, e)
		}
	}
	return completed, all
}

func waitCompleted(t *testing.T, dir string, p *allottest.Process, atLeast func([]ledger.Episode) bool) []ledger.Episode {
	t.Helper()
	deadline := allottest.Deadline(t, 3*time.Minute)
	for {
		done, _ := completedEpisodes(t, dir)
		if atLeast(done) {
			return done
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scheduled episode completed in time; completed %+v\n%s", done, p.Output.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// roomForTheDemo raises the demo budget's limit for this week and the next
// far above what a 2-second schedule spends: the embedded demo's 100.00
// USD a week lasts twenty episodes, then they park, and these tests are
// about stopping and starting, not the budget. It creates the ledger the
// devserver then opens.
func roomForTheDemo(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	led, err := ledger.Open(ctx, "sqlite:"+filepath.Join(dir, "data", "allot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	set, err := pipeline.Load("")
	if err != nil {
		t.Fatal(err)
	}
	for i, at := range []time.Time{time.Now(), time.Now().AddDate(0, 0, 7)} {
		if _, err := operator.RaiseBudget(ctx, led, operator.RaiseInput{Pipelines: set, Budget: "video-weekly", Period: pipeline.PeriodOf(pipeline.ISOWeek, at.UTC()),
			Limit: 1_000_000, Reason: "the test is about restarts, not the budget", By: "test", RequestID: fmt.Sprint("room-", i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// chargesByKey counts the simulated vendor's charges per idempotency key.
func chargesByKey(t *testing.T, dir string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, c := range allottest.DevVendorCharges(t, filepath.Join(dir, "data")) {
		out[c.IdempotencyKey]++
	}
	return out
}

func TestOneCommandRunsTheDemoAndResumesAfterSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the devserver binary twice")
	}
	bin := allottest.BuildBinary(t, "allot/devserver")
	dir := t.TempDir()
	roomForTheDemo(t, dir)

	first := startDevserver(t, bin, dir)
	done := waitCompleted(t, dir, first, func(e []ledger.Episode) bool { return len(e) >= 1 })
	// The operator page is served beside the Web UI, with its money and
	// what needs a human.
	m := pageLine.FindStringSubmatch(first.Output.String())
	if m == nil {
		t.Fatalf("devserver printed no operator page:\n%s", first.Output.String())
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Needs a human") || !strings.Contains(string(page), "Money") {
		t.Fatalf("the operator page at %s: %d\n%s", m[1], resp.StatusCode, page)
	}
	interrupt(t, first)
	_, allBefore := completedEpisodes(t, dir)
	chargesBefore := chargesByKey(t, dir)
	if len(chargesBefore) == 0 {
		t.Fatal("the demo completed an episode without paying the vendor")
	}
	maxSeq := -1
	for _, e := range allBefore {
		if e.Sequence > maxSeq {
			maxSeq = e.Sequence
		}
	}
	t.Logf("first start: %d completed, %d allocated, max sequence %d", len(done), len(allBefore), maxSeq)

	second := startDevserver(t, bin, dir)
	waitCompleted(t, dir, second, func(e []ledger.Episode) bool {
		for _, ep := range e {
			if ep.Sequence > maxSeq {
				return true
			}
		}
		return false
	})
	interrupt(t, second)

	led, err := ledger.OpenReadOnly(context.Background(), "sqlite:"+filepath.Join(dir, "data", "allot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	if v, err := led.Check(context.Background(), ""); err != nil || len(v) != 0 {
		t.Fatalf("ledger check after the restart: %v, %v", v, err)
	}
	chargesAfter := chargesByKey(t, dir)
	for key, n := range chargesAfter {
		if n > 1 {
			t.Fatalf("idempotency key %s charged %d times", key, n)
		}
	}
	// Every episode that existed before the restart has exactly the paid
	// tasks it had, plus at most the ones it had not reached yet.
	for _, e := range allBefore {
		for _, step := range []string{"video", "cover"} {
			key := allot.IdempotencyKey("weekly-video", e.ID, step, 0)
			if chargesBefore[key] == 1 && chargesAfter[key] != 1 {
				t.Fatalf("episode %s step %s was charged again after the restart", e.ID, step)
			}
		}
	}
	if len(chargesAfter) <= len(chargesBefore) {
		t.Fatalf("charges %d after, %d before: the schedule did not go on", len(chargesAfter), len(chargesBefore))
	}
}
