package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"allot/ledger"
	"allot/paidvendor"
)

// devProcess is `go run ./devserver` as a user starts it: its own process.
type devProcess struct {
	cmd      *exec.Cmd
	output   *syncBuffer
	done     chan error
	temporal string
}

var temporalLine = regexp.MustCompile(`Temporal:\s+(\S+) \(namespace`)

func startDevProcess(t *testing.T, bin, dir string) *devProcess {
	t.Helper()
	p := &devProcess{output: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, "--data-dir", filepath.Join(dir, "data"), "--port", "-1", "--ui-port", "-1",
		"--vendor-port", "-1", "--demo-interval", "2s")
	p.cmd.Dir = dir
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.output, line)
			if m := temporalLine.FindStringSubmatch(line); m != nil {
				ready <- m[1]
			}
		}
	}()
	go func() { p.done <- p.cmd.Wait() }()
	select {
	case p.temporal = <-ready:
	case err := <-p.done:
		t.Fatalf("devserver exited before it was ready: %v\n%s", err, p.output.String())
	case <-time.After(3 * time.Minute):
		t.Fatalf("devserver did not print where to look:\n%s", p.output.String())
	}
	return p
}

func (p *devProcess) interrupt(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("devserver exit after SIGINT = %v, want 0\n%s", err, p.output.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("devserver did not stop after SIGINT\n%s", p.output.String())
	}
	if !strings.Contains(p.output.String(), "allot stopped") {
		t.Fatalf("devserver did not say it stopped:\n%s", p.output.String())
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

func waitCompleted(t *testing.T, dir string, p *devProcess, atLeast func([]ledger.Episode) bool) []ledger.Episode {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		done, _ := completedEpisodes(t, dir)
		if atLeast(done) {
			return done
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scheduled episode completed in time; completed %+v\n%s", done, p.output.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

type vendorCharge struct {
	TaskID         string `json:"task_id"`
	IdempotencyKey string `json:"idempotency_key"`
}

func chargesByKey(t *testing.T, dir string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "data", "vendorsim.json"))
	if err != nil {
		t.Fatal(err)
	}
	var state struct {
		Charges []vendorCharge `json:"charges"`
	}
	if err := json.Unmarshal(data, &state); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, c := range state.Charges {
		out[c.IdempotencyKey]++
	}
	return out
}

func TestOneCommandRunsTheDemoAndResumesAfterSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the devserver binary twice")
	}
	bin := filepath.Join(t.TempDir(), "allot-devserver")
	if out, err := exec.Command("go", "build", "-o", bin, "allot/devserver").CombinedOutput(); err != nil {
		t.Fatalf("go build ./devserver: %v\n%s", err, out)
	}
	dir := t.TempDir()

	first := startDevProcess(t, bin, dir)
	done := waitCompleted(t, dir, first, func(e []ledger.Episode) bool { return len(e) >= 1 })
	first.interrupt(t)
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

	second := startDevProcess(t, bin, dir)
	waitCompleted(t, dir, second, func(e []ledger.Episode) bool {
		for _, ep := range e {
			if ep.Sequence > maxSeq {
				return true
			}
		}
		return false
	})
	second.interrupt(t)

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
			key := paidvendor.IdempotencyKey("weekly-video", e.ID, step, 0)
			if chargesBefore[key] == 1 && chargesAfter[key] != 1 {
				t.Fatalf("episode %s step %s was charged again after the restart", e.ID, step)
			}
		}
	}
	if len(chargesAfter) <= len(chargesBefore) {
		t.Fatalf("charges %d after, %d before: the schedule did not go on", len(chargesAfter), len(chargesBefore))
	}
}
