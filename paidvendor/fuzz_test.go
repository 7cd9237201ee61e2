package paidvendor_test

// Fuzz target for what a vendor sends back: any status code and any body,
// whole or cut off, or no response at all, for every call of HTTPClient.
// Seeds are in testdata/fuzz/<target>; `go test` runs them, .ci/fuzz
// explores further.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"allot"
	"allot/paidvendor"
)

// cannedVendor answers every request with one canned response, without a
// network: the client's own transport is the only thing left out.
type cannedVendor struct {
	status int
	body   []byte
	cut    int    // the body breaks off after this many bytes; -1: whole
	fail   string // non-empty: no response, the transport fails with this
}

type brokenBody struct{}

func (brokenBody) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func (v *cannedVendor) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	if v.fail != "" {
		return nil, errors.New(v.fail)
	}
	var body io.Reader = bytes.NewReader(v.body)
	if v.cut >= 0 {
		body = io.MultiReader(bytes.NewReader(v.body[:v.cut]), brokenBody{})
	}
	return &http.Response{
		StatusCode: v.status, Status: fmt.Sprintf("%d fuzz", v.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(body), ContentLength: -1, Request: req,
	}, nil
}

const (
	fuzzTaskID = "vt_0123456789abcdef"
	fuzzKind   = "render"
)

// FuzzHTTPClientResponse: whatever the vendor answers, the client does not
// panic; every error is an *HTTPError (a non-2xx answer, unwrapping to the
// sentinel its status means), a *TransportError (no usable response) or
// ErrBadResponse (a 2xx answer that does not follow the API), and nothing
// else; a successful call gives a task that follows the API (a valid ID
// and status, the sha256 of a succeeded task, the key and ID asked for);
// and no error ever shows the API key, or any part of it the vendor did not
// send itself.
func FuzzHTTPClientResponse(f *testing.F) {
	idemKey := allot.IdempotencyKey("weekly-video", "2026-W32-0", "video", 0)
	f.Fuzz(func(t *testing.T, op uint8, status uint16, body []byte, cut int16, fail bool) {
		v := &cannedVendor{status: 100 + int(status)%900, body: body, cut: -1}
		if cut >= 0 && int(cut) < len(body) {
			v.cut = int(cut)
		}
		if fail {
			v.fail = "proxy: " + string(body)
		}
		c, err := paidvendor.NewHTTPClient("https://vendor.example/api", testKey, &http.Client{Transport: v})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var (
			task    paidvendor.Task
			charges []paidvendor.Charge
			result  []byte
			readErr error
			ok2xx   = v.status == http.StatusOK
			name    string
		)
		switch op % 5 {
		case 0:
			name = "Submit"
			ok2xx = ok2xx || v.status == http.StatusCreated
			task, err = c.Submit(ctx, paidvendor.SubmitRequest{IdempotencyKey: idemKey, Kind: fuzzKind, Params: map[string]string{"resolution": "1080p"}})
		case 1:
			name = "Task"
			task, err = c.Task(ctx, fuzzTaskID)
		case 2:
			name = "LookupByIdempotencyKey"
			task, err = c.LookupByIdempotencyKey(ctx, idemKey)
		case 3:
			name = "Result"
			var rc io.ReadCloser
			if rc, err = c.Result(ctx, fuzzTaskID); err == nil {
				result, readErr = io.ReadAll(rc)
				_ = rc.Close()
			}
		case 4:
			// The fifth call is two, by the rest of op: the seeds kept
			// their meaning when ReadBill came.
			if op/5%2 == 0 {
				name = "Charges"
				charges, err = c.Charges(ctx)
				break
			}
			name = "ReadBill"
			var page paidvendor.BillPage
			page, err = c.ReadBill(ctx, paidvendor.ReadBillInput{})
			charges = page.Lines
			if err == nil && (len(page.Lines) == 0) != (page.Next == "") {
				t.Fatalf("ReadBill from the start gave %d lines and the cursor %q", len(page.Lines), page.Next)
			}
		}
		decodes := name != "Result"

		// The API key: never whole, and no part of it the vendor did not
		// send itself (a cut must not leave its beginning behind).
		sent := strings.ReplaceAll(string(body), testKey, "")
		if err != nil {
			for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
				text := fmt.Sprintf(verb, err)
				for _, piece := range []string{testKey, testKey[:12], testKey[len(testKey)-12:]} {
					if strings.Contains(text, piece) && (piece == testKey || !strings.Contains(sent, piece)) {
						if len(text) > 300 {
							text = "..." + text[len(text)-300:]
						}
						t.Fatalf("%s error shows (part of) the API key: %s", name, text)
					}
				}
			}
		}

		var (
			he *paidvendor.HTTPError
			te *paidvendor.TransportError
		)
		isHTTP, isTransport, isBad := errors.As(err, &he), errors.As(err, &te), errors.Is(err, paidvendor.ErrBadResponse)
		switch {
		case err == nil:
			if fail || !ok2xx {
				t.Fatalf("%s succeeded on HTTP %d (transport failure %v)", name, v.status, fail)
			}
		case isHTTP && !isTransport && !isBad:
			if fail || ok2xx || he.StatusCode != v.status || len(he.Body) > paidvendor.MaxErrorBody {
				t.Fatalf("%s: HTTPError %d for HTTP %d (transport failure %v), body of %d bytes", name, he.StatusCode, v.status, fail, len(he.Body))
			}
			want := map[string]map[int]error{ // Charges and ReadBill: no sentinel
				"Submit":                 {409: paidvendor.ErrIdempotencyConflict},
				"Task":                   {404: paidvendor.ErrNotFound},
				"LookupByIdempotencyKey": {404: paidvendor.ErrNotFound, 501: paidvendor.ErrLookupUnsupported},
				"Result":                 {404: paidvendor.ErrNotFound, 409: paidvendor.ErrNoResult},
			}[name][v.status]
			if v.status == 401 || v.status == 403 {
				want = paidvendor.ErrUnauthorized
			}
			if got := errors.Unwrap(he); got != want {
				t.Fatalf("%s: HTTP %d unwraps to %v, want %v", name, v.status, got, want)
			}
		case isTransport && !isHTTP && !isBad:
			if !fail && !(ok2xx && decodes && v.cut >= 0) {
				t.Fatalf("%s: transport error on a whole HTTP %d answer: %v", name, v.status, err)
			}
		case isBad && !isHTTP && !isTransport:
			if fail || !ok2xx || !decodes {
				t.Fatalf("%s: malformed response on HTTP %d (transport failure %v): %v", name, v.status, fail, err)
			}
		default:
			t.Fatalf("%s: error %T is not exactly one of *HTTPError, *TransportError and ErrBadResponse (%v %v %v): %v", name, err, isHTTP, isTransport, isBad, err)
		}
		if err != nil {
			return
		}

		switch name {
		case "Result":
			if v.cut >= 0 {
				if readErr == nil {
					t.Fatalf("a result cut off after %d of %d bytes read without an error", v.cut, len(body))
				}
			} else if readErr != nil || !bytes.Equal(result, body) {
				t.Fatalf("result read as %d bytes, %v; the vendor sent %d", len(result), readErr, len(body))
			}
		case "Charges", "ReadBill":
			for _, ch := range charges {
				if err := paidvendor.ValidateTaskID(ch.TaskID); err != nil {
					t.Fatalf("a charge of an invalid task: %v", err)
				}
				if ch.ID == "" || ch.Amount < 0 {
					t.Fatalf("%s gave a line without an ID or with a negative amount: %+v", name, ch)
				}
			}
		default:
			if err := paidvendor.ValidateTaskID(task.ID); err != nil {
				t.Fatalf("%s gave a task with an invalid ID: %v", name, err)
			}
			if !task.Status.Valid() {
				t.Fatalf("%s gave a task with status %q", name, task.Status)
			}
			if task.SHA256 != "" && !sha256Hex(task.SHA256) || task.Status == paidvendor.StatusSucceeded && task.SHA256 == "" {
				t.Fatalf("%s gave a %s task with sha256 %q", name, task.Status, task.SHA256)
			}
			if task.Cost.Amount < 0 {
				t.Fatalf("%s gave a task costing %d", name, task.Cost.Amount)
			}
			switch name {
			case "Submit":
				if task.IdempotencyKey != idemKey || task.Kind == "" {
					t.Fatalf("Submit gave task %+v for key %s", task, idemKey)
				}
			case "Task":
				if task.ID != fuzzTaskID {
					t.Fatalf("Task(%s) gave task %s", fuzzTaskID, task.ID)
				}
			case "LookupByIdempotencyKey":
				if task.IdempotencyKey != idemKey {
					t.Fatalf("lookup of %s gave a task with key %q", idemKey, task.IdempotencyKey)
				}
			}
		}
	})
}

func sha256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
