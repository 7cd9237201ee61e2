package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"allot"
	"allot/internal/allottest"
	"allot/internal/cleanenv"
	"allot/internal/pipelinetest"
	"allot/workflows"
)

// footprintRuns is how many runs BenchmarkWorkerFootprint starts at once.
const footprintRuns = 200

// BenchmarkWorkerFootprint measures the memory of the real `worker` binary,
// built as a user builds it and run as its own process against an embedded
// Temporal server in this process, on a SQLite ledger:
//
//	go test -run '^$' -bench WorkerFootprint -benchtime 1x ./bench/
//
// It reads VmRSS from /proc/<pid>/status once the worker has started and
// idled for 5 s (idle-MiB); then, each iteration, starts 200 runs of the
// three-local-step pipeline at once and waits until every episode has
// completed, sampling VmRSS every 50 ms (load-peak-MiB, the largest
// sample); at the end it reads VmHWM, the kernel's high-water mark of the
// process's resident memory (hwm-MiB), and VmRSS 5 s after the load
// (after-MiB). It also reports how long the load took (load-s). Figures in
// MiB (2^20 bytes).
func BenchmarkWorkerFootprint(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc/<pid>/status (Linux)")
	}
	bin := buildBinary(b, "allot/worker")
	st := startTemporal(b, defaultStore())
	dir := b.TempDir()
	pipelines := pipelinetest.Write(b, dir, benchPipelinesTOML)
	cmd := exec.Command(bin)
	cmd.Env = cleanenv.Environ(
		"TEMPORAL_ADDRESS="+st.Server.FrontendAddress(),
		"TEMPORAL_NAMESPACE="+st.Namespace,
		"TEMPORAL_CONFIG_FILE="+filepath.Join(dir, "no-temporal-config.toml"),
		"ALLOT_LEDGER=sqlite:"+filepath.Join(dir, "allot.db"),
		"ALLOT_PIPELINES="+pipelines,
		"ALLOT_DATA_DIR="+dir,
		"ALLOT_TASK_QUEUE="+workflows.TaskQueue,
	)
	var out allottest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "allot worker starting") {
		select {
		case err := <-exited:
			b.Fatalf("worker exited (%v):\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatalf("worker did not start:\n%s", out.String())
		}
	}
	pid := cmd.Process.Pid
	time.Sleep(5 * time.Second)
	idle := procStatusMiB(b, pid, "VmRSS")

	ctx := context.Background()
	w := &allotWorker{TaskQueue: workflows.TaskQueue}
	clock := newNominalClock(time.Date(2025, 6, 2, 0, 0, 0, 0, time.UTC))
	var peak atomic.Uint64 // KiB
	var loadTime time.Duration
	for b.Loop() {
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for {
				if kb, err := procStatusKiB(pid, "VmRSS"); err == nil && kb > peak.Load() {
					peak.Store(kb)
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
		times := make([]time.Time, footprintRuns)
		for i := range times {
			times[i] = clock.take()
		}
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, footprintRuns)
		for i := range footprintRuns {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = w.runWithoutLedger(ctx, st, times[i]) }()
		}
		wg.Wait()
		loadTime += time.Since(start)
		close(stop)
		<-sampled
		for _, err := range errs {
			if err != nil {
				b.Fatalf("%v\nworker output:\n%s", err, out.String())
			}
		}
	}
	hwm := procStatusMiB(b, pid, "VmHWM")
	time.Sleep(5 * time.Second)
	after := procStatusMiB(b, pid, "VmRSS")
	b.ReportMetric(idle, "idle-MiB")
	b.ReportMetric(float64(peak.Load())/1024, "load-peak-MiB")
	b.ReportMetric(hwm, "hwm-MiB")
	b.ReportMetric(after, "after-MiB")
	b.ReportMetric(loadTime.Seconds()/float64(b.N), "load-s")
	b.ReportMetric(float64(footprintRuns*b.N)/loadTime.Seconds(), "runs/s")
}

// runWithoutLedger is runAllot for a worker in another process: the run
// carries no ledger ID (the worker uses its own ledger).
func (w *allotWorker) runWithoutLedger(ctx context.Context, st *stack, nominal time.Time) error {
	key := allot.AllocationKey(benchPipeline, nominal)
	run, err := st.Client.ExecuteWorkflow(ctx, startOptions(key, w.TaskQueue, nominal), workflows.ScheduledRunWorkflow,
		workflows.ScheduledRunInput{Pipeline: benchPipeline, NominalTime: nominal})
	if err != nil {
		return fmt.Errorf("start %s: %w", key, err)
	}
	var res workflows.ScheduledRunResult
	if err := run.Get(ctx, &res); err != nil {
		return fmt.Errorf("run %s: %w", key, err)
	}
	var ep workflows.EpisodeResult
	if err := st.Client.GetWorkflow(ctx, allot.EpisodeWorkflowID(benchPipeline, res.EpisodeID), "").Get(ctx, &ep); err != nil {
		return fmt.Errorf("episode %s: %w", res.EpisodeID, err)
	}
	if ep.Stage != allot.StageCompleted {
		return fmt.Errorf("episode %s ended %s", res.EpisodeID, ep.Stage)
	}
	return nil
}

// procStatusKiB reads one "Vm...: N kB" line of /proc/<pid>/status.
func procStatusKiB(pid int, field string) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc/%d/status: %s: %q", pid, field, rest)
		}
		return strconv.ParseUint(f[0], 10, 64)
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

func procStatusMiB(tb testing.TB, pid int, field string) float64 {
	tb.Helper()
	kb, err := procStatusKiB(pid, field)
	if err != nil {
		tb.Fatal(err)
	}
	return float64(kb) / 1024
}
