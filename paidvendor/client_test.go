package paidvendor_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"allot"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
)

func TestRoundTripSubmitTaskResult(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{PricePerKind: map[string]paidvendor.Cost{"render": {Amount: 1234, Currency: "USD"}}})
	ctx := context.Background()
	key := allot.IdempotencyKey("weekly-video", "2026-W32-0", "render", 0)

	task, err := tv.client.Submit(ctx, submitReq(key))
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if err := paidvendor.ValidateTaskID(task.ID); err != nil {
		t.Fatalf("task id: %v", err)
	}
	if task.IdempotencyKey != key || task.Kind != "render" {
		t.Errorf("task = %+v, want key %s kind render", task, key)
	}
	if task.Cost != (paidvendor.Cost{Amount: 1234, Currency: "USD"}) {
		t.Errorf("cost = %+v, want 1234 USD", task.Cost)
	}

	got, err := tv.client.Task(ctx, task.ID)
	if err != nil {
		t.Fatalf("Task: %v", err)
	}
	if got.Status != paidvendor.StatusSucceeded || got.SHA256 == "" {
		t.Fatalf("Task = %+v, want succeeded with sha256", got)
	}
	if want := paidvendortest.ResultSHA256(task.ID, "render", submitReq(key).Params); got.SHA256 != want {
		t.Errorf("sha256 = %s, want %s", got.SHA256, want)
	}

	rc, err := tv.client.Result(ctx, task.ID)
	if err != nil {
		t.Fatalf("Result: %v", err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatalf("reading result: %v", err)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != got.SHA256 {
		t.Fatalf("result bytes hash %x, task says %s", sum, got.SHA256)
	}
	if !strings.Contains(string(data), task.ID) {
		t.Errorf("result does not mention its task: %q", data)
	}

	charges, err := tv.client.Charges(ctx)
	if err != nil {
		t.Fatalf("Charges: %v", err)
	}
	if len(charges) != 1 || charges[0].TaskID != task.ID || charges[0].IdempotencyKey != key ||
		charges[0].Amount != 1234 || charges[0].Currency != "USD" || charges[0].At.IsZero() {
		t.Fatalf("charges over HTTP = %+v", charges)
	}
	if simCharges := tv.sim.Charges(); len(simCharges) != 1 || !simCharges[0].At.Equal(charges[0].At) {
		t.Fatalf("sim charges = %+v, HTTP charges = %+v", simCharges, charges)
	}
}

func TestTaskProgressesOverDuration(t *testing.T) {
	clock := newFakeClock()
	tv := newTestVendor(t, paidvendortest.SimConfig{TaskDuration: 4 * time.Minute, Clock: clock.Now})
	ctx := context.Background()
	task, err := tv.client.Submit(ctx, submitReq(allot.IdempotencyKey("p", "2026-W32-0", "render", 0)))
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != paidvendor.StatusQueued {
		t.Errorf("status at submit = %s, want queued", task.Status)
	}
	if _, err := tv.client.Result(ctx, task.ID); !errors.Is(err, paidvendor.ErrNoResult) {
		t.Fatalf("Result of a queued task: err = %v, want ErrNoResult", err)
	}
	for _, step := range []struct {
		advance time.Duration
		want    paidvendor.Status
	}{{30 * time.Second, paidvendor.StatusQueued}, {time.Minute, paidvendor.StatusRunning}, {2 * time.Minute, paidvendor.StatusRunning}, {30 * time.Second, paidvendor.StatusSucceeded}} {
		clock.Advance(step.advance)
		got, err := tv.client.Task(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != step.want {
			t.Fatalf("after +%v: status %s, want %s", step.advance, got.Status, step.want)
		}
		if (got.SHA256 != "") != (step.want == paidvendor.StatusSucceeded) {
			t.Fatalf("status %s with sha256 %q", got.Status, got.SHA256)
		}
	}
	rc, err := tv.client.Result(ctx, task.ID)
	if err != nil {
		t.Fatalf("Result after success: %v", err)
	}
	rc.Close()
}

func TestSimulatedTaskFailure(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{})
	ctx := context.Background()
	req := paidvendor.SubmitRequest{IdempotencyKey: allot.IdempotencyKey("p", "e", "s", 0), Kind: "render", Params: map[string]string{paidvendortest.FailParam: "model overloaded"}}
	task, err := tv.client.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tv.client.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != paidvendor.StatusFailed || got.Error != "model overloaded" || got.SHA256 != "" {
		t.Fatalf("task = %+v, want failed with the reason", got)
	}
	if _, err := tv.client.Result(ctx, task.ID); !errors.Is(err, paidvendor.ErrNoResult) {
		t.Fatalf("Result of a failed task: %v, want ErrNoResult", err)
	}
}

func TestSameIdempotencyKeyTwiceOneTaskOneCharge(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{})
	ctx := context.Background()
	key := allot.IdempotencyKey("weekly-video", "2026-W32-1", "voice", 2)
	first, err := tv.client.Submit(ctx, submitReq(key))
	if err != nil {
		t.Fatal(err)
	}
	second, err := tv.client.Submit(ctx, submitReq(key))
	if err != nil {
		t.Fatal(err)
	}
	if first.ID != second.ID {
		t.Fatalf("same key gave tasks %s and %s", first.ID, second.ID)
	}
	if n := tv.sim.ChargeCount(); n != 1 {
		t.Fatalf("charges = %d, want 1", n)
	}
}

func TestConcurrentSameKeyOneCharge(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{})
	key := allot.IdempotencyKey("weekly-video", "2026-W32-2", "render", 0)
	var wg sync.WaitGroup
	ids := make([]string, 16)
	errs := make([]error, 16)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task, err := tv.client.Submit(context.Background(), submitReq(key))
			ids[i], errs[i] = task.ID, err
		}()
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil {
			t.Fatalf("submit %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("submit %d got task %s, submit 0 got %s", i, ids[i], ids[0])
		}
	}
	if n := tv.sim.ChargeCount(); n != 1 {
		t.Fatalf("charges = %d, want 1", n)
	}
}

func TestIdempotencyKeyReusedForDifferentRequest(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{})
	ctx := context.Background()
	key := allot.IdempotencyKey("p", "e", "s", 0)
	if _, err := tv.client.Submit(ctx, submitReq(key)); err != nil {
		t.Fatal(err)
	}
	other := submitReq(key)
	other.Params = map[string]string{"episode": "something else"}
	_, err := tv.client.Submit(ctx, other)
	if !errors.Is(err, paidvendor.ErrIdempotencyConflict) || isTemporary(err) {
		t.Fatalf("err = %v, want non-temporary ErrIdempotencyConflict", err)
	}
	if n := tv.sim.ChargeCount(); n != 1 {
		t.Fatalf("charges = %d, want 1", n)
	}
}

func TestIgnoreIdempotencyChargesTwice(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{IgnoreIdempotency: true})
	ctx := context.Background()
	key := allot.IdempotencyKey("p", "e", "s", 0)
	a, err := tv.client.Submit(ctx, submitReq(key))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tv.client.Submit(ctx, submitReq(key))
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID {
		t.Fatalf("a vendor ignoring idempotency returned the same task twice")
	}
	if n := tv.sim.ChargeCount(); n != 2 {
		t.Fatalf("charges = %d, want 2", n)
	}
}

func TestLostResponseAfterAccept(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{LoseResponseAfterAccept: 1})
	ctx := context.Background()
	key := allot.IdempotencyKey("weekly-video", "2026-W32-0", "render", 0)

	_, err := tv.client.Submit(ctx, submitReq(key))
	if err == nil {
		t.Fatal("Submit succeeded; the simulator should have dropped the response")
	}
	var te *paidvendor.TransportError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v (%T), want a *TransportError", err, err)
	}
	var he *paidvendor.HTTPError
	if errors.As(err, &he) {
		t.Fatalf("err = %v is an HTTPError; the response never arrived", err)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		var opErr *net.OpError
		if !errors.As(err, &opErr) {
			t.Fatalf("err = %v: neither EOF nor a net error, so the cause is not classifiable", err)
		}
	}
	if !isTemporary(err) {
		t.Errorf("isTemporary(%v) = false, want true", err)
	}
	if n := tv.sim.ChargeCount(); n != 1 {
		t.Fatalf("charges = %d, want 1 (accepted before the response was lost)", n)
	}
	if n := tv.posts.Load(); n != 1 {
		t.Fatalf("the vendor saw %d submissions, want exactly 1", n)
	}

	found, err := tv.client.LookupByIdempotencyKey(ctx, key)
	if err != nil {
		t.Fatalf("LookupByIdempotencyKey: %v", err)
	}
	if found.IdempotencyKey != key || tv.sim.Charges()[0].TaskID != found.ID {
		t.Fatalf("lookup found %+v, charge is for %s", found, tv.sim.Charges()[0].TaskID)
	}
	if _, err := tv.client.Task(ctx, found.ID); err != nil {
		t.Fatalf("Task(%s): %v", found.ID, err)
	}

	if _, err := tv.client.LookupByIdempotencyKey(ctx, allot.IdempotencyKey("weekly-video", "2026-W32-0", "render", 1)); !errors.Is(err, paidvendor.ErrNotFound) {
		t.Fatalf("lookup of an unused key: %v, want ErrNotFound", err)
	}
}

// The standard library re-sends a request carrying an Idempotency-Key header
// when a kept-alive connection closes before the answer. The client must not
// let it: against a vendor that ignores idempotency that is a second charge
// nobody asked for, and in every case it hides the lost response.
func TestLostResponseIsNotResentOnReusedConnection(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{IgnoreIdempotency: true})
	ctx := context.Background()
	// Warm a keep-alive connection so the submit goes over a reused one.
	for range 2 {
		if _, err := tv.client.Charges(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := tv.sim.SetFaults(paidvendortest.SimFaults{IgnoreIdempotency: true, LoseResponseAfterAccept: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := tv.client.Submit(ctx, submitReq(allot.IdempotencyKey("p", "e", "s", 0)))
	if err == nil {
		t.Fatal("Submit succeeded; the response should have been lost")
	}
	if n := tv.posts.Load(); n != 1 {
		t.Fatalf("the vendor saw %d submissions for one Submit call, want 1", n)
	}
	if n := tv.sim.ChargeCount(); n != 1 {
		t.Fatalf("charges = %d, want 1", n)
	}
}

func TestNoLookup(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{NoLookup: true})
	_, err := tv.client.LookupByIdempotencyKey(context.Background(), allot.IdempotencyKey("p", "e", "s", 0))
	if !errors.Is(err, paidvendor.ErrLookupUnsupported) {
		t.Fatalf("err = %v, want ErrLookupUnsupported", err)
	}
	var he *paidvendor.HTTPError
	if !errors.As(err, &he) || he.StatusCode != 501 || he.Temporary() || isTemporary(err) {
		t.Fatalf("err = %#v, want a non-temporary HTTP 501", err)
	}
	if errors.Is(err, paidvendor.ErrNotFound) {
		t.Fatal("501 must not read as not found: the outcome is unknown, not absent")
	}
}

func TestFailBeforeAccept(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{FailBeforeAccept: 1})
	_, err := tv.client.Submit(context.Background(), submitReq(allot.IdempotencyKey("p", "e", "s", 0)))
	var he *paidvendor.HTTPError
	if !errors.As(err, &he) {
		t.Fatalf("err = %v (%T), want *HTTPError", err, err)
	}
	if he.StatusCode < 500 || !he.Temporary() || !isTemporary(err) {
		t.Fatalf("err = %v, want a temporary 5xx", err)
	}
	if n := tv.sim.ChargeCount(); n != 0 {
		t.Fatalf("charges = %d, want 0", n)
	}
	if n := tv.sim.TaskCount(); n != 0 {
		t.Fatalf("tasks = %d, want 0", n)
	}
}

func TestWrongAPIKey(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{})
	ctx := context.Background()
	bad := tv.newClient(t, "sk-wrong-key")
	_, err := bad.Submit(ctx, submitReq(allot.IdempotencyKey("p", "e", "s", 0)))
	if !errors.Is(err, paidvendor.ErrUnauthorized) {
		t.Fatalf("err = %v, want ErrUnauthorized", err)
	}
	if isTemporary(err) {
		t.Fatal("unauthorized must never be retried")
	}
	var he *paidvendor.HTTPError
	if !errors.As(err, &he) || he.StatusCode != http.StatusUnauthorized || he.Temporary() {
		t.Fatalf("err = %v, want non-temporary HTTP 401", err)
	}
	if n := tv.sim.ChargeCount(); n != 0 {
		t.Fatalf("charges = %d, want 0", n)
	}
	if _, err := bad.Charges(ctx); !errors.Is(err, paidvendor.ErrUnauthorized) {
		t.Fatalf("Charges with a bad key: %v, want ErrUnauthorized", err)
	}
	// No Authorization header at all.
	resp, err := http.Post(tv.srv.URL+"/v1/tasks", "application/json", strings.NewReader(`{"kind":"render","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || tv.sim.ChargeCount() != 0 {
		t.Fatalf("no key: status %d, charges %d; want 401 and 0", resp.StatusCode, tv.sim.ChargeCount())
	}
}

func TestForbiddenIsUnauthorized(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer srv.Close()
	c, err := paidvendor.NewHTTPClient(srv.URL, testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Charges(context.Background()); !errors.Is(err, paidvendor.ErrUnauthorized) {
		t.Fatalf("403: %v, want ErrUnauthorized", err)
	}
}

func TestBadTaskIDsRejectedBeforeAnyRequest(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{})
	ctx := context.Background()
	bad := []string{
		"",
		"vt_0123456789abcdef/result",
		"../v1/charges",
		"vt_0123456789abcdef?x=1",
		"vt_0123 456789abcdef",
		" vt_0123456789abcdef",
		"vt_0123456789abcdef\n",
		"task-0123456789abcdef",
		"0123456789abcdef",
		"vt_0123456789ABCDEF",
		"vt_0123",
		"vt_" + strings.Repeat("a", 65),
		"vt_0123456789abcdeg",
		"vt_0123456789abcdef#frag",
		"vt_%2e%2e",
		"vt_0123456789abcdéf",
	}
	for _, id := range bad {
		if _, err := tv.client.Task(ctx, id); !errors.Is(err, paidvendor.ErrInvalidTaskID) {
			t.Errorf("Task(%q): err = %v, want ErrInvalidTaskID", id, err)
		}
		if _, err := tv.client.Result(ctx, id); !errors.Is(err, paidvendor.ErrInvalidTaskID) {
			t.Errorf("Result(%q): err = %v, want ErrInvalidTaskID", id, err)
		} else if isTemporary(err) {
			t.Errorf("Result(%q): an invalid ID must not be retried", id)
		}
	}
	// Bad idempotency keys and kinds never leave the process either.
	for _, req := range []paidvendor.SubmitRequest{
		{IdempotencyKey: "", Kind: "render"},
		{IdempotencyKey: "not-a-uuid", Kind: "render"},
		{IdempotencyKey: strings.ToUpper(allot.IdempotencyKey("p", "e", "s", 0)), Kind: "render"},
		{IdempotencyKey: allot.IdempotencyKey("p", "e", "s", 0), Kind: ""},
	} {
		if _, err := tv.client.Submit(ctx, req); !errors.Is(err, paidvendor.ErrInvalidRequest) {
			t.Errorf("Submit(%+v): err = %v, want ErrInvalidRequest", req, err)
		}
	}
	if _, err := tv.client.LookupByIdempotencyKey(ctx, "x?y"); !errors.Is(err, paidvendor.ErrInvalidRequest) {
		t.Errorf("Lookup(bad key): err = %v, want ErrInvalidRequest", err)
	}
	if n := tv.requests.Load(); n != 0 {
		t.Fatalf("the server saw %d requests, want 0", n)
	}
	// A valid but unknown ID does reach the vendor, and is not found.
	if _, err := tv.client.Task(ctx, "vt_0123456789abcdef"); !errors.Is(err, paidvendor.ErrNotFound) {
		t.Fatalf("unknown task: %v, want ErrNotFound", err)
	}
}

func TestValidateTaskIDMessages(t *testing.T) {
	for id, want := range map[string]string{
		"":                      "empty",
		"a/b":                   "slash",
		"vt_ab?c":               "URL syntax",
		"vt_ab cd":              "space",
		"job_0123456789abcdef":  "does not start with vt_",
		"vt_zz23456789abcdef":   "hex",
		"vt_0123456789abcdef00": "",
	} {
		err := paidvendor.ValidateTaskID(id)
		if want == "" {
			if err != nil {
				t.Errorf("ValidateTaskID(%q) = %v, want nil", id, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateTaskID(%q) = %v, want a message with %q", id, err, want)
		}
	}
}

func TestContextErrorsStayClassifiable(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{Latency: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := tv.client.Charges(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded in the chain", err)
	}
	var te *paidvendor.TransportError
	if !errors.As(err, &te) || !isTemporary(err) {
		t.Fatalf("err = %v: want a temporary *TransportError", err)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	_, err = tv.client.Charges(ctx2)
	if !errors.Is(err, context.Canceled) || isTemporary(err) {
		t.Fatalf("err = %v: want context.Canceled, not temporary", err)
	}
}

func TestConnectionRefusedIsTransportError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := paidvendor.NewHTTPClient("http://"+addr, testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Submit(context.Background(), submitReq(allot.IdempotencyKey("p", "e", "s", 0)))
	var opErr *net.OpError
	if !errors.As(err, &opErr) || !isTemporary(err) {
		t.Fatalf("err = %v, want a temporary error wrapping *net.OpError", err)
	}
}

func TestHTTPErrorTemporary(t *testing.T) {
	for code, want := range map[int]bool{
		400: false, 401: false, 403: false, 404: false, 409: false, 422: false,
		429: true, 500: true, 501: false, 502: true, 503: true, 504: true,
	} {
		if got := (&paidvendor.HTTPError{StatusCode: code}).Temporary(); got != want {
			t.Errorf("HTTP %d Temporary() = %v, want %v", code, got, want)
		}
	}
}

func TestMalformedResponses(t *testing.T) {
	for name, body := range map[string]string{
		"not json":         `<html>`,
		"foreign id":       `{"id":"12345","status":"queued"}`,
		"unknown status":   `{"id":"vt_0123456789abcdef","status":"done"}`,
		"success, no hash": `{"id":"vt_0123456789abcdef","status":"succeeded"}`,
		"bad hash":         `{"id":"vt_0123456789abcdef","status":"succeeded","sha256":"xyz"}`,
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, body)
			}))
			defer srv.Close()
			c, err := paidvendor.NewHTTPClient(srv.URL, testKey, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Task(context.Background(), "vt_0123456789abcdef"); !errors.Is(err, paidvendor.ErrBadResponse) || isTemporary(err) {
				t.Fatalf("err = %v, want non-temporary ErrBadResponse", err)
			}
		})
	}
}

func TestNoRedirectsFollowed(t *testing.T) {
	var other atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.Add(1)
	}))
	defer target.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/v1/charges", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	c, err := paidvendor.NewHTTPClient(srv.URL, testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Charges(context.Background())
	var he *paidvendor.HTTPError
	if !errors.As(err, &he) || he.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("err = %v, want HTTPError 307", err)
	}
	if other.Load() != 0 {
		t.Fatal("the client followed a redirect with the Authorization header")
	}
}

func TestNewHTTPClientValidation(t *testing.T) {
	for _, base := range []string{"", "127.0.0.1:8787", "ftp://h/", "http://", "http://u:secretpw@h/", "http://h/?a=b", "http://h/#f", "http://h/%zz"} {
		_, err := paidvendor.NewHTTPClient(base, testKey, nil)
		if err == nil {
			t.Errorf("NewHTTPClient(%q) accepted", base)
			continue
		}
		if strings.Contains(err.Error(), "secretpw") {
			t.Errorf("NewHTTPClient(%q) error shows the URL password: %v", base, err)
		}
	}
	for _, key := range []string{"", "has space", "new\nline", "tab\t", "ünï"} {
		if _, err := paidvendor.NewHTTPClient("http://127.0.0.1:8787", key, nil); err == nil {
			t.Errorf("NewHTTPClient accepted API key %q", key)
		}
	}
	c, err := paidvendor.NewHTTPClient("https://vendor.example/api/", testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseURL() != "https://vendor.example/api" {
		t.Fatalf("BaseURL = %q", c.BaseURL())
	}
}

func TestBasePathPrefix(t *testing.T) {
	sim := paidvendortest.NewSimulator(paidvendortest.SimConfig{APIKey: testKey})
	mux := http.NewServeMux()
	mux.Handle("/vendor/", http.StripPrefix("/vendor", sim))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := paidvendor.NewHTTPClient(srv.URL+"/vendor/", testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Submit(context.Background(), submitReq(allot.IdempotencyKey("p", "e", "s", 0)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Task(context.Background(), task.ID); err != nil {
		t.Fatal(err)
	}
}
