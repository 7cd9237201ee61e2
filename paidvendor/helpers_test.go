package paidvendor

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const testKey = "sk-test-7f3c9a1e55d0b2c4-DO-NOT-LEAK"

// testVendor is a Simulator behind a real HTTP server, with a request
// counter in front of it and its log captured.
type testVendor struct {
	sim      *Simulator
	srv      *httptest.Server
	client   *HTTPClient
	requests atomic.Int64 // every request that reached the server
	posts    atomic.Int64 // POST /v1/tasks that reached the server
	logBuf   *syncBuffer
}

func newTestVendor(t *testing.T, cfg SimConfig) *testVendor {
	t.Helper()
	tv := &testVendor{logBuf: &syncBuffer{}}
	if cfg.APIKey == "" {
		cfg.APIKey = testKey
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(tv.logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	tv.sim = NewSimulator(cfg)
	tv.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tv.requests.Add(1)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/tasks" {
			tv.posts.Add(1)
		}
		tv.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(tv.srv.Close)
	tv.client = tv.newClient(t, testKey)
	return tv
}

func (tv *testVendor) newClient(t *testing.T, key string) *HTTPClient {
	t.Helper()
	hc := tv.srv.Client()
	hc.Timeout = 10 * time.Second
	c, err := NewHTTPClient(tv.srv.URL, key, hc)
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

func submitReq(key string) SubmitRequest {
	return SubmitRequest{IdempotencyKey: key, Kind: "render", Params: map[string]string{"episode": "2026-W32-0", "lang": "zh"}}
}
