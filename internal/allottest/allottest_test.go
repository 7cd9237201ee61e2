package allottest_test

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"allot/internal/allottest"
)

func TestSyncBufferKeepsEveryConcurrentWrite(t *testing.T) {
	var b allottest.SyncBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				fmt.Fprintf(&b, "%d.%d\n", i, j)
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
}

func TestPipelinesAreTheDocumentedOnes(t *testing.T) {
	set := allottest.Pipelines(t)
	want := []string{"auto-paid", "capped", "weekly-paid", "weekly-video"}
	if got := set.Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("pipelines %v, want %v", got, want)
	}
	p, err := set.Get("weekly-paid")
	if err != nil {
		t.Fatal(err)
	}
	if paid := p.PaidStepNames(); strings.Join(paid, ",") != "video,cover" {
		t.Fatalf("weekly-paid's paid steps %v, want video, cover", paid)
	}
}

func TestErrorType(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", temporal.NewNonRetryableApplicationError("gone", "EpisodeNotFound", nil))
	if got := allottest.ErrorType(err); got != "EpisodeNotFound" {
		t.Fatalf("ErrorType = %q", got)
	}
	if got := allottest.ErrorType(errors.New("plain")); got != "" {
		t.Fatalf("ErrorType of a plain error = %q", got)
	}
}

func TestProcessOutputSignalAndExit(t *testing.T) {
	// The trap is set before the ready line: a SIGTERM sent on seeing that line
	// must never reach a shell that has not installed it yet.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	p := allottest.StartProcess(t, exec.Command(sh, "-c", `trap 'echo bye; exit 0' TERM; echo "ready on port 42"; echo oops >&2; while :; do sleep 0.05; done`))
	if m := p.WaitOutput(t, regexp.MustCompile(`port (\d+)`), 10*time.Second); m[1] != "42" {
		t.Fatalf("WaitOutput = %q", m)
	}
	p.Signal(t, syscall.SIGTERM)
	if err := p.Wait(t, 10*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Output.String())
	}
	if out := p.Output.String(); !strings.Contains(out, "oops") || !strings.Contains(out, "bye") {
		t.Fatalf("output lacks stderr or the exit line: %q", out)
	}
}
