package paidvendor

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mathrand "math/rand"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// SimFailParam is a submission parameter the simulator understands: when a
// task's Params hold it (non-empty), the task ends "failed" with that value
// as its error instead of "succeeded", and nothing is refunded.
const SimFailParam = "sim.fail"

// DevAPIKey is the simulator's documented development key, used by the
// one-command dev setup. Never use it for anything reachable by others.
const DevAPIKey = "dev-vendor-key"

// DefaultSimPrice is what a task costs when SimConfig names no price for its
// kind and no DefaultPrice.
var DefaultSimPrice = Cost{Amount: 250, Currency: "USD"}

// SimConfig configures a Simulator.
type SimConfig struct {
	APIKey                  string          // the bearer token it accepts; requests without it -> 401, charge nothing
	LoseResponseAfterAccept float64         // P: the task is accepted and charged, then the connection is closed with no response
	FailBeforeAccept        float64         // P: a submission gets 503, nothing charged
	Latency                 time.Duration   // added to each request
	TaskDuration            time.Duration   // a task is queued for the first quarter of this, running until it ends, then succeeded (or failed)
	NoLookup                bool            // lookup endpoint answers 501
	IgnoreIdempotency       bool            // every POST creates and charges a new task (a bad vendor)
	Seed                    int64           // makes the fault sequence repeatable
	PricePerKind            map[string]Cost // price by task kind
	DefaultPrice            Cost            // price of a kind not in PricePerKind; zero means DefaultSimPrice

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
}

func (f SimFaults) validate() error {
	switch {
	case !(f.LoseResponseAfterAccept >= 0 && f.LoseResponseAfterAccept <= 1):
		return fmt.Errorf("paidvendor: simulator: LoseResponseAfterAccept must be a probability in [0,1], got %v", f.LoseResponseAfterAccept)
	case !(f.FailBeforeAccept >= 0 && f.FailBeforeAccept <= 1):
		return fmt.Errorf("paidvendor: simulator: FailBeforeAccept must be a probability in [0,1], got %v", f.FailBeforeAccept)
	case f.Latency < 0:
		return fmt.Errorf("paidvendor: simulator: Latency must not be negative, got %v", f.Latency)
	}
	return nil
}

// Simulator is an in-process paid vendor serving the vendor API as an
// http.Handler. It keeps tasks and charges in memory (and in
// SimConfig.StateFile, if set). Fault decisions come from a math/rand source
// seeded with SimConfig.Seed: the same sequence of authorized submissions
// meets the same faults. It is safe for concurrent use.
type Simulator struct {
	apiKey       secret
	taskDuration time.Duration
	prices       map[string]Cost
	defaultPrice Cost
	stateFile    string
	now          func() time.Time
	log          *slog.Logger
	mux          *http.ServeMux

	mu      sync.Mutex
	faults  SimFaults
	rng     *mathrand.Rand
	tasks   map[string]*simTask
	order   []string          // task IDs in creation order
	byKey   map[string]string // idempotency key -> first task created with it
	charges []Charge
}

type simTask struct {
	ID             string            `json:"id"`
	IdempotencyKey string            `json:"idempotency_key"`
	Kind           string            `json:"kind"`
	Params         map[string]string `json:"params"`
	Cost           Cost              `json:"cost"`
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
		return nil, errors.New("paidvendor: simulator: APIKey is empty: the simulator needs a key to accept")
	}
	faults := SimFaults{
		LoseResponseAfterAccept: cfg.LoseResponseAfterAccept,
		FailBeforeAccept:        cfg.FailBeforeAccept,
		Latency:                 cfg.Latency,
		NoLookup:                cfg.NoLookup,
		IgnoreIdempotency:       cfg.IgnoreIdempotency,
	}
	if err := faults.validate(); err != nil {
		return nil, err
	}
	if cfg.TaskDuration < 0 {
		return nil, fmt.Errorf("paidvendor: simulator: TaskDuration must not be negative, got %v", cfg.TaskDuration)
	}
	s := &Simulator{
		apiKey:       newSecret(cfg.APIKey),
		taskDuration: cfg.TaskDuration,
		prices:       make(map[string]Cost, len(cfg.PricePerKind)),
		defaultPrice: cfg.DefaultPrice,
		stateFile:    cfg.StateFile,
		now:          cfg.Clock,
		log:          cfg.Logger,
		faults:       faults,
		rng:          mathrand.New(mathrand.NewSource(cfg.Seed)),
		tasks:        map[string]*simTask{},
		byKey:        map[string]string{},
	}
	for kind, c := range cfg.PricePerKind {
		if c.Amount < 0 || c.Currency == "" {
			return nil, fmt.Errorf("paidvendor: simulator: price of kind %q needs a non-negative amount and a currency", kind)
		}
		s.prices[kind] = c
	}
	if s.defaultPrice == (Cost{}) {
		s.defaultPrice = DefaultSimPrice
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
	s.mux.HandleFunc("POST /v1/tasks", s.handleSubmit)
	s.mux.HandleFunc("GET /v1/tasks", s.handleLookup)
	s.mux.HandleFunc("GET /v1/tasks/{id}", s.handleTask)
	s.mux.HandleFunc("GET /v1/tasks/{id}/result", s.handleResult)
	s.mux.HandleFunc("GET /v1/charges", s.handleCharges)
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

// Charges returns a copy of every charge made, oldest first.
func (s *Simulator) Charges() []Charge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Charge(nil), s.charges...)
}

// ChargeCount is len(Charges()).
func (s *Simulator) ChargeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.charges)
}

// TaskCount is the number of tasks the simulator has accepted.
func (s *Simulator) TaskCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tasks)
}

// ServeHTTP implements http.Handler.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
		writeError(rec, http.StatusUnauthorized, "unauthorized", "missing or invalid API key")
		return
	}
	s.mux.ServeHTTP(rec, r)
}

func (s *Simulator) authorized(r *http.Request) bool {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(token), []byte(s.apiKey())) == 1
}

// String describes the simulator without its API key.
func (s *Simulator) String() string {
	return fmt.Sprintf("paidvendor.Simulator{tasks: %d, charges: %d, apiKey: %s}", s.TaskCount(), s.ChargeCount(), redacted)
}

// Format makes every fmt verb print String, so the API key never shows.
func (s *Simulator) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// String describes the configuration with the API key redacted.
func (c SimConfig) String() string {
	return fmt.Sprintf("paidvendor.SimConfig{APIKey: %s, LoseResponseAfterAccept: %v, FailBeforeAccept: %v, Latency: %v, TaskDuration: %v, NoLookup: %v, IgnoreIdempotency: %v, Seed: %d, StateFile: %q}",
		redacted, c.LoseResponseAfterAccept, c.FailBeforeAccept, c.Latency, c.TaskDuration, c.NoLookup, c.IgnoreIdempotency, c.Seed, c.StateFile)
}

// Format makes every fmt verb print String, so the API key never shows.
func (c SimConfig) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// LogValue keeps the API key out of slog output.
func (c SimConfig) LogValue() slog.Value { return slog.StringValue(c.String()) }

func (s *Simulator) handleSubmit(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		writeError(w, http.StatusBadRequest, "missing_idempotency_key", "the Idempotency-Key header is required")
		return
	}
	var req wireSubmit
	dec := json.NewDecoder(io.LimitReader(r.Body, maxTaskBody))
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_json", "body is not a JSON task request")
		return
	}
	if req.Kind == "" {
		writeError(w, http.StatusBadRequest, "missing_kind", "kind is required")
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
		writeError(w, http.StatusServiceUnavailable, "simulated_failure", "simulated failure before accept; nothing was charged")
		return
	}
	var t *simTask
	if !faults.IgnoreIdempotency {
		if id, ok := s.byKey[key]; ok {
			t = s.tasks[id]
			if t.Kind != req.Kind || !equalParams(t.Params, req.Params) {
				s.mu.Unlock()
				writeError(w, http.StatusConflict, "idempotency_conflict", "idempotency key already used for a different request")
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
			writeError(w, http.StatusInternalServerError, "state_not_saved", "the vendor could not record the task; nothing was charged")
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
func (s *Simulator) acceptLocked(key string, req wireSubmit) (*simTask, error) {
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
		Cost:           price,
		CreatedAt:      now,
	}
	sum := sha256.Sum256(simResultBytes(t))
	t.SHA256 = hex.EncodeToString(sum[:])

	_, keyTaken := s.byKey[key]
	s.tasks[id] = t
	s.order = append(s.order, id)
	if !keyTaken {
		s.byKey[key] = id
	}
	s.charges = append(s.charges, Charge{TaskID: id, IdempotencyKey: key, Amount: price.Amount, Currency: price.Currency, At: now})
	if err := s.saveLocked(); err != nil {
		delete(s.tasks, id)
		s.order = s.order[:len(s.order)-1]
		if !keyTaken {
			delete(s.byKey, key)
		}
		s.charges = s.charges[:len(s.charges)-1]
		return nil, err
	}
	return t, nil
}

func (s *Simulator) handleLookup(w http.ResponseWriter, r *http.Request) {
	if s.Faults().NoLookup {
		writeError(w, http.StatusNotImplemented, "lookup_unsupported", "this vendor cannot look tasks up by idempotency key")
		return
	}
	key := r.URL.Query().Get("idempotency_key")
	if key == "" {
		writeError(w, http.StatusBadRequest, "missing_idempotency_key", "query parameter idempotency_key is required")
		return
	}
	s.mu.Lock()
	id, ok := s.byKey[key]
	var wt wireTask
	if ok {
		wt = s.wireTaskLocked(s.tasks[id])
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no task with this idempotency key")
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
	case StatusSucceeded:
	case StatusFailed:
		writeError(w, http.StatusConflict, "task_failed", "the task failed and has no result")
		return
	default:
		writeError(w, http.StatusConflict, "not_finished", "the task has not finished")
		return
	}
	data := simResultBytes(t)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func (s *Simulator) handleCharges(w http.ResponseWriter, _ *http.Request) {
	charges := s.Charges()
	out := make([]wireCharge, 0, len(charges))
	for _, c := range charges {
		out = append(out, wireCharge{TaskID: c.TaskID, IdempotencyKey: c.IdempotencyKey, Amount: c.Amount, Currency: c.Currency, At: c.At})
	}
	writeJSON(w, http.StatusOK, out)
}

// taskFromPath finds the task named in the path or answers 400/404.
func (s *Simulator) taskFromPath(w http.ResponseWriter, r *http.Request) (*simTask, bool) {
	id := r.PathValue("id")
	setTaskID(w, id)
	if err := ValidateTaskID(id); err != nil {
		writeError(w, http.StatusBadRequest, "bad_task_id", "not a task ID of this vendor")
		return nil, false
	}
	s.mu.Lock()
	t := s.tasks[id]
	s.mu.Unlock()
	if t == nil {
		writeError(w, http.StatusNotFound, "not_found", "no such task")
		return nil, false
	}
	return t, true // a simTask is never changed after creation
}

// statusOf derives a task's state from the time since it was accepted.
func (s *Simulator) statusOf(t *simTask) Status {
	elapsed := s.now().Sub(t.CreatedAt)
	switch {
	case s.taskDuration <= 0 || elapsed >= s.taskDuration:
		if t.Params[SimFailParam] != "" {
			return StatusFailed
		}
		return StatusSucceeded
	case elapsed < s.taskDuration/4:
		return StatusQueued
	default:
		return StatusRunning
	}
}

func (s *Simulator) wireTaskLocked(t *simTask) wireTask {
	wt := wireTask{
		ID:             t.ID,
		IdempotencyKey: t.IdempotencyKey,
		Kind:           t.Kind,
		Status:         s.statusOf(t),
		Cost:           &wireCost{Amount: t.Cost.Amount, Currency: t.Cost.Currency},
	}
	switch wt.Status {
	case StatusSucceeded:
		wt.SHA256 = t.SHA256
	case StatusFailed:
		wt.Error = t.Params[SimFailParam]
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

// SimResultSHA256 is the sha256 (hex) of the result the simulator produces
// for a task with this ID, kind and params; tests can predict it.
func SimResultSHA256(id, kind string, params map[string]string) string {
	sum := sha256.Sum256(simResultBytes(&simTask{ID: id, Kind: kind, Params: params}))
	return hex.EncodeToString(sum[:])
}

func newSimTaskID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("paidvendor: simulator: task id: %w", err)
	}
	return taskIDPrefix + hex.EncodeToString(b[:]), nil
}

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
	writeJSON(w, status, wireErrorBody{Error: wireErrorDetail{Code: code, Message: message}})
}

func setTaskID(w http.ResponseWriter, id string) {
	if rs, ok := w.(*statusRecorder); ok && ValidateTaskID(id) == nil {
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
