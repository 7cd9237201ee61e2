package app_test

import (
	"allot"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"allot/ledger"
	"allot/operator"
	"allot/paidvendor"
	"allot/workflows"
)

// buildWorker compiles the worker main once per test binary.
func buildWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "allot-worker")
	cmd := exec.Command("go", "build", "-o", bin, "allot/worker")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./worker: %v\n%s", err, out)
	}
	return bin
}

// workerProcess is the real worker binary in its own OS process.
type workerProcess struct {
	cmd    *exec.Cmd
	output *syncBuffer
	done   chan error
}

func startWorkerProcess(t *testing.T, bin string, env []string) *workerProcess {
	t.Helper()
	w := &workerProcess{cmd: exec.Command(bin), output: &syncBuffer{}, done: make(chan error, 1)}
	w.cmd.Env = append(os.Environ(), env...)
	w.cmd.Stdout, w.cmd.Stderr = w.output, w.output
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- w.cmd.Wait() }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
	})
	return w
}

func (w *workerProcess) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-w.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("worker process did not exit; output:\n%s", w.output.String())
		return nil
	}
}

func TestWorkerKilledDuringPaidTaskResumesWithOneChargePerStep(t *testing.T) {
	c := newCluster(t)
	bin := buildWorker(t)

	// A slow vendor, so the kill lands while a paid task runs there.
	sim := paidvendor.NewSimulator(paidvendor.SimConfig{APIKey: vendorKey, Seed: 3, TaskDuration: 3 * time.Second})
	vendor := httptest.NewServer(http.HandlerFunc(sim.ServeHTTP))
	t.Cleanup(vendor.Close)
	pipelines := filepath.Join(c.dir, "pipelines.toml")
	if err := os.WriteFile(pipelines, []byte(testPipelines), 0o644); err != nil {
		t.Fatal(err)
	}
	const queue = "allot-crash-test"
	env := []string{
		"TEMPORAL_ADDRESS=" + c.server.GetFrontendHostPort(),
		"TEMPORAL_NAMESPACE=" + c.namespace,
		"TEMPORAL_CONFIG_FILE=" + filepath.Join(c.dir, "no-temporal-config.toml"),
		"ALLOT_LEDGER=" + c.ledgerURL,
		"ALLOT_PIPELINES=" + pipelines,
		"ALLOT_DATA_DIR=" + c.dir,
		"ALLOT_TASK_QUEUE=" + queue,
		"ALLOT_VENDOR_URL=" + vendor.URL,
		"ALLOT_VENDOR_API_KEY=" + vendorKey,
	}
	first := startWorkerProcess(t, bin, env)

	runs := &operator.Runs{Client: c.client, Pipelines: c.pipelines, TaskQueue: queue}
	res, err := runs.Run(c.ctx(), operator.RunInput{Pipeline: "auto-paid", NominalTime: monday(), Wait: true})
	if err != nil {
		t.Fatalf("%v\nworker output:\n%s", err, first.output.String())
	}
	ep := res.Result.EpisodeID

	// Kill the worker once the vendor has accepted the first paid task and
	// the ledger holds its reference, while the task still runs.
	deadline := time.Now().Add(60 * time.Second)
	for {
		task, err := c.ledger.PaidTask(context.Background(), ledger.PaidTaskRef{Pipeline: "auto-paid", EpisodeID: ep, Step: "video"})
		if err == nil && task.State == allot.PaidSubmitted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the video task was never submitted; worker output:\n%s", first.output.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := first.wait(t); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("worker exit = %v, want killed", err)
	}
	if n := sim.ChargeCount(); n != 1 {
		t.Fatalf("charges at the kill = %d, want 1", n)
	}

	second := startWorkerProcess(t, bin, env)
	var final workflows.EpisodeResult
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.client.GetWorkflow(ctx, workflows.EpisodeWorkflowID("auto-paid", ep), "").Get(ctx, &final); err != nil {
		t.Fatalf("episode after restart: %v\nworker output:\n%s", err, second.output.String())
	}
	if final.Stage != allot.StageCompleted {
		t.Fatalf("final %+v", final)
	}
	if n := sim.ChargeCount(); n != 2 {
		t.Fatalf("vendor charged %d times, want 2 (one per paid step)", n)
	}
	for _, task := range c.paidTasks("auto-paid", ep) {
		if task.State != allot.PaidSucceeded {
			t.Fatalf("paid task %+v", task)
		}
	}

	// SIGTERM stops the worker cleanly.
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.wait(t); err != nil {
		t.Fatalf("worker exit on SIGTERM = %v, want 0; output:\n%s", err, second.output.String())
	}
	for _, out := range []string{first.output.String(), second.output.String()} {
		if strings.Contains(out, vendorKey) {
			t.Fatal("the vendor key is in the worker process's output")
		}
	}
	c.mustCheck()
}
