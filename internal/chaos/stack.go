package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"allot/paidvendor"
	"allot/paidvendor/vendorapi"
)

// stack is the system under test, every part a real process: the Temporal
// server (devserver --no-worker, restartable on its data directory), the
// simulated vendors (vendorsim --state) and the allot workers.
type stack struct {
	dir  string
	bins Binaries
	logf func(string, ...any)

	frontend string
	temporal *proc

	vendors []*vendorProc
	workers []*workerSlot
	// adapters are the activity-adapter vendors' workers (activityvendor):
	// up all along, started again if they exit.
	adapters []*workerSlot

	client client.Client

	kills, workerRestarts, unexpectedExits atomic.Int64
	vendorRestarts, temporalRestarts       atomic.Int64

	stopMonitor chan struct{}
	monitorDone chan struct{}

	// afterKill, when set, is told of every worker kill (the process ID it
	// had and when), in a goroutine of its own.
	afterKill func(pid int, at time.Time)
}

// vendorProc is one vendorsim and the faults it runs with.
type vendorProc struct {
	p      *proc
	addr   string
	url    string
	key    string
	state  string
	seed   int64
	faults vendorFaults

	// What the vendor saw (GET /v1/stats), over all its generations: a
	// restart starts its counts again, so each generation is sampled
	// before it goes down.
	statsMu     sync.Mutex
	maxInFlight int
	submissions int64 // of the generations before the current one
	requests    int64 // of the generations before the current one
	last        vendorapi.Stats
}

// sample reads the current generation's stats; a vendor that does not
// answer keeps what was read before.
func (v *vendorProc) sample(ctx context.Context) error {
	c, err := paidvendor.NewHTTPClient(v.url, v.key, &http.Client{Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	st, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	v.statsMu.Lock()
	defer v.statsMu.Unlock()
	v.last = st
	v.maxInFlight = max(v.maxInFlight, st.MaxInFlight)
	return nil
}

// down samples the vendor before it goes down, and starts its next
// generation's counts.
func (v *vendorProc) down(ctx context.Context) {
	_ = v.sample(ctx)
	v.statsMu.Lock()
	defer v.statsMu.Unlock()
	v.submissions += v.last.Submissions
	v.requests += v.last.Requests
	v.last = vendorapi.Stats{}
}

// seen is the most requests the vendor served at once, and its
// submissions, over every generation sampled so far.
func (v *vendorProc) seen() (maxInFlight int, submissions int64) {
	v.statsMu.Lock()
	defer v.statsMu.Unlock()
	return v.maxInFlight, v.submissions + v.last.Submissions
}

// requestsSeen is every request of any kind (submissions, look-ups, status
// polls, downloads) the vendor served, over every generation sampled so
// far.
func (v *vendorProc) requestsSeen() int64 {
	v.statsMu.Lock()
	defer v.statsMu.Unlock()
	return v.requests + v.last.Requests
}

type vendorFaults struct {
	Lose, Fail   float64
	Latency      time.Duration
	TaskDuration time.Duration
	NoLookup     bool
	// IgnoreIdempotency makes a bad vendor (the checks' self-test).
	IgnoreIdempotency bool
	// Bill: the faults planted in its bill (vendorsim --bill-*), over
	// every generation: they are the bill's, not the connection's.
	Bill billFaults
	// Batch: how long its batches take, and the faults drawn for each
	// (vendorsim --batch-*).
	Batch batchFaults
}

// batchFaults are how long a batch takes to do all its items and the
// probabilities of each batch fault per create.
type batchFaults struct {
	Duration                   time.Duration
	LoseCreate, Expire, Cancel float64
}

// billFaults are the probabilities of each bill fault per accepted task,
// and one phantom line per PhantomEvery tasks (0: none).
type billFaults struct {
	Drop, Wrong, Double, Refund float64
	PhantomEvery                int
}

func (v *vendorProc) args(faults bool) []string {
	a := []string{"--addr", v.addr, "--state", v.state, "--seed", strconv.FormatInt(v.seed, 10),
		"--task-duration", v.faults.TaskDuration.String()}
	if v.faults.NoLookup {
		a = append(a, "--no-lookup")
	}
	if v.faults.IgnoreIdempotency {
		a = append(a, "--ignore-idempotency")
	}
	if b := v.faults.Bill; b != (billFaults{}) {
		f := func(p float64) string { return strconv.FormatFloat(p, 'f', -1, 64) }
		a = append(a, "--bill-drop-charge", f(b.Drop), "--bill-wrong-amount", f(b.Wrong), "--bill-double-charge", f(b.Double),
			"--bill-refund", f(b.Refund), "--bill-phantom-every", strconv.Itoa(b.PhantomEvery))
	}
	if b := v.faults.Batch; b.Duration > 0 {
		a = append(a, "--batch-duration", b.Duration.String())
		if faults {
			f := func(p float64) string { return strconv.FormatFloat(p, 'f', -1, 64) }
			a = append(a, "--batch-lose-create-response", f(b.LoseCreate), "--batch-expire-halfway", f(b.Expire), "--batch-cancel-halfway", f(b.Cancel))
		}
	}
	if faults {
		a = append(a,
			"--lose-response-after-accept", strconv.FormatFloat(v.faults.Lose, 'f', -1, 64),
			"--fail-before-accept", strconv.FormatFloat(v.faults.Fail, 'f', -1, 64),
			"--latency", v.faults.Latency.String())
	}
	return a
}

func (v *vendorProc) start(ctx context.Context, faults bool) error {
	v.p.args = v.args(faults)
	if err := v.p.start(); err != nil {
		return err
	}
	return waitTCP(ctx, v.addr, 30*time.Second)
}

// workerSlot is one worker process the run keeps up, except while a kill
// holds it down.
type workerSlot struct {
	p      *proc
	mu     sync.Mutex
	wantUp bool
	// nextTry: when the monitor may start it again after it exited on its
	// own (a worker started while Temporal is down exits at once).
	nextTry time.Time
}

var (
	temporalReady = regexp.MustCompile(`Temporal:\s+(\S+) \(namespace`)
	workerReady   = regexp.MustCompile(`allot worker starting`)
	adapterReady  = regexp.MustCompile(`activity vendor worker started`)
)

func newStack(dir string, bins Binaries, logf func(string, ...any)) *stack {
	return &stack{dir: dir, bins: bins, logf: logf}
}

// startTemporal starts the devserver (--no-worker) on a fixed port and data
// directory, so a restart finds its state and its clients find it again.
func (s *stack) startTemporal(ctx context.Context) error {
	if s.temporal == nil {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.frontend = fmt.Sprintf("127.0.0.1:%d", port)
		args := []string{"--no-worker", "--headless", "--port", strconv.Itoa(port), "--data-dir", filepath.Join(s.dir, "temporal")}
		s.temporal = newProc("temporal", s.bins.DevServer, args, cleanEnv(), s.dir)
	}
	if err := s.temporal.start(); err != nil {
		return err
	}
	if _, err := s.temporal.waitOutput(ctx, temporalReady, 3*time.Minute); err != nil {
		return err
	}
	if s.client == nil {
		c, err := client.DialContext(ctx, client.Options{HostPort: s.frontend, Namespace: "default",
			Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		if err != nil {
			return fmt.Errorf("connect to Temporal at %s: %w", s.frontend, err)
		}
		s.client = c
	}
	// The frontend answers before the namespace is served after a restart.
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := s.client.WorkflowService().GetSystemInfo(cctx, nil)
		if err == nil {
			_, err = s.client.DescribeWorkflowExecution(cctx, "chaos-probe-none", "")
			if err != nil && isNotFound(err) {
				err = nil
			}
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Temporal server at %s is not serving the namespace: %w", s.frontend, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// restartTemporal stops the server as an operator would (SIGTERM), keeps it
// down for down, and starts it again on its data.
func (s *stack) restartTemporal(ctx context.Context, down time.Duration) error {
	s.temporal.stop(60 * time.Second)
	sleep(ctx, down)
	s.temporalRestarts.Add(1)
	return s.startTemporal(ctx)
}

func (s *stack) addVendor(name string, seed int64, key string, faults vendorFaults) (*vendorProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	v := &vendorProc{addr: fmt.Sprintf("127.0.0.1:%d", port), key: key, seed: seed, faults: faults,
		state: filepath.Join(s.dir, name+".json")}
	v.url = "http://" + v.addr
	v.p = newProc(name, s.bins.VendorSim, nil, append(cleanEnv(), "ALLOT_VENDOR_API_KEY="+key), s.dir)
	s.vendors = append(s.vendors, v)
	return v, nil
}

// restartVendors kills every vendor (SIGKILL: their state is saved at every
// accept), keeps them down for down and starts them again with or without
// their faults.
func (s *stack) restartVendors(ctx context.Context, down time.Duration, faults bool, kill bool) error {
	for _, v := range s.vendors {
		v.down(ctx)
		if kill {
			v.p.kill()
		} else {
			v.p.stop(10 * time.Second)
		}
	}
	sleep(ctx, down)
	for _, v := range s.vendors {
		if err := v.start(ctx, faults); err != nil {
			return err
		}
	}
	return nil
}

// startAdapter starts an activity-adapter vendor's worker: its activities
// on taskQueue forward every request to v, with v's key.
func (s *stack) startAdapter(ctx context.Context, name, taskQueue string, v *vendorProc) error {
	args := []string{"--temporal-address", s.frontend, "--task-queue", taskQueue, "--vendor-url", v.url}
	w := &workerSlot{p: newProc(name, s.bins.ActivityVendor, args, append(cleanEnv(), "ALLOT_VENDOR_API_KEY="+v.key), s.dir), wantUp: true}
	s.adapters = append(s.adapters, w)
	if err := w.p.start(); err != nil {
		return err
	}
	_, err := w.p.waitOutput(ctx, adapterReady, 2*time.Minute)
	return err
}

func (s *stack) addWorkers(n int, env []string) {
	for i := range n {
		p := newProc(fmt.Sprintf("worker-%d", i), s.bins.Worker, nil, env, s.dir)
		s.workers = append(s.workers, &workerSlot{p: p})
	}
}

// startWorker starts slot i and waits until it serves the task queue.
func (s *stack) startWorker(ctx context.Context, i int) error {
	w := s.workers[i]
	w.mu.Lock()
	w.wantUp = true
	err := w.p.start()
	w.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = w.p.waitOutput(ctx, workerReady, 2*time.Minute)
	return err
}

// killWorker SIGKILLs worker i, keeps it down for down, and starts it
// again.
func (s *stack) killWorker(ctx context.Context, i int, down time.Duration) bool {
	w := s.workers[i]
	// A worker still down from an earlier kill (or restarting after it
	// exited on its own) is waited for, so every planned kill happens.
	deadline := time.Now().Add(15 * time.Second)
	for {
		w.mu.Lock()
		if w.wantUp && w.p.running() {
			break
		}
		w.mu.Unlock()
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		sleep(ctx, 100*time.Millisecond)
	}
	w.wantUp = false
	pid := w.p.pid()
	w.p.kill()
	at := time.Now()
	w.mu.Unlock()
	s.kills.Add(1)
	if s.afterKill != nil {
		go s.afterKill(pid, at)
	}
	sleep(ctx, down)
	w.mu.Lock()
	w.wantUp = true
	err := w.p.start()
	w.mu.Unlock()
	if err != nil {
		s.logf("restart %s: %v", w.p.name, err)
	}
	s.workerRestarts.Add(1)
	return true
}

// monitor starts again every worker that should run and exited on its own
// (a worker started while Temporal is down cannot connect and exits).
func (s *stack) monitor() {
	s.stopMonitor, s.monitorDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.monitorDone)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stopMonitor:
				return
			case <-t.C:
			}
			for _, w := range append(slices.Clone(s.workers), s.adapters...) {
				w.mu.Lock()
				if w.wantUp && !w.p.running() && time.Now().After(w.nextTry) {
					s.unexpectedExits.Add(1)
					s.logf("%s exited on its own; starting it again (log %s)", w.p.name, w.p.log)
					if err := w.p.start(); err != nil {
						s.logf("restart %s: %v", w.p.name, err)
					}
					w.nextTry = time.Now().Add(2 * time.Second)
				}
				w.mu.Unlock()
			}
		}
	}()
}

// allWorkersUp waits until every worker process runs and has connected.
func (s *stack) allWorkersUp(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		up := 0
		for _, w := range s.workers {
			if w.p.running() && workerReady.MatchString(w.p.output()) {
				up++
			}
		}
		if up == len(s.workers) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d workers run after %s", up, len(s.workers), timeout)
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// shutdown stops the workers, the vendors and the server, in that order.
func (s *stack) shutdown() {
	if s.stopMonitor != nil {
		close(s.stopMonitor)
		<-s.monitorDone
		s.stopMonitor = nil
	}
	var wg sync.WaitGroup
	for _, w := range s.workers {
		w.mu.Lock()
		w.wantUp = false
		w.mu.Unlock()
		wg.Add(1)
		go func() { defer wg.Done(); w.p.stop(15 * time.Second) }()
	}
	wg.Wait()
	for _, w := range s.adapters {
		w.mu.Lock()
		w.wantUp = false
		w.mu.Unlock()
		w.p.stop(10 * time.Second)
	}
	for _, v := range s.vendors {
		v.p.stop(10 * time.Second)
	}
	if s.client != nil {
		s.client.Close()
	}
	if s.temporal != nil {
		s.temporal.stop(60 * time.Second)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// createDatabase creates a fresh PostgreSQL database for one run and
// returns its URL (the admin DSN with the database replaced) and a
// function that drops it.
func createDatabase(ctx context.Context, adminDSN, name string) (string, func() error, error) {
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return "", nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(adminDSN)
	if err != nil {
		return "", nil, fmt.Errorf("the PostgreSQL DSN must be a postgres:// URL: %w", err)
	}
	u.Path = "/" + name
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminDSN)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		return err
	}
	return u.String(), drop, nil
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}
