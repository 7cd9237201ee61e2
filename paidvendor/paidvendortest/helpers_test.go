package paidvendortest

import (
	"net/http/httptest"
	"testing"
	"time"

	"allot/paidvendor"
)

const testKey = "sk-test-7f3c9a1e55d0b2c4-DO-NOT-LEAK"

// testVendor is a Simulator behind a real HTTP server and the production
// HTTP client talking to it.
type testVendor struct {
	sim    *Simulator
	srv    *httptest.Server
	client *paidvendor.HTTPClient
}

func newTestVendor(t *testing.T, cfg SimConfig) *testVendor {
	t.Helper()
	if cfg.APIKey == "" {
		cfg.APIKey = testKey
	}
	tv := &testVendor{sim: NewSimulator(cfg)}
	tv.srv = httptest.NewServer(tv.sim)
	t.Cleanup(tv.srv.Close)
	tv.client = tv.newClient(t, testKey)
	return tv
}

// newClient is a client of the same vendor presenting key.
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

func submitReq(key string) paidvendor.SubmitRequest {
	return paidvendor.SubmitRequest{IdempotencyKey: key, Kind: "render", Params: map[string]string{"episode": "2026-W32-0", "lang": "zh"}}
}
