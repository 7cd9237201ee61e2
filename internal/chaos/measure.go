package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"allot"
)

// MeasureConfig is a kill measurement: the same load and the same worker
// kills against any worker and vendorsim binaries (this tree's, or an old
// commit's), with episode times read from Temporal's visibility only, so
// workers with an older ledger schema can be measured the same way.
type MeasureConfig struct {
	Seed     uint64
	Postgres string // "" = SQLite with one worker
	Workers  int    // 0: 3 on PostgreSQL, 1 on SQLite
	Dir      string
	Keep     bool
	// Bins: Worker and VendorSim are the binaries measured; DevServer is
	// the Temporal server (fresh for every measurement).
	Bins Binaries
	// Episodes runs are started evenly over Load; Kills worker kills fall
	// in [5s, Load+15s]. Timeout bounds the wait for the last episode.
	Episodes int
	Load     time.Duration
	Kills    int
	Timeout  time.Duration
	// VendorLatency is added to every vendor request (default 1s, a
	// plausible vendor API): it keeps submissions in flight long enough
	// for kills to land on them.
	VendorLatency time.Duration
	// SendTimeout is the default vendor's send_timeout the workers get
	// (ALLOT_VENDOR_SEND_TIMEOUT; a worker from before it ignores it);
	// zero leaves it unset (30 s).
	SendTimeout time.Duration
	Progress    io.Writer
}

// MeasureResult is what a kill measurement found.
type MeasureResult struct {
	Seed             uint64
	Plan             string
	Worker           string
	Episodes, Closed int
	Kills            int
	P50, P95, Max    time.Duration
	// KilledSends are the submissions (SubmitPaidTask attempts) running
	// on a worker when it was killed; SendRecovery* is the time from such
	// a kill to that submission settled (the activity completed: the
	// vendor's answer is in the ledger).
	KilledSends                      int
	SendRecoveryP50, SendRecoveryP95 time.Duration
	SendRecoveryMax                  time.Duration
	Duration                         time.Duration
	UnexpectedExits                  int
	NotClosedInTime                  bool
	EpisodeStartClose                []time.Duration
}

// Line is the one-line result.
func (m MeasureResult) Line() string {
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
	return fmt.Sprintf("measure-kills seed=%d plan=%s worker=%s episodes=%d closed=%d kills=%d episode_p50=%s episode_p95=%s episode_max=%s killed_sends=%d send_recovery_p50=%s send_recovery_p95=%s send_recovery_max=%s duration=%s",
		m.Seed, m.Plan, m.Worker, m.Episodes, m.Closed, m.Kills, r(m.P50), r(m.P95), r(m.Max),
		m.KilledSends, r(m.SendRecoveryP50), r(m.SendRecoveryP95), r(m.SendRecoveryMax), m.Duration.Round(time.Second))
}

type measureEvent struct {
	At     time.Duration
	Start  int // run index, or -1
	Worker int
	Down   time.Duration
}

// Measure runs a kill measurement.
func Measure(ctx context.Context, cfg MeasureConfig) (res MeasureResult, err error) {
	if cfg.Episodes == 0 {
		cfg.Episodes = 24
	}
	if cfg.Load == 0 {
		cfg.Load = 60 * time.Second
	}
	if cfg.Kills == 0 {
		cfg.Kills = 8
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 20 * time.Minute
	}
	if cfg.VendorLatency == 0 {
		cfg.VendorLatency = time.Second
	}
	begin := time.Now()
	res = MeasureResult{Seed: cfg.Seed, Worker: cfg.Bins.Worker, Episodes: cfg.Episodes}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	var plock sync.Mutex
	logf := func(format string, args ...any) {
		plock.Lock()
		defer plock.Unlock()
		fmt.Fprintf(progress, "measure %6.1fs  %s\n", time.Since(begin).Seconds(), fmt.Sprintf(format, args...))
	}
	if err := cfg.Bins.check(false); err != nil {
		return res, err
	}
	dir := cfg.Dir
	tempDir := dir == ""
	if tempDir {
		if dir, err = os.MkdirTemp("", "allot-measure-"); err != nil {
			return res, err
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return res, err
	}
	logf("run directory %s; worker %s; vendorsim %s", dir, cfg.Bins.Worker, cfg.Bins.VendorSim)

	workers := cfg.Workers
	ledgerURL := "sqlite:" + filepath.Join(dir, "allot.db")
	var dropDB func() error
	if cfg.Postgres != "" {
		if ledgerURL, dropDB, err = createDatabase(ctx, cfg.Postgres, fmt.Sprintf("measure_%d_%d", cfg.Seed, time.Now().UnixNano())); err != nil {
			return res, err
		}
		if workers == 0 {
			workers = 3
		}
	} else if workers == 0 {
		workers = 1
	}

	// The plan: runs evenly over Load, kills from their own seeded stream.
	var evs []measureEvent
	for i := range cfg.Episodes {
		evs = append(evs, measureEvent{At: time.Duration(i) * cfg.Load / time.Duration(cfg.Episodes), Start: i})
	}
	f := newRand(cfg.Seed, 3)
	for range cfg.Kills {
		evs = append(evs, measureEvent{At: between(f, 5*time.Second, cfg.Load+15*time.Second), Start: -1,
			Worker: f.IntN(workers), Down: between(f, 500*time.Millisecond, 2*time.Second)})
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].At < evs[j].At })
	h := sha256.New()
	for _, e := range evs {
		fmt.Fprintf(h, "%d %d %d %d\n", e.At, e.Start, e.Worker, e.Down)
	}
	res.Plan = hex.EncodeToString(h.Sum(nil))[:12]

	st := newStack(dir, cfg.Bins, logf)
	defer func() {
		st.shutdown()
		if err == nil && !res.NotClosedInTime && !cfg.Keep {
			if dropDB != nil {
				_ = dropDB()
			}
			if tempDir {
				os.RemoveAll(dir)
			}
		} else {
			logf("kept for inspection: %s", dir)
		}
	}()
	if err := st.startTemporal(ctx); err != nil {
		return res, err
	}
	key := fmt.Sprintf("measure-vendor-key-%d", cfg.Seed)
	v, err := st.addVendor("vendor", int64(cfg.Seed%(1<<62)), key, vendorFaults{TaskDuration: 2 * time.Second, Latency: cfg.VendorLatency})
	if err != nil {
		return res, err
	}
	if err := v.start(ctx, true); err != nil {
		return res, err
	}
	pipes := filepath.Join(dir, "pipelines.toml")
	if err := writeFile(pipes, measurePipelinesTOML); err != nil {
		return res, err
	}
	env := append(cleanEnv(),
		"TEMPORAL_ADDRESS="+st.frontend, "TEMPORAL_NAMESPACE=default",
		"TEMPORAL_CONFIG_FILE="+filepath.Join(dir, "no-temporal-config.toml"),
		"ALLOT_LEDGER="+ledgerURL, "ALLOT_PIPELINES="+pipes, "ALLOT_DATA_DIR="+filepath.Join(dir, "data"),
		"ALLOT_VENDOR_URL="+v.url, "ALLOT_VENDOR_API_KEY="+key)
	if cfg.SendTimeout > 0 {
		env = append(env, "ALLOT_VENDOR_SEND_TIMEOUT="+cfg.SendTimeout.String())
	}
	st.addWorkers(workers, env)
	// Every kill: which submissions were running on the killed worker.
	var killedMu sync.Mutex
	var killed []killedSend
	st.afterKill = func(pid int, at time.Time) {
		found, err := runningSends(ctx, st.client, pid)
		if err != nil {
			logf("finding the sends of killed worker pid %d: %v", pid, err)
		}
		for i := range found {
			found[i].At = at
		}
		killedMu.Lock()
		killed = append(killed, found...)
		killedMu.Unlock()
	}
	for i := range workers {
		if err := st.startWorker(ctx, i); err != nil {
			return res, err
		}
	}
	st.monitor()
	logf("%d workers up; plan %s: %d runs over %s, %d kills, vendor latency %s", workers, res.Plan, cfg.Episodes, cfg.Load, cfg.Kills, cfg.VendorLatency)

	t0 := time.Now()
	week := time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	var startErrs []error
	var mu sync.Mutex
	for _, e := range evs {
		sleep(ctx, time.Until(t0.Add(e.At)))
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e.Start < 0 {
				if st.killWorker(ctx, e.Worker, e.Down) {
					logf("killed worker-%d, back after %s", e.Worker, e.Down.Round(time.Millisecond))
				}
				return
			}
			nominal := week.Add(time.Duration(e.Start) * time.Hour)
			id := allot.AllocationKey(measurePipeline, nominal)
			// A plain start, as the Schedule sends it: the input every
			// version of ScheduledRun reads.
			_, err := st.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "allot"}, "ScheduledRun",
				map[string]any{"pipeline": measurePipeline, "nominal_time": nominal})
			var already *serviceerror.WorkflowExecutionAlreadyStarted
			if err != nil && !errors.As(err, &already) {
				mu.Lock()
				startErrs = append(startErrs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(startErrs...); err != nil {
		return res, fmt.Errorf("starting runs: %w", err)
	}
	res.Kills = int(st.kills.Load())
	logf("load over; waiting for %d episodes to close", cfg.Episodes)
	deadline := time.Now().Add(cfg.Timeout)
	var execs []*workflowExecution
	for {
		execs, err = listWorkflows(ctx, st.client, `WorkflowType = "Episode"`)
		if err != nil {
			return res, err
		}
		closed := 0
		for _, e := range execs {
			if !e.Close.IsZero() {
				closed++
			}
		}
		res.Closed = closed
		if closed >= cfg.Episodes && closed == len(execs) {
			break
		}
		if time.Now().After(deadline) {
			res.NotClosedInTime = true
			logf("only %d of %d episodes closed within %s", closed, cfg.Episodes, cfg.Timeout)
			break
		}
		sleep(ctx, 2*time.Second)
	}
	explainSlowest(ctx, st.client, execs, 3, logf)
	killedMu.Lock()
	recovery := sendRecoveries(ctx, st.client, killed, logf)
	killedMu.Unlock()
	res.KilledSends = len(recovery)
	res.SendRecoveryP50, res.SendRecoveryP95 = percentile(recovery, 0.5), percentile(recovery, 0.95)
	if len(recovery) > 0 {
		res.SendRecoveryMax = recovery[len(recovery)-1]
	}
	times := episodeTimes(execs)
	res.EpisodeStartClose = times
	res.P50, res.P95 = percentile(times, 0.5), percentile(times, 0.95)
	if len(times) > 0 {
		res.Max = times[len(times)-1]
	}
	res.UnexpectedExits = int(st.unexpectedExits.Load())
	res.Duration = time.Since(begin)
	return res, nil
}

// explainSlowest prints, for the n slowest episodes, the gaps of more than
// 5 s in their histories and what ended them: where the time went.
func explainSlowest(ctx context.Context, c client.Client, execs []*workflowExecution, n int, logf func(string, ...any)) {
	sorted := append([]*workflowExecution(nil), execs...)
	sort.Slice(sorted, func(i, j int) bool {
		return sorted[i].Close.Sub(sorted[i].Start) > sorted[j].Close.Sub(sorted[j].Start)
	})
	for _, e := range sorted[:min(n, len(sorted))] {
		logf("slow episode %s: %s", e.ID, e.Close.Sub(e.Start).Round(100*time.Millisecond))
		iter := c.GetWorkflowHistory(ctx, e.ID, e.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var prev time.Time
		activity := map[int64]string{}
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				logf("  history: %v", err)
				break
			}
			at := ev.GetEventTime().AsTime()
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				activity[ev.GetEventId()] = a.GetActivityType().GetName()
			}
			failed := ev.GetActivityTaskFailedEventAttributes() != nil || ev.GetActivityTaskTimedOutEventAttributes() != nil
			if !prev.IsZero() && (at.Sub(prev) > 5*time.Second || failed) {
				what := ev.GetEventType().String()
				if a := ev.GetActivityTaskTimedOutEventAttributes(); a != nil {
					what += fmt.Sprintf(" %s (%s)", activity[a.GetScheduledEventId()], a.GetFailure().GetMessage())
				}
				if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
					what += fmt.Sprintf(" %s attempt %d", activity[a.GetScheduledEventId()], a.GetAttempt())
				}
				if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
					what += " " + activity[a.GetScheduledEventId()]
				}
				if a := ev.GetActivityTaskFailedEventAttributes(); a != nil {
					what += fmt.Sprintf(" %s (%s)", activity[a.GetScheduledEventId()], a.GetFailure().GetMessage())
				}
				if a := ev.GetWorkflowTaskTimedOutEventAttributes(); a != nil {
					what += " " + a.GetTimeoutType().String()
				}
				logf("  %s gap before event %d: %s", at.Sub(prev).Round(100*time.Millisecond), ev.GetEventId(), what)
			}
			prev = at
		}
	}
}

// killedSend is a submission (a SubmitPaidTask activity) that was running
// on a worker when it was killed.
type killedSend struct {
	WorkflowID, RunID, ActivityID string
	At                            time.Time
}

// runningSends finds the SubmitPaidTask activities that the worker of
// process pid ran (by its identity "pid@host@") when it was killed a
// moment ago, among the running Episodes: they are still started there
// until their heartbeat timeout, and then scheduled again with it as
// their last worker.
func runningSends(ctx context.Context, c client.Client, pid int) ([]killedSend, error) {
	execs, err := listWorkflows(ctx, c, `WorkflowType = "Episode" AND ExecutionStatus = "Running"`)
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("%d@", pid)
	var (
		mu   sync.Mutex
		out  []killedSend
		wg   sync.WaitGroup
		errs []error
	)
	for _, e := range execs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := c.DescribeWorkflowExecution(ctx, e.ID, e.RunID)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for _, pa := range d.GetPendingActivities() {
				// Started there, or (the heartbeat timeout came before
				// this look) its failed attempt ran there.
				ran := pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED ||
					pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_SCHEDULED && pa.GetAttempt() > 1
				if pa.GetActivityType().GetName() == "SubmitPaidTask" && ran && strings.HasPrefix(pa.GetLastWorkerIdentity(), prefix) {
					out = append(out, killedSend{WorkflowID: e.ID, RunID: e.RunID, ActivityID: pa.GetActivityId()})
				}
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// sendRecoveries is, for each killed send, the time from its (last) kill
// to the submission's activity completing, sorted; a send that never completed
// (its episode parked or failed) is reported and left out.
func sendRecoveries(ctx context.Context, c client.Client, killed []killedSend, logf func(string, ...any)) []time.Duration {
	// A send whose retry was killed too counts once, from its last kill:
	// the later kill started its recovery again.
	last := map[killedSend]time.Time{}
	for _, k := range killed {
		at := k.At
		k.At = time.Time{}
		if at.After(last[k]) {
			last[k] = at
		}
	}
	killed = killed[:0]
	for k, at := range last {
		k.At = at
		killed = append(killed, k)
	}
	sort.Slice(killed, func(i, j int) bool { return killed[i].At.Before(killed[j].At) })
	var out []time.Duration
	for _, k := range killed {
		iter := c.GetWorkflowHistory(ctx, k.WorkflowID, k.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		scheduled := int64(-1)
		var done, started time.Time
		var attempt int32
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				logf("history of %s: %v", k.WorkflowID, err)
				break
			}
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityId() == k.ActivityID {
				scheduled = ev.GetEventId()
			}
			if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetScheduledEventId() == scheduled {
				started, attempt = ev.GetEventTime().AsTime(), a.GetAttempt()
			}
			if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && a.GetScheduledEventId() == scheduled {
				done = ev.GetEventTime().AsTime()
				break
			}
		}
		if done.IsZero() {
			logf("killed send %s activity %s never completed", k.WorkflowID, k.ActivityID)
			continue
		}
		logf("killed send %s activity %s: settled %s after the kill (last attempt %d started at +%s)", k.WorkflowID, k.ActivityID,
			done.Sub(k.At).Round(100*time.Millisecond), attempt, started.Sub(k.At).Round(100*time.Millisecond))
		out = append(out, done.Sub(k.At))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
