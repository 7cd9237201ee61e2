package allottest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/paidvendor/vendorapi"
)

// VendorKey is the vendor API key of the tests. It must never show up in
// histories, logs or metrics; tests search for it there.
const VendorKey = "sk-allot-test-7d1f2c9a-DO-NOT-LEAK"

// Vendor is the simulated paid vendor on a real HTTP server, with counters
// that show when the worker read credentials and built clients.
type Vendor struct {
	// Sim is the simulator: its charges, and its faults to set.
	Sim *paidvendortest.Simulator
	// URL is the vendor's base URL.
	URL string
	// Credentials hands out VendorKey and counts the reads.
	Credentials paidvendor.CredentialsSource
	// NewClient builds HTTP clients of the vendor and counts the builds.
	NewClient paidvendor.ClientFactory

	reads   atomic.Int32
	builds  atomic.Int32
	corrupt atomic.Bool
	down    atomic.Bool

	mu       sync.Mutex
	requests []string // "METHOD /path?query" of each request but the stats'
}

type countingCredentials struct{ v *Vendor }

func (c countingCredentials) VendorAPIKey(context.Context) (string, error) {
	c.v.reads.Add(1)
	return VendorKey, nil
}

// NewVendor serves a simulator configured by cfg (its APIKey defaults to
// VendorKey) until the test ends.
func NewVendor(t *testing.T, cfg paidvendortest.SimConfig) *Vendor {
	t.Helper()
	if cfg.APIKey == "" {
		cfg.APIKey = VendorKey
	}
	sim, err := paidvendortest.OpenSimulator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v := &Vendor{Sim: sim}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != vendorapi.StatsPath {
			v.mu.Lock()
			v.requests = append(v.requests, r.Method+" "+r.URL.RequestURI())
			v.mu.Unlock()
		}
		if v.down.Load() && r.URL.Path != vendorapi.StatsPath {
			http.Error(w, `{"error":{"code":"down","message":"the vendor is down (test)"}}`, http.StatusServiceUnavailable)
			return
		}
		if v.corrupt.Load() && strings.HasSuffix(r.URL.Path, "/result") {
			rec := httptest.NewRecorder()
			sim.ServeHTTP(rec, r)
			w.WriteHeader(rec.Code)
			_, _ = w.Write(append(rec.Body.Bytes(), " tampered"...))
			return
		}
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	v.URL = srv.URL
	v.Credentials = countingCredentials{v}
	build := paidvendor.HTTPClientFactory(srv.URL)
	v.NewClient = func(key string) (paidvendor.Client, error) {
		v.builds.Add(1)
		return build(key)
	}
	return v
}

// Down makes the vendor answer every request but its stats with 503, as a
// dead vendor behind a load balancer does (on), or serve again (off).
func (v *Vendor) Down(on bool) { v.down.Store(on) }

// CorruptResults makes the vendor serve result bytes that do not match
// their sha256 (on) or the true ones (off).
func (v *Vendor) CorruptResults(on bool) { v.corrupt.Store(on) }

// Requests lists the requests the vendor got, but its stats', in order:
// "METHOD /path?query" each.
func (v *Vendor) Requests() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.requests...)
}

// CredentialReads is how often the vendor key was read.
func (v *Vendor) CredentialReads() int32 { return v.reads.Load() }

// ClientsBuilt is how many vendor clients were built.
func (v *Vendor) ClientsBuilt() int32 { return v.builds.Load() }

// ChargesPerKey counts the vendor's charges per idempotency key.
func (v *Vendor) ChargesPerKey() map[string]int {
	out := map[string]int{}
	for _, ch := range v.Sim.Charges() {
		out[ch.IdempotencyKey]++
	}
	return out
}

// AssertAtMostOneChargePerKey fails the test if any idempotency key was
// charged twice: the one thing allot must never let happen.
func (v *Vendor) AssertAtMostOneChargePerKey(t *testing.T) {
	t.Helper()
	for key, n := range v.ChargesPerKey() {
		if n > 1 {
			t.Fatalf("idempotency key %s was charged %d times", key, n)
		}
	}
}
