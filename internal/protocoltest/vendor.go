// Package protocoltest holds the fakes of the paid protocol's conformance
// suite (workflows/protocol_conformance_test.go): one simulated vendor
// (paidvendortest.Simulator) reached through each kind of adapter allot
// supports, with a record of every request it was sent.
//
//   - Vendor wraps the simulator: it counts and orders the requests, applies
//     faults per submission (the first may fail, the next succeed), and can
//     hold a submission in flight until the test releases it.
//   - InProcessClient is a Go adapter (adapter = "go"): a paidvendor.Client
//     that calls the vendor's handler in-process, without a network, and
//     maps its answers to the paidvendor errors as a Go adapter's author
//     would.
//   - Adapter is an activity adapter (adapter = "activity"): the submit,
//     lookup, status and fetch activities a vendor's worker registers on its
//     task queue, over any paidvendor.Client.
//
// Nothing here is linked by a production binary.
package protocoltest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/paidvendor/vendorapi"
)

// Endpoints of the vendor API, as Vendor records them.
const (
	EndpointSubmit = "submit"
	EndpointLookup = "lookup"
	EndpointPoll   = "poll"
	EndpointResult = "result"
	EndpointOther  = "other"
)

// Endpoint names the vendor API call a request makes.
func Endpoint(r *http.Request) string {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == vendorapi.TasksPath:
		return EndpointSubmit
	case r.Method == http.MethodGet && r.URL.Path == vendorapi.TasksPath:
		return EndpointLookup
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, vendorapi.TasksPath+"/") && strings.HasSuffix(r.URL.Path, "/result"):
		return EndpointResult
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, vendorapi.TasksPath+"/"):
		return EndpointPoll
	}
	return EndpointOther
}

// Vendor is a simulated vendor (an http.Handler) that records every request
// it gets and applies the faults of the test case.
type Vendor struct {
	Sim *paidvendortest.Simulator

	// Base are the simulator's faults for every request; NoLookup and
	// IgnoreIdempotency in it hold throughout.
	Base paidvendortest.SimFaults
	// Submits are extra faults for the submissions in order: Submits[0]
	// for the first submission, and so on; later ones get Base only.
	Submits []paidvendortest.SimFaults
	// LookupFailures: the first this many look-ups answer 503 (the vendor
	// is down for a while) without reaching the simulator.
	LookupFailures int

	mu      sync.Mutex
	events  []string // endpoints, in the order the requests arrived
	submits int
	lookups int
	holds   map[int]*hold
}

type hold struct {
	entered, release chan struct{}
}

// NewVendor wraps sim. base is applied at once.
func NewVendor(sim *paidvendortest.Simulator, base paidvendortest.SimFaults) *Vendor {
	v := &Vendor{Sim: sim, Base: base, holds: map[int]*hold{}}
	if err := sim.SetFaults(base); err != nil {
		panic(err)
	}
	return v
}

// Hold makes submission n (1 for the first) wait, once it has arrived and
// before the simulator sees it, until release is called: a send in flight.
// entered is closed when it arrives.
func (v *Vendor) Hold(n int) (entered <-chan struct{}, release func()) {
	h := &hold{entered: make(chan struct{}), release: make(chan struct{})}
	v.mu.Lock()
	v.holds[n] = h
	v.mu.Unlock()
	var once sync.Once
	return h.entered, func() { once.Do(func() { close(h.release) }) }
}

// ServeHTTP records the request, applies the faults for it and serves it
// by the simulator.
func (v *Vendor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ep := Endpoint(r)
	v.mu.Lock()
	v.events = append(v.events, ep)
	faults := v.Base
	var h *hold
	if ep == EndpointSubmit {
		v.submits++
		if n := v.submits; n <= len(v.Submits) {
			faults = merge(v.Base, v.Submits[n-1])
		}
		h = v.holds[v.submits]
	}
	down := false
	if ep == EndpointLookup {
		v.lookups++
		down = v.lookups <= v.LookupFailures
	}
	v.mu.Unlock()
	if down {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(vendorapi.ErrorBody{Error: vendorapi.ErrorDetail{Code: "unavailable", Message: "the vendor is down for a while (conformance fault)"}})
		return
	}
	if h != nil {
		close(h.entered)
		<-h.release
	}
	if ep == EndpointSubmit {
		// Faults are drawn per submission; the concurrent cases hold
		// them constant, so setting them here races with nothing that
		// matters.
		if err := v.Sim.SetFaults(faults); err != nil {
			panic(err)
		}
		defer func() {
			if err := v.Sim.SetFaults(v.Base); err != nil {
				panic(err)
			}
		}()
	}
	v.Sim.ServeHTTP(w, r)
}

func merge(base, extra paidvendortest.SimFaults) paidvendortest.SimFaults {
	out := extra
	out.NoLookup = out.NoLookup || base.NoLookup
	out.IgnoreIdempotency = out.IgnoreIdempotency || base.IgnoreIdempotency
	out.Latency = max(out.Latency, base.Latency)
	out.LoseResponseAfterAccept = max(out.LoseResponseAfterAccept, base.LoseResponseAfterAccept)
	out.FailBeforeAccept = max(out.FailBeforeAccept, base.FailBeforeAccept)
	return out
}

// Events lists the endpoints called, in order.
func (v *Vendor) Events() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.events...)
}

// Count is how many requests reached endpoint.
func (v *Vendor) Count(endpoint string) int {
	n := 0
	for _, e := range v.Events() {
		if e == endpoint {
			n++
		}
	}
	return n
}

// Charges is what the simulator billed, oldest first.
func (v *Vendor) Charges() []paidvendor.Charge { return v.Sim.Charges() }
