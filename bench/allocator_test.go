package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"allot"
	"allot/internal/ledger"
)

// The Temporal-only allocator: the design allot did not choose, built as
// well as Temporal allows, to measure what the ledger costs. One long-lived
// workflow per pipeline keeps the counter in its state (period -> next
// sequence, key -> episode) and answers each allocation as an Update,
// awaited until completed. After allocatorUpdatesPerRun updates it lets the
// handlers finish and continues as new with its state as the input, so its
// history stays bounded (its state does not: see allocState).
const (
	allocatorQueue         = "bench-allocator"
	allocatorWF            = "TemporalAllocator"
	allocateUpdate         = "allocate"
	allocatorUpdatesPerRun = 500
)

// allocState is the allocator's whole memory. Every key it ever bound is in
// Keys and is carried through every continue-as-new: the input grows by one
// entry per allocation, towards Temporal's payload limit (2 MB by default),
// so a Temporal-only allocator must forget keys at some point. allot's
// ledger never does (invariant 1).
type allocState struct {
	Next map[string]int              `json:"next"` // period -> next sequence
	Keys map[string]allocatedEpisode `json:"keys"` // key -> its episode
}

type allocatedEpisode struct {
	Period   string `json:"p"`
	Sequence int    `json:"s"`
}

type allocRequest struct {
	Key    string `json:"key"`
	Period string `json:"period"`
}

type allocResponse struct {
	EpisodeID string `json:"episode_id"`
	Decision  string `json:"decision"`
}

// temporalAllocator is the allocator workflow. Its update handler does the
// ledger's read-decide-save in memory: a bound key gets its episode back (or
// is refused if it crosses periods), a new key gets the period's next
// sequence. Updates run one at a time (the handler never blocks), so there
// is nothing to lock.
func temporalAllocator(ctx workflow.Context, st allocState) error {
	if st.Next == nil {
		st.Next = map[string]int{}
	}
	if st.Keys == nil {
		st.Keys = map[string]allocatedEpisode{}
	}
	handled := 0
	err := workflow.SetUpdateHandlerWithOptions(ctx, allocateUpdate,
		func(ctx workflow.Context, r allocRequest) (allocResponse, error) {
			handled++
			if ep, ok := st.Keys[r.Key]; ok {
				if ep.Period != r.Period {
					return allocResponse{}, temporal.NewNonRetryableApplicationError(
						fmt.Sprintf("key %q is bound in period %s, asked in %s", r.Key, ep.Period, r.Period), "AllocationKeyCrossesPeriod", nil)
				}
				return allocResponse{EpisodeID: ledger.EpisodeID(ep.Period, ep.Sequence), Decision: string(ledger.DecisionReused)}, nil
			}
			seq := st.Next[r.Period]
			st.Next[r.Period] = seq + 1
			st.Keys[r.Key] = allocatedEpisode{Period: r.Period, Sequence: seq}
			return allocResponse{EpisodeID: ledger.EpisodeID(r.Period, seq), Decision: string(ledger.DecisionAllocated)}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, r allocRequest) error {
			if r.Key == "" || r.Period == "" {
				return errors.New("an allocation needs a key and a period")
			}
			return nil
		}})
	if err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool { return handled >= allocatorUpdatesPerRun }); err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	return workflow.NewContinueAsNewError(ctx, allocatorWF, st)
}

func startAllocatorWorker(tb testing.TB, st *stack) {
	tb.Helper()
	w := worker.New(st.Client, allocatorQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(temporalAllocator, workflow.RegisterOptions{Name: allocatorWF})
	if err := w.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.Stop)
}

// startAllocator starts the allocator of a pipeline with a seeded state.
func startAllocator(tb testing.TB, c client.Client, id string, seed allocState) {
	tb.Helper()
	if _, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: allocatorQueue}, allocatorWF, seed); err != nil {
		tb.Fatal(err)
	}
}

// allocateByUpdate asks the allocator for the key's episode and waits for
// the answer (UpdateWorkflow, WaitForStage completed). An update that
// reaches the run just as it continues as new is retried by the client
// against the new run.
func allocateByUpdate(ctx context.Context, c client.Client, allocatorID string, r allocRequest) (allocResponse, error) {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: allocatorID, UpdateName: allocateUpdate, Args: []any{r},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return allocResponse{}, err
	}
	var res allocResponse
	err = h.Get(ctx, &res)
	return res, err
}

// seedAllocState is the state of an allocator that has allocated n keys,
// perPeriod to a period, as the ledgers are seeded.
func seedAllocState(n, perPeriod int) allocState {
	st := allocState{Next: map[string]int{}, Keys: map[string]allocatedEpisode{}}
	for i := range n {
		period := fmt.Sprintf("S%07d", i/perPeriod)
		st.Keys[fmt.Sprintf("seed-%d", i)] = allocatedEpisode{Period: period, Sequence: i % perPeriod}
		st.Next[period] = i%perPeriod + 1
	}
	return st
}

// BenchmarkAllocateVsTemporal sets allot's allocation (ledger.Allocate, one
// transaction under the pipeline's lock, on SQLite and on PostgreSQL) beside
// the Temporal-only allocator (an Update to one long-lived workflow per
// pipeline that keeps the counter in its state and continues as new after
// 500 updates), with the durable single-row commit of each database as the
// shared baseline (as ledger.BenchmarkAllocateVsRawCommit measures it):
//
//	ALLOT_TEST_POSTGRES_DSN=... go test -run '^$' -bench AllocateVsTemporal -benchtime 300x ./bench/
//
// Every iteration makes one batch of each, in rotating order, and times
// each: a Temporal update, a SQLite allocation, a SQLite raw commit, and
// (with ALLOT_TEST_POSTGRES_DSN) a PostgreSQL allocation and raw commit. A
// batch is `callers` calls at once (new keys, 100 to a period, as in the
// ledger's benchmarks). The ledgers and the allocator start with 1,000
// allocations of history.
//
// It reports <what>/s for each, and the ratios temporal/sqlite-alloc and
// temporal/pg-alloc (the Temporal allocator's rate over the ledger's: above
// 1 the Temporal allocator is faster), and each ledger's allocation rate over
// its raw commits. It also reports the allocator's state as carried through
// continue-as-new, in bytes per key bound. It runs on both Temporal stores
// unless ALLOT_BENCH_TEMPORAL_STORE names one: the in-memory store persists
// nothing to disk, so its figure is an upper bound that no durable Temporal
// reaches.
func BenchmarkAllocateVsTemporal(b *testing.B) {
	for _, store := range benchStores() {
		b.Run("store="+store, func(b *testing.B) {
			st := startTemporal(b, store)
			startAllocatorWorker(b, st)
			ctx := context.Background()

			type contender struct {
				name string
				call func(i int64) error
			}
			var contenders []contender

			const seed, perPeriod = 1_000, 100
			allocatorID := "allocator/bench-" + store
			startAllocator(b, st.Client, allocatorID, seedAllocState(seed, perPeriod))
			contenders = append(contenders, contender{"temporal", func(i int64) error {
				r, err := allocateByUpdate(ctx, st.Client, allocatorID, allocRequest{Key: "k-" + strconv.FormatInt(i, 10), Period: "V" + strconv.FormatInt(i/100, 10)})
				if err == nil && r.Decision != string(ledger.DecisionAllocated) {
					err = fmt.Errorf("temporal allocator: decision %s, want allocated", r.Decision)
				}
				return err
			}})
			addLedger := func(name, url string) {
				led, err := ledger.Open(ctx, url)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = led.Close() })
				seedLedger(b, led, seed, perPeriod)
				raw := newRawCommitter(b, url)
				contenders = append(contenders,
					contender{name + "-alloc", func(i int64) error {
						r, err := led.Allocate(ctx, ledger.AllocateInput{
							Pipeline: "bench", Key: "k-" + strconv.FormatInt(i, 10), Period: "V" + strconv.FormatInt(i/100, 10),
							NominalTime: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
						})
						if err == nil && r.Decision != ledger.DecisionAllocated {
							err = fmt.Errorf("%s: decision %s, want allocated", name, r.Decision)
						}
						return err
					}},
					contender{name + "-raw-commit", func(i int64) error { return raw.commit(ctx, i) }},
				)
			}
			addLedger("sqlite", "sqlite:"+b.TempDir()+"/ledger.db")
			if postgresDSN() != "" {
				url := newPostgresSchema(b)
				addLedger("pg", url)
				analyze(b, url)
			}

			var nextKey int64
			for _, callers := range []int{1, 8} {
				b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
					spent := make([]time.Duration, len(contenders))
					var n int64
					for b.Loop() {
						n++
						first := nextKey
						nextKey += int64(callers)
						for j := range contenders {
							k := (j + int(n)) % len(contenders)
							c := contenders[k]
							start := time.Now()
							var wg sync.WaitGroup
							errs := make([]error, callers)
							for i := range callers {
								wg.Add(1)
								go func() { defer wg.Done(); errs[i] = c.call(first + int64(i)) }()
							}
							wg.Wait()
							spent[k] += time.Since(start)
							for _, err := range errs {
								if err != nil {
									b.Fatalf("%s: %v", c.name, err)
								}
							}
						}
					}
					rate := map[string]float64{}
					for k, c := range contenders {
						rate[c.name] = float64(n*int64(callers)) / spent[k].Seconds()
						b.ReportMetric(rate[c.name], c.name+"/s")
					}
					b.ReportMetric(rate["temporal"]/rate["sqlite-alloc"], "ratio-temporal/sqlite-alloc")
					b.ReportMetric(rate["sqlite-alloc"]/rate["sqlite-raw-commit"], "ratio-sqlite-alloc/raw")
					if _, ok := rate["pg-alloc"]; ok {
						b.ReportMetric(rate["temporal"]/rate["pg-alloc"], "ratio-temporal/pg-alloc")
						b.ReportMetric(rate["pg-alloc"]/rate["pg-raw-commit"], "ratio-pg-alloc/raw")
					}
				})
			}
			keys, bytes, runs := allocatorSize(b, st, allocatorID)
			b.Logf("allocator %s: %d keys bound, state %d bytes (%.0f bytes/key), %d runs (continue-as-new every %d updates)",
				allocatorID, keys, bytes, float64(bytes)/float64(keys), runs, allocatorUpdatesPerRun)
			perKey := realisticBytesPerKey(b)
			b.Logf("with allot's keys (<pipeline>/scheduled-<RFC3339>, ISO weeks) the state takes %.0f bytes/key: "+
				"Temporal's default payload limits (warn 512 KiB, error 2 MiB) are reached at about %.0f and %.0f keys",
				perKey, 512*1024/perKey, 2*1024*1024/perKey)
		})
	}
}

// seedLedger allocates n keys, perPeriod to a period, as history.
func seedLedger(tb testing.TB, led *ledger.Ledger, n, perPeriod int) {
	tb.Helper()
	ctx := context.Background()
	for i := range n {
		if _, err := led.Allocate(ctx, ledger.AllocateInput{
			Pipeline: "bench", Key: fmt.Sprintf("seed-%d", i), Period: fmt.Sprintf("S%07d", i/perPeriod),
			NominalTime: time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC),
		}); err != nil {
			tb.Fatal(err)
		}
	}
}

// analyze gives PostgreSQL's planner the statistics autovacuum gives a
// live ledger within its first minute (see ledger.BenchmarkAllocateVsRawCommit).
func analyze(tb testing.TB, url string) {
	tb.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), `ANALYZE episodes`); err != nil {
		tb.Fatal(err)
	}
}

// allocatorSize reads the allocator's current run: how many keys its state
// holds, the state's size as its continue-as-new input carries it, and how
// many runs the workflow has had.
func allocatorSize(tb testing.TB, s *stack, id string) (keys, bytes, runs int) {
	tb.Helper()
	c := s.Client
	ctx := context.Background()
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		tb.Fatal(err)
	}
	it := c.GetWorkflowHistory(ctx, id, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), false, 0)
	if !it.HasNext() {
		tb.Fatal("allocator has no history")
	}
	first, err := it.Next()
	if err != nil {
		tb.Fatal(err)
	}
	payloads := first.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	if len(payloads) != 1 {
		tb.Fatalf("allocator input has %d payloads", len(payloads))
	}
	var st allocState
	if err := json.Unmarshal(payloads[0].GetData(), &st); err != nil {
		tb.Fatal(err)
	}
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: s.Namespace, Query: fmt.Sprintf("WorkflowId = %q", id)})
	if err != nil {
		tb.Fatal(err)
	}
	return len(st.Keys), len(payloads[0].GetData()), len(resp.GetExecutions())
}

// realisticBytesPerKey is the allocator state's size per key for keys of
// the form allot's Schedules give them, hourly, in ISO-week periods.
func realisticBytesPerKey(tb testing.TB) float64 {
	tb.Helper()
	const n = 10_000
	st := allocState{Next: map[string]int{}, Keys: map[string]allocatedEpisode{}}
	t := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	for range n {
		y, w := t.ISOWeek()
		period := fmt.Sprintf("%d-W%02d", y, w)
		st.Keys[allot.AllocationKey("weekly-video", t)] = allocatedEpisode{Period: period, Sequence: st.Next[period]}
		st.Next[period]++
		t = t.Add(time.Hour)
	}
	data, err := json.Marshal(st)
	if err != nil {
		tb.Fatal(err)
	}
	return float64(len(data)) / n
}
