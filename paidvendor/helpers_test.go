package paidvendor_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/paidvendor/vendorapi"
)

const testKey = "sk-test-7f3c9a1e55d0b2c4-DO-NOT-LEAK"

// testVendor is a simulated vendor behind a real HTTP server, with request
// counters in front of it and its log captured.
type testVendor struct {
	sim      *paidvendortest.Simulator
	srv      *httptest.Server
	client   *paidvendor.HTTPClient
	requests atomic.Int64 // every request that reached the server
	posts    atomic.Int64 // POST /v1/tasks that reached the server
	logBuf   *syncBuffer
}

func newTestVendor(t *testing.T, cfg paidvendortest.SimConfig) *testVendor {
	t.Helper()
	tv := &testVendor{logBuf: &syncBuffer{}}
	if cfg.APIKey == "" {
		cfg.APIKey = testKey
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(tv.logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	tv.sim = paidvendortest.NewSimulator(cfg)
	tv.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tv.requests.Add(1)
		if r.Method == http.MethodPost && r.URL.Path == vendorapi.TasksPath {
			tv.posts.Add(1)
		}
		tv.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(tv.srv.Close)
	tv.client = tv.newClient(t, testKey)
	return tv
}

func (tv *testVendor) newClient(t *testing.T, key string) *paidvendor.HTTPClient {
	t.Helper()
	hc := tv.srv.Client()
	hc.Timeout = 10 * time.Second
	c, err := paidvendor.NewHTTPClient(tv.srv.URL, key, hc)
	if err != nil {
		t.Fatalf("NewHTTPClient: %v", err)
	}
	return c
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fakeClock is a settable clock for task progress.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 8, 7, 9, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func submitReq(key string) paidvendor.SubmitRequest {
	return paidvendor.SubmitRequest{IdempotencyKey: key, Kind: "render", Params: map[string]string{"episode": "2026-W32-0", "lang": "zh"}}
}

// isTemporary classifies an error returned by the client the way a caller
// deciding whether to retry would: true for transport errors (connection
// reset, EOF, a lost response, a per-request timeout) and for an
// *HTTPError whose Temporary() is true; false for nil, the caller's
// cancellation, and every definite refusal (unauthorized, not found,
// invalid input, malformed response). The tests use it to show that every
// error the client returns can be told apart this way with errors.Is/As.
func isTemporary(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var he *paidvendor.HTTPError
	if errors.As(err, &he) {
		return he.Temporary()
	}
	for _, permanent := range []error{paidvendor.ErrInvalidTaskID, paidvendor.ErrInvalidRequest, paidvendor.ErrBadResponse, paidvendor.ErrUnauthorized, paidvendor.ErrNotFound, paidvendor.ErrLookupUnsupported, paidvendor.ErrNoResult, paidvendor.ErrIdempotencyConflict} {
		if errors.Is(err, permanent) {
			return false
		}
	}
	var te *paidvendor.TransportError
	return errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}
