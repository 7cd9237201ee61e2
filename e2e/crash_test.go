package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/internal/ledger"
	"allot/internal/operator"
	"allot/paidvendor/paidvendortest"
	"allot/workflows"
)

func TestWorkerKilledDuringPaidTaskResumesWithOneChargePerStep(t *testing.T) {
	c := allottest.NewCluster(t)
	bin := allottest.BuildBinary(t, "allot/worker")

	// A slow vendor, so the kill lands while a paid task runs there.
	vendor := allottest.NewVendor(t, paidvendortest.SimConfig{Seed: 3, TaskDuration: 3 * time.Second})
	sim := vendor.Sim
	pipelines := allottest.WritePipelines(t, c.Dir)
	const queue = "allot-crash-test"
	env := []string{
		"TEMPORAL_ADDRESS=" + c.Server.GetFrontendHostPort(),
		"TEMPORAL_NAMESPACE=" + c.Namespace,
		"TEMPORAL_CONFIG_FILE=" + filepath.Join(c.Dir, "no-temporal-config.toml"),
		"ALLOT_LEDGER=" + c.LedgerURL,
		"ALLOT_PIPELINES=" + pipelines,
		"ALLOT_DATA_DIR=" + c.Dir,
		"ALLOT_TASK_QUEUE=" + queue,
		"ALLOT_VENDOR_URL=" + vendor.URL,
		"ALLOT_VENDOR_API_KEY=" + allottest.VendorKey,
	}
	first := startWorker(t, bin, env)

	runs := &operator.Runs{Client: c.Client, Pipelines: c.Pipelines, TaskQueue: queue}
	res, err := runs.Run(c.Ctx(), operator.RunInput{Pipeline: "auto-paid", NominalTime: monday(), Wait: true})
	if err != nil {
		t.Fatalf("%v\nworker output:\n%s", err, first.Output.String())
	}
	ep := res.Result.EpisodeID

	// Kill the worker once the vendor has accepted the first paid task and
	// the ledger holds its reference, while the task still runs.
	deadline := allottest.Deadline(t, 60*time.Second)
	for {
		task, err := c.Ledger.PaidTask(context.Background(), ledger.PaidTaskRef{Pipeline: "auto-paid", EpisodeID: ep, Step: "video"})
		if err == nil && task.State == allot.PaidSubmitted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the video task was never submitted; worker output:\n%s", first.Output.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.Signal(t, syscall.SIGKILL)
	if err := first.Wait(t, 30*time.Second); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("worker exit = %v, want killed", err)
	}
	if n := sim.ChargeCount(); n != 1 {
		t.Fatalf("charges at the kill = %d, want 1", n)
	}

	second := startWorker(t, bin, env)
	var final workflows.EpisodeResult
	ctx, cancel := allottest.Context(t, 2*time.Minute)
	defer cancel()
	if err := c.Client.GetWorkflow(ctx, allot.EpisodeWorkflowID("auto-paid", ep), "").Get(ctx, &final); err != nil {
		t.Fatalf("episode after restart: %v\nworker output:\n%s", err, second.Output.String())
	}
	if final.Stage != allot.StageCompleted {
		t.Fatalf("final %+v", final)
	}
	if n := sim.ChargeCount(); n != 2 {
		t.Fatalf("vendor charged %d times, want 2 (one per paid step)", n)
	}
	for _, task := range c.PaidTasks("auto-paid", ep) {
		if task.State != allot.PaidSucceeded {
			t.Fatalf("paid task %+v", task)
		}
	}

	// SIGTERM stops the worker cleanly.
	second.Signal(t, syscall.SIGTERM)
	if err := second.Wait(t, 30*time.Second); err != nil {
		t.Fatalf("worker exit on SIGTERM = %v, want 0; output:\n%s", err, second.Output.String())
	}
	for _, out := range []string{first.Output.String(), second.Output.String()} {
		if strings.Contains(out, allottest.VendorKey) {
			t.Fatal("the vendor key is in the worker process's output")
		}
	}
	c.MustCheck()
}

// startWorker runs the worker binary with env added to the test's own.
func startWorker(t *testing.T, bin string, env []string) *allottest.Process {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = cleanenv.Environ(env...)
	return allottest.StartProcess(t, cmd)
}
