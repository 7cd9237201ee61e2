package paidvendor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"allot"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
)

// assertNoKey fails if text holds the API key or any long piece of it.
func assertNoKey(t *testing.T, where, text string) {
	t.Helper()
	for _, piece := range []string{testKey, testKey[:12], testKey[len(testKey)-12:]} {
		if strings.Contains(text, piece) {
			t.Errorf("%s shows (part of) the API key: %q", where, text)
			return
		}
	}
}

func TestAPIKeyNeverLeaks(t *testing.T) {
	ctx := context.Background()
	var errs []error
	collect := func(_ any, err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}

	// Errors from every kind of failure against the simulator.
	tv := newTestVendor(t, paidvendortest.SimConfig{NoLookup: true})
	key := allot.IdempotencyKey("p", "e", "s", 0)
	collect(tv.client.LookupByIdempotencyKey(ctx, key))
	collect(tv.client.Task(ctx, "vt_0123456789abcdef"))
	collect(tv.client.Task(ctx, "bad/id"))
	collect(tv.client.Submit(ctx, paidvendor.SubmitRequest{IdempotencyKey: "nope", Kind: "k"}))
	for _, f := range []paidvendortest.SimFaults{{FailBeforeAccept: 1}, {LoseResponseAfterAccept: 1}} {
		if err := tv.sim.SetFaults(f); err != nil {
			t.Fatal(err)
		}
		collect(tv.client.Submit(ctx, submitReq(key)))
	}
	if err := tv.sim.SetFaults(paidvendortest.SimFaults{}); err != nil {
		t.Fatal(err)
	}
	task, err := tv.client.Submit(ctx, submitReq(allot.IdempotencyKey("p", "e", "s", 1)))
	if err != nil {
		t.Fatal(err)
	}
	collect(tv.client.Result(ctx, task.ID+"0"))
	// A client holding the real key, refused by a server with another key.
	other := newTestVendor(t, paidvendortest.SimConfig{APIKey: "sk-some-other-key"})
	collect(other.client.Charges(ctx))

	// A broken vendor that echoes the Authorization header in its errors.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := http.StatusInternalServerError
		if r.Method == http.MethodGet {
			status = http.StatusUnauthorized
		}
		http.Error(w, "bad request, you sent: "+r.Header.Get("Authorization"), status)
	}))
	defer echo.Close()
	ec, err := paidvendor.NewHTTPClient(echo.URL, testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	collect(ec.Submit(ctx, submitReq(key)))
	collect(ec.Charges(ctx))

	// Invalid keys: the error must not echo them.
	collect(paidvendor.NewHTTPClient(echo.URL, testKey+"\n", nil))
	collect(paidvendor.NewHTTPClient(echo.URL, "x "+testKey, nil))

	if len(errs) < 11 {
		t.Fatalf("collected only %d errors; the scenario did not run", len(errs))
	}
	for _, err := range errs {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
			assertNoKey(t, "error "+verb, fmt.Sprintf(verb, err))
		}
	}

	// The client itself, however it is printed.
	c := tv.client
	type holder struct {
		Vendor paidvendor.Client
		Ptr    *paidvendor.HTTPClient
		inner  paidvendor.HTTPClient
	}
	h := holder{Vendor: c, Ptr: c, inner: *c}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		assertNoKey(t, "client "+verb, fmt.Sprintf(verb, c))
		assertNoKey(t, "client value "+verb, fmt.Sprintf(verb, *c))
		assertNoKey(t, "struct holding the client "+verb, fmt.Sprintf(verb, h))
		assertNoKey(t, "simulator "+verb, fmt.Sprintf(verb, tv.sim))
		assertNoKey(t, "sim config "+verb, fmt.Sprintf(verb, paidvendortest.SimConfig{APIKey: testKey}))
	}
	var logs bytes.Buffer
	for _, handler := range []slog.Handler{slog.NewTextHandler(&logs, nil), slog.NewJSONHandler(&logs, nil)} {
		slog.New(handler).Info("vendor", "client", c, "ptr", h.Ptr, "holder", h, "config", paidvendortest.SimConfig{APIKey: testKey})
	}
	assertNoKey(t, "slog output", logs.String())
	data, _ := json.Marshal(h)
	assertNoKey(t, "JSON of a struct holding the client", string(data))

	// The simulator's log, including after a wrong key was presented.
	if _, err := tv.newClient(t, "sk-presented-wrong-LEAKCHECK").Charges(ctx); err == nil {
		t.Fatal("wrong key accepted")
	}
	simLog := tv.logBuf.String() + other.logBuf.String()
	if !strings.Contains(simLog, "vendorsim: request") || !strings.Contains(simLog, "status=401") {
		t.Fatalf("the simulator did not log requests; the check below would be vacuous:\n%s", simLog)
	}
	assertNoKey(t, "simulator log", simLog)
	if strings.Contains(simLog, "LEAKCHECK") || strings.Contains(simLog, "sk-some-other-key") {
		t.Errorf("simulator log shows a presented credential:\n%s", simLog)
	}
}

func TestErrorBodyIsBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, strings.Repeat("x", 1<<20))
	}))
	defer srv.Close()
	c, err := paidvendor.NewHTTPClient(srv.URL, testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Charges(context.Background())
	he, ok := err.(*paidvendor.HTTPError)
	if !ok || len(he.Body) > paidvendor.MaxErrorBody || !he.Temporary() {
		t.Fatalf("err = %T %d bytes", err, len(fmt.Sprint(err)))
	}
}
