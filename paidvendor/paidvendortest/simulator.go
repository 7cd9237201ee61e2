// Package paidvendortest provides a simulated paid vendor for tests and
// the dev setup, in the way net/http/httptest provides servers: a Simulator
// is an http.Handler serving the vendor API of package vendorapi, with
// idempotency keys, a bill read page by page that can survive restarts,
// faults that can be injected (lost responses, failures before acceptance,
// no lookup, a vendor that ignores idempotency keys) and faults planted in
// the bill (a phantom, missing, wrongly billed, double charge, a refund).
//
// It lives apart from package paidvendor so that production code cannot
// reach it: the worker links the HTTP client, never the fake. The vendorsim
// command and the dev stack serve it over HTTP.
package paidvendortest

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	mathrand "math/rand"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"allot/paidvendor"
	"allot/paidvendor/vendorapi"
)

// FailParam is a submission parameter the simulator understands: when a
// task's Params hold it (non-empty), the task ends "failed" with that value
// as its error instead of "succeeded", and nothing is refunded.
const FailParam = "sim.fail"

// DevAPIKey is the simulator's documented development key, used by the
// one-command dev setup. Never use it for anything reachable by others.
const DevAPIKey = "dev-vendor-key"

// DefaultPrice is what a task costs when SimConfig names no price for its
// kind and no DefaultPrice.
var DefaultPrice = paidvendor.Cost{Amount: 250, Currency: "USD"}

// maxSubmitBody bounds a submission's body.
const maxSubmitBody = 1 << 20

// redacted stands in for the API key wherever the simulator is printed.
const redacted = "[REDACTED]"

// Error codes only the simulator answers with; the API's own are in
// vendorapi.
const (
	codeSimulatedFailure = "simulated_failure"
	codeStateNotSaved    = "state_not_saved"
)

// SimConfig configures a Simulator.
type SimConfig struct {
	APIKey                  string                     // the bearer token it accepts; requests without it -> 401, charge nothing
	LoseResponseAfterAccept float64                    // P: the task is accepted and charged, then the connection is closed with no response
	FailBeforeAccept        float64                    // P: a submission gets 503, nothing charged
	Latency                 time.Duration              // added to each request
	TaskDuration            time.Duration              // a task is queued for the first quarter of this, running until it ends, then succeeded (or failed)
	NoLookup                bool                       // lookup endpoint answers 501
	IgnoreIdempotency       bool                       // every POST creates and charges a new task (a bad vendor)
	Seed                    int64                      // makes the fault sequence repeatable
	PricePerKind            map[string]paidvendor.Cost // price by task kind
	DefaultPrice            paidvendor.Cost            // price of a kind not in PricePerKind; zero means the package's DefaultPrice

	// Bill faults, planted per accepted task (see SimFaults): the
	// probabilities add up to at most 1, and a task meets at most one.
	BillDropCharge   float64 // P: the task is accepted and reports its cost, but its charge line is left off the bill
	BillWrongAmount  float64 // P: its charge line bills another amount than the task's cost
	BillDoubleCharge float64 // P: a second charge line for the same task and idempotency key
	BillRefund       float64 // P: a refund line of the task's whole cost
	BillPhantomEvery int     // one charge line for a task that never existed per this many accepted tasks; 0 = never
	// Account is the ID of the account its bill says the key bills to,
	// as real vendors name their organisations; "" names none.
	Account string

	// The batch API (batch.go): how long a batch takes to do all its
	// items (0: done at once), how long its result files stay readable
	// after it ends (0: DefaultBatchRetention), and its faults, one draw
	// each per created batch (see SimFaults).
	BatchDuration           time.Duration
	BatchRetention          time.Duration
	BatchLoseCreateResponse float64
	BatchExpireHalfway      float64
	BatchCancelHalfway      float64
	BatchOutputGone         float64

	// StateFile, if set, is where tasks and charges are kept across
	// restarts: loaded on start, written atomically on every change.
	StateFile string
	// Clock returns the current time; nil means time.Now. Task progress is
	// measured on it.
	Clock func() time.Time
	// Logger receives one line per request (never a credential); nil
	// discards.
	Logger *slog.Logger
}

// SimFaults are the fault settings that can change while a Simulator runs.
type SimFaults struct {
	LoseResponseAfterAccept float64       // probability, [0,1]
	FailBeforeAccept        float64       // probability, [0,1]
	Latency                 time.Duration // >= 0
	NoLookup                bool
	IgnoreIdempotency       bool

	// Bill faults: one draw per accepted task picks at most one of drop,
	// wrong amount, double and refund, with these probabilities (their
	// sum is at most 1); a phantom line follows every BillPhantomEvery-th
	// accepted task. Each planted fault is listed by BillFaults.
	BillDropCharge   float64
	BillWrongAmount  float64
	BillDoubleCharge float64
	BillRefund       float64
	BillPhantomEvery int // >= 0; 0 = never

	// Batch faults, drawn per created batch: its create answered with no
	// response after the batch was made; it expires, or the vendor
	// cancels it, after doing half its items (expiry first, when both are
	// drawn); its output file cannot be read.
	BatchLoseCreateResponse float64
	BatchExpireHalfway      float64
	BatchCancelHalfway      float64
	BatchOutputGone         float64
}

func (f SimFaults) validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"BillDropCharge", f.BillDropCharge}, {"BillWrongAmount", f.BillWrongAmount}, {"BillDoubleCharge", f.BillDoubleCharge}, {"BillRefund", f.BillRefund},
		{"BatchLoseCreateResponse", f.BatchLoseCreateResponse}, {"BatchExpireHalfway", f.BatchExpireHalfway}, {"BatchCancelHalfway", f.BatchCancelHalfway}, {"BatchOutputGone", f.BatchOutputGone}} {
		if !(p.v >= 0 && p.v <= 1) {
			return fmt.Errorf("paidvendortest: simulator: %s must be a probability in [0,1], got %v", p.name, p.v)
		}
	}
	if sum := f.BillDropCharge + f.BillWrongAmount + f.BillDoubleCharge + f.BillRefund; sum > 1 {
		return fmt.Errorf("paidvendortest: simulator: the bill fault probabilities add up to %v: a task meets at most one, so keep their sum at most 1", sum)
	}
	switch {
	case f.BillPhantomEvery < 0:
		return fmt.Errorf("paidvendortest: simulator: BillPhantomEvery must not be negative (0 plants no phantom), got %d", f.BillPhantomEvery)
	case !(f.LoseResponseAfterAccept >= 0 && f.LoseResponseAfterAccept <= 1):
		return fmt.Errorf("paidvendortest: simulator: LoseResponseAfterAccept must be a probability in [0,1], got %v", f.LoseResponseAfterAccept)
	case !(f.FailBeforeAccept >= 0 && f.FailBeforeAccept <= 1):
		return fmt.Errorf("paidvendortest: simulator: FailBeforeAccept must be a probability in [0,1], got %v", f.FailBeforeAccept)
	case f.Latency < 0:
		return fmt.Errorf("paidvendortest: simulator: Latency must not be negative, got %v", f.Latency)
	}
	return nil
}

// Simulator is an in-process paid vendor serving the vendor API as an
// http.Handler. It keeps tasks and charges in memory (and in
// SimConfig.StateFile, if set). Fault decisions come from math/rand sources
// seeded with SimConfig.Seed: the same sequence of authorized submissions
// meets the same faults. Bill faults draw from a source of their own, so
// turning them on leaves the other faults' sequence as it was. It is safe
// for concurrent use.
type Simulator struct {
	// apiKey holds the key inside a closure: printing the struct by
	// reflection shows a function address, never the key.
	apiKey       func() string
	rotateKey    func(string)
	account      string
	taskDuration time.Duration
	prices       map[string]paidvendor.Cost
	defaultPrice paidvendor.Cost
	stateFile    string
	now          func() time.Time
	log          *slog.Logger
	mux          *http.ServeMux

	mu      sync.Mutex
	faults  SimFaults
	rng     *mathrand.Rand
	billRng *mathrand.Rand
	tasks   map[string]*simTask
	order   []string          // task IDs in creation order
	byKey   map[string]string // idempotency key -> first task created with it
	lines   []simLine         // the bill, by sequence number
	lastSeq int64             // the last line sequence number given out, also to a line taken off the bill
	planted []vendorapi.BillFault

	// The batch API's state (batch.go): batches by ID and in creation
	// order (the n-th has Seq n), the first that may still be open, the
	// result files, and the batch faults met.
	batchDuration  time.Duration
	batchRetention time.Duration
	batchRng       *mathrand.Rand
	batches        map[string]*simBatch
	batchOrder     []string
	firstOpenBatch int
	lastBatchSeq   int64
	files          map[string]simFile
	batchFaults    BatchFaults

	// stats are what GET /v1/stats reports; recent holds the arrival
	// times of the submissions of the last second.
	statsMu sync.Mutex
	stats   vendorapi.Stats
	recent  []time.Time
	// inFlight are the requests being served, and peak those served at
	// once when MaxInFlight last rose: what a test of a concurrency limit
	// prints when it fails.
	inFlight map[uint64]string
	nextReq  uint64
	peak     []string
}

type simTask struct {
	ID             string            `json:"id"`
	IdempotencyKey string            `json:"idempotency_key"`
	Kind           string            `json:"kind"`
	Params         map[string]string `json:"params"`
	Cost           vendorapi.Cost    `json:"cost"`
	CreatedAt      time.Time         `json:"created_at"`
	SHA256         string            `json:"sha256"` // of resultBytes, fixed at creation
}

// NewSimulator is OpenSimulator for tests and examples: it panics if the
// configuration is invalid or the state file cannot be loaded.
func NewSimulator(cfg SimConfig) *Simulator {
	s, err := OpenSimulator(cfg)
	if err != nil {
		panic(err)
	}
	return s
}

// OpenSimulator validates cfg, loads cfg.StateFile if it exists, and returns
// a ready Simulator. A missing state file is an empty vendor; a state file
// that does not load is an error (charges are never dropped silently).
func OpenSimulator(cfg SimConfig) (*Simulator, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("paidvendortest: simulator: APIKey is empty: the simulator needs a key to accept")
	}
	faults := SimFaults{
		LoseResponseAfterAccept: cfg.LoseResponseAfterAccept,
		FailBeforeAccept:        cfg.FailBeforeAccept,
		Latency:                 cfg.Latency,
		NoLookup:                cfg.NoLookup,
		IgnoreIdempotency:       cfg.IgnoreIdempotency,
		BillDropCharge:          cfg.BillDropCharge,
		BillWrongAmount:         cfg.BillWrongAmount,
		BillDoubleCharge:        cfg.BillDoubleCharge,
		BillRefund:              cfg.BillRefund,
		BillPhantomEvery:        cfg.BillPhantomEvery,
		BatchLoseCreateResponse: cfg.BatchLoseCreateResponse,
		BatchExpireHalfway:      cfg.BatchExpireHalfway,
		BatchCancelHalfway:      cfg.BatchCancelHalfway,
		BatchOutputGone:         cfg.BatchOutputGone,
	}
	if err := faults.validate(); err != nil {
		return nil, err
	}
	if cfg.TaskDuration < 0 {
		return nil, fmt.Errorf("paidvendortest: simulator: TaskDuration must not be negative, got %v", cfg.TaskDuration)
	}
	if cfg.BatchDuration < 0 || cfg.BatchRetention < 0 {
		return nil, fmt.Errorf("paidvendortest: simulator: BatchDuration and BatchRetention must not be negative, got %v and %v", cfg.BatchDuration, cfg.BatchRetention)
	}
	var apiKey atomic.Pointer[string]
	apiKey.Store(&cfg.APIKey)
	s := &Simulator{
		apiKey:       func() string { return *apiKey.Load() },
		rotateKey:    func(k string) { apiKey.Store(&k) },
		account:      cfg.Account,
		taskDuration: cfg.TaskDuration,
		prices:       make(map[string]paidvendor.Cost, len(cfg.PricePerKind)),
		defaultPrice: cfg.DefaultPrice,
		stateFile:    cfg.StateFile,
		now:          cfg.Clock,
		log:          cfg.Logger,
		faults:       faults,
		rng:          mathrand.New(mathrand.NewSource(cfg.Seed)),
		billRng:      mathrand.New(mathrand.NewSource(cfg.Seed ^ billSeedSalt)),
		tasks:        map[string]*simTask{},
		byKey:        map[string]string{},

		batchDuration:  cfg.BatchDuration,
		batchRetention: cfg.BatchRetention,
		batchRng:       mathrand.New(mathrand.NewSource(cfg.Seed ^ batchSeedSalt)),
		batches:        map[string]*simBatch{},
		files:          map[string]simFile{},
	}
	if s.batchRetention == 0 {
		s.batchRetention = DefaultBatchRetention
	}
	for kind, c := range cfg.PricePerKind {
		if c.Amount < 0 || c.Currency == "" {
			return nil, fmt.Errorf("paidvendortest: simulator: price of kind %q needs a non-negative amount and a currency", kind)
		}
		s.prices[kind] = c
	}
	if s.defaultPrice == (paidvendor.Cost{}) {
		s.defaultPrice = DefaultPrice
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.stateFile != "" {
		if err := s.load(); err != nil {
			return nil, err
		}
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST "+vendorapi.TasksPath, s.handleSubmit)
	s.mux.HandleFunc("GET "+vendorapi.TasksPath, s.handleLookup)
	s.mux.HandleFunc("GET "+vendorapi.TaskPath("{id}"), s.handleTask)
	s.mux.HandleFunc("GET "+vendorapi.ResultPath("{id}"), s.handleResult)
	s.mux.HandleFunc("GET "+vendorapi.ChargesPath, s.handleCharges)
	s.mux.HandleFunc("GET "+vendorapi.StatsPath, s.handleStats)
	s.mux.HandleFunc("GET "+vendorapi.BillFaultsPath, s.handleBillFaults)
	s.mux.HandleFunc("POST "+vendorapi.BatchesPath, s.handleCreateBatch)
	s.mux.HandleFunc("GET "+vendorapi.BatchesPath, s.handleListBatches)
	s.mux.HandleFunc("GET "+vendorapi.BatchPath("{id}"), s.handleBatch)
	s.mux.HandleFunc("POST "+vendorapi.BatchCancelPath("{id}"), s.handleCancelBatch)
	s.mux.HandleFunc("GET "+vendorapi.FileContentPath("{id}"), s.handleFileContent)
	return s, nil
}

// SetFaults replaces the fault settings; the random source keeps its place.
func (s *Simulator) SetFaults(f SimFaults) error {
	if err := f.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
	return nil
}

// Faults returns the current fault settings.
func (s *Simulator) Faults() SimFaults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// Charges returns a copy of every line on the bill, oldest first: the
// charges, and any planted phantom, double or refund line.
func (s *Simulator) Charges() []paidvendor.Charge {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceAndSaveLocked()
	out := make([]paidvendor.Charge, 0, len(s.lines))
	for _, l := range s.lines {
		out = append(out, l.Charge)
	}
	return out
}

// ChargeCount is len(Charges()).
func (s *Simulator) ChargeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceAndSaveLocked()
	return len(s.lines)
}

// TaskCount is the number of tasks the simulator has accepted.
func (s *Simulator) TaskCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tasks)
}

// Stats returns what the simulator saw (GET /v1/stats).
func (s *Simulator) Stats() vendorapi.Stats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return s.stats
}

// counted reports whether r counts in Stats: the API's requests, not the
// reports about them.
func counted(r *http.Request) bool {
	return r.URL.Path != vendorapi.StatsPath && r.URL.Path != vendorapi.ChargesPath && r.URL.Path != vendorapi.BillFaultsPath
}

// arrive counts a request as it arrives (before any latency), and returns
// the function that counts it gone.
func (s *Simulator) arrive(r *http.Request) func() {
	if !counted(r) {
		return func() {}
	}
	at := s.now()
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	s.stats.Requests++
	s.stats.InFlight++
	s.nextReq++
	id := s.nextReq
	if s.inFlight == nil {
		s.inFlight = map[uint64]string{}
	}
	s.inFlight[id] = fmt.Sprintf("%s %s (arrived %s)", r.Method, r.URL.RequestURI(), at.Format("15:04:05.000000"))
	if s.stats.InFlight > s.stats.MaxInFlight {
		s.stats.MaxInFlight = s.stats.InFlight
		s.peak = slices.Sorted(maps.Values(s.inFlight))
	}
	if r.Method == http.MethodPost && r.URL.Path == vendorapi.TasksPath {
		s.stats.Submissions++
		cut := 0
		for cut < len(s.recent) && at.Sub(s.recent[cut]) >= time.Second {
			cut++
		}
		s.recent = append(s.recent[cut:], at)
		s.stats.MaxSubmissionsPerSecond = max(s.stats.MaxSubmissionsPerSecond, len(s.recent))
	}
	if r.Method == http.MethodPost && r.URL.Path == vendorapi.BatchesPath {
		s.stats.Batches++
	}
	return func() {
		s.statsMu.Lock()
		s.stats.InFlight--
		delete(s.inFlight, id)
		s.statsMu.Unlock()
	}
}

// PeakInFlight names the requests the simulator served at once when its
// MaxInFlight was reached, with their arrival times.
func (s *Simulator) PeakInFlight() []string {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return slices.Clone(s.peak)
}

// ServeHTTP implements http.Handler.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer s.arrive(r)()
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	defer func() {
		status := rec.status
		if rec.dropped {
			s.log.Warn("vendorsim: response dropped after accept (simulated fault)", "method", r.Method, "path", r.URL.Path, "task_id", rec.taskID)
			return
		}
		if status == 0 {
			status = http.StatusOK
		}
		s.log.Info("vendorsim: request", "method", r.Method, "path", r.URL.Path, "status", status, "task_id", rec.taskID, "duration", time.Since(start).Round(time.Microsecond))
	}()

	if latency := s.Faults().Latency; latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			rec.status = 499 // client went away; nothing written
			return
		}
	}
	if !s.authorized(r) {
		// Never log or echo what was presented.
		writeError(rec, http.StatusUnauthorized, vendorapi.CodeUnauthorized, "missing or invalid API key")
		return
	}
	s.mux.ServeHTTP(rec, r)
}

// RotateKey replaces the key the simulator accepts, as a vendor's key
// rotation does: the old key is refused from now on; the account, its
// tasks and its bill stay as they were.
func (s *Simulator) RotateKey(key string) { s.rotateKey(key) }

func (s *Simulator) authorized(r *http.Request) bool {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(token), []byte(s.apiKey())) == 1
}

// String describes the simulator without its API key.
func (s *Simulator) String() string {
	return fmt.Sprintf("paidvendortest.Simulator{tasks: %d, charges: %d, apiKey: %s}", s.TaskCount(), s.ChargeCount(), redacted)
}

// Format makes every fmt verb print String, so the API key never shows.
func (s *Simulator) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// String describes the configuration with the API key redacted.
func (c SimConfig) String() string {
	return fmt.Sprintf("paidvendortest.SimConfig{APIKey: %s, LoseResponseAfterAccept: %v, FailBeforeAccept: %v, Latency: %v, TaskDuration: %v, NoLookup: %v, IgnoreIdempotency: %v, Seed: %d, StateFile: %q, "+
		"BillDropCharge: %v, BillWrongAmount: %v, BillDoubleCharge: %v, BillRefund: %v, BillPhantomEvery: %d, "+
		"BatchDuration: %v, BatchRetention: %v, BatchLoseCreateResponse: %v, BatchExpireHalfway: %v, BatchCancelHalfway: %v, BatchOutputGone: %v}",
		redacted, c.LoseResponseAfterAccept, c.FailBeforeAccept, c.Latency, c.TaskDuration, c.NoLookup, c.IgnoreIdempotency, c.Seed, c.StateFile,
		c.BillDropCharge, c.BillWrongAmount, c.BillDoubleCharge, c.BillRefund, c.BillPhantomEvery,
		c.BatchDuration, c.BatchRetention, c.BatchLoseCreateResponse, c.BatchExpireHalfway, c.BatchCancelHalfway, c.BatchOutputGone)
}

// Format makes every fmt verb print String, so the API key never shows.
func (c SimConfig) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// LogValue keeps the API key out of slog output.
func (c SimConfig) LogValue() slog.Value { return slog.StringValue(c.String()) }

func (s *Simulator) handleSubmit(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(vendorapi.IdempotencyKeyHeader)
	if key == "" {
		writeError(w, http.StatusBadRequest, vendorapi.CodeMissingIdempotencyKey, "the Idempotency-Key header is required")
		return
	}
	var req vendorapi.SubmitRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxSubmitBody))
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, vendorapi.CodeBadJSON, "body is not a JSON task request")
		return
	}
	if req.Kind == "" {
		writeError(w, http.StatusBadRequest, vendorapi.CodeMissingKind, "kind is required")
		return
	}
	if req.Params == nil {
		req.Params = map[string]string{}
	}

	s.mu.Lock()
	// Two draws per authorized, well-formed submission, whatever the
	// settings, so the fault sequence depends only on the seed and the
	// order of submissions.
	failDraw, loseDraw := s.rng.Float64(), s.rng.Float64()
	faults := s.faults
	if failDraw < faults.FailBeforeAccept {
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, codeSimulatedFailure, "simulated failure before accept; nothing was charged")
		return
	}
	var t *simTask
	if !faults.IgnoreIdempotency {
		if id, ok := s.byKey[key]; ok {
			t = s.tasks[id]
			if t.Kind != req.Kind || !equalParams(t.Params, req.Params) {
				s.mu.Unlock()
				writeError(w, http.StatusConflict, vendorapi.CodeIdempotencyConflict, "idempotency key already used for a different request")
				return
			}
		}
	}
	created := false
	if t == nil {
		var err error
		if t, err = s.acceptLocked(key, req); err != nil {
			s.mu.Unlock()
			s.log.Error("vendorsim: cannot save state; submission refused", "error", err)
			writeError(w, http.StatusInternalServerError, codeStateNotSaved, "the vendor could not record the task; nothing was charged")
			return
		}
		created = true
	}
	wt := s.wireTaskLocked(t)
	s.mu.Unlock()

	if rs, ok := w.(*statusRecorder); ok {
		rs.taskID = t.ID
	}
	if loseDraw < faults.LoseResponseAfterAccept {
		dropResponse(w)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, wt)
}

// acceptLocked creates, charges and saves a task; on a save failure nothing
// is kept.
func (s *Simulator) acceptLocked(key string, req vendorapi.SubmitRequest) (*simTask, error) {
	id, err := newSimTaskID()
	if err != nil {
		return nil, err
	}
	for s.tasks[id] != nil { // practically never
		if id, err = newSimTaskID(); err != nil {
			return nil, err
		}
	}
	price, ok := s.prices[req.Kind]
	if !ok {
		price = s.defaultPrice
	}
	now := s.now().UTC()
	t := &simTask{
		ID:             id,
		IdempotencyKey: key,
		Kind:           req.Kind,
		Params:         req.Params,
		Cost:           vendorapi.Cost{Amount: price.Amount, Currency: price.Currency},
		CreatedAt:      now,
	}
	sum := sha256.Sum256(simResultBytes(t))
	t.SHA256 = hex.EncodeToString(sum[:])

	_, keyTaken := s.byKey[key]
	undoBill := s.billMarkLocked()
	s.tasks[id] = t
	s.order = append(s.order, id)
	if !keyTaken {
		s.byKey[key] = id
	}
	s.chargeLocked(t, now)
	if err := s.saveLocked(); err != nil {
		delete(s.tasks, id)
		s.order = s.order[:len(s.order)-1]
		if !keyTaken {
			delete(s.byKey, key)
		}
		undoBill()
		return nil, err
	}
	return t, nil
}

func (s *Simulator) handleLookup(w http.ResponseWriter, r *http.Request) {
	if s.Faults().NoLookup {
		writeError(w, http.StatusNotImplemented, vendorapi.CodeLookupUnsupported, "this vendor cannot look tasks up by idempotency key")
		return
	}
	key := r.URL.Query().Get(vendorapi.IdempotencyKeyParam)
	if key == "" {
		writeError(w, http.StatusBadRequest, vendorapi.CodeMissingIdempotencyKey, "query parameter idempotency_key is required")
		return
	}
	s.mu.Lock()
	id, ok := s.byKey[key]
	var wt vendorapi.Task
	if ok {
		wt = s.wireTaskLocked(s.tasks[id])
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, vendorapi.CodeNotFound, "no task with this idempotency key")
		return
	}
	setTaskID(w, id)
	writeJSON(w, http.StatusOK, wt)
}

func (s *Simulator) handleTask(w http.ResponseWriter, r *http.Request) {
	t, ok := s.taskFromPath(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	wt := s.wireTaskLocked(t)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, wt)
}

func (s *Simulator) handleResult(w http.ResponseWriter, r *http.Request) {
	t, ok := s.taskFromPath(w, r)
	if !ok {
		return
	}
	switch s.statusOf(t) {
	case paidvendor.StatusSucceeded:
	case paidvendor.StatusFailed:
		writeError(w, http.StatusConflict, vendorapi.CodeTaskFailed, "the task failed and has no result")
		return
	default:
		writeError(w, http.StatusConflict, vendorapi.CodeNotFinished, "the task has not finished")
		return
	}
	data := simResultBytes(t)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func (s *Simulator) handleStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

// taskFromPath finds the task named in the path or answers 400/404.
func (s *Simulator) taskFromPath(w http.ResponseWriter, r *http.Request) (*simTask, bool) {
	id := r.PathValue("id")
	setTaskID(w, id)
	if err := paidvendor.ValidateTaskID(id); err != nil {
		writeError(w, http.StatusBadRequest, vendorapi.CodeBadTaskID, "not a task ID of this vendor")
		return nil, false
	}
	s.mu.Lock()
	t := s.tasks[id]
	s.mu.Unlock()
	if t == nil {
		writeError(w, http.StatusNotFound, vendorapi.CodeNotFound, "no such task")
		return nil, false
	}
	return t, true // a simTask is never changed after creation
}

// statusOf derives a task's state from the time since it was accepted.
func (s *Simulator) statusOf(t *simTask) paidvendor.Status {
	elapsed := s.now().Sub(t.CreatedAt)
	switch {
	case s.taskDuration <= 0 || elapsed >= s.taskDuration:
		if t.Params[FailParam] != "" {
			return paidvendor.StatusFailed
		}
		return paidvendor.StatusSucceeded
	case elapsed < s.taskDuration/4:
		return paidvendor.StatusQueued
	default:
		return paidvendor.StatusRunning
	}
}

func (s *Simulator) wireTaskLocked(t *simTask) vendorapi.Task {
	cost := t.Cost
	status := s.statusOf(t)
	wt := vendorapi.Task{
		ID:             t.ID,
		IdempotencyKey: t.IdempotencyKey,
		Kind:           t.Kind,
		Status:         string(status),
		Cost:           &cost,
	}
	switch status {
	case paidvendor.StatusSucceeded:
		wt.SHA256 = t.SHA256
	case paidvendor.StatusFailed:
		wt.Error = t.Params[FailParam]
	}
	return wt
}

// simResultBytes is the deterministic "work product" of a task.
func simResultBytes(t *simTask) []byte {
	var b strings.Builder
	b.WriteString("allot vendorsim result v1\n")
	fmt.Fprintf(&b, "task %q\nkind %q\n", t.ID, t.Kind)
	keys := make([]string, 0, len(t.Params))
	for k := range t.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "param %q = %q\n", k, t.Params[k])
	}
	return []byte(b.String())
}

// ResultSHA256 is the sha256 (hex) of the result the simulator produces for
// a task with this ID, kind and params, so a test can predict what a client
// must find.
func ResultSHA256(id, kind string, params map[string]string) string {
	sum := sha256.Sum256(simResultBytes(&simTask{ID: id, Kind: kind, Params: params}))
	return hex.EncodeToString(sum[:])
}

func newSimTaskID() (string, error) { return newSimID(vendorapi.TaskIDPrefix) }

func equalParams(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// dropResponse closes the connection without answering, so the client sees
// a transport error (EOF) after the vendor has accepted.
func dropResponse(w http.ResponseWriter) {
	if rs, ok := w.(*statusRecorder); ok {
		rs.dropped = true
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
		return
	}
	// Not hijackable (HTTP/2): abort the handler; the server resets the
	// stream without a response and does not log the panic.
	panic(http.ErrAbortHandler)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, vendorapi.ErrorBody{Error: vendorapi.ErrorDetail{Code: code, Message: message}})
}

func setTaskID(w http.ResponseWriter, id string) {
	if rs, ok := w.(*statusRecorder); ok && paidvendor.ValidateTaskID(id) == nil {
		rs.taskID = id
	}
}

// statusRecorder remembers what was answered, for the request log.
type statusRecorder struct {
	http.ResponseWriter
	status  int
	taskID  string
	dropped bool
}

func (r *statusRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (Hijack, Flush).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
