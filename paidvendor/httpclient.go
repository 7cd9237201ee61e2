package paidvendor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"allot/paidvendor/vendorapi"
)

// Response size limits: a task is small; a bill page holds at most
// vendorapi.MaxChargesLimit lines, each of a few hundred bytes.
const (
	maxTaskBody     = 1 << 20
	maxBillPageBody = 16 << 20
	maxErrorBody    = 4 << 10
)

// DefaultHTTPTimeout bounds each request when NewHTTPClient is given no
// *http.Client. Result downloads count too.
const DefaultHTTPTimeout = 60 * time.Second

// HTTPClient is a Client over the vendor's JSON API. It is safe for
// concurrent use. Formatting it with fmt or slog shows the base URL and never
// the API key.
type HTTPClient struct {
	base string // scheme://host[/prefix], no trailing slash
	key  secret
	hc   *http.Client
}

// secret holds the API key inside a closure. Reflection-based printing
// (fmt of an enclosing struct, with any verb, even a wrong one) shows a
// function address, never the captured value; the methods below cover
// direct printing.
type secret func() string

func newSecret(v string) secret { return func() string { return v } }

const redacted = "[REDACTED]"

func (secret) String() string                { return redacted }
func (secret) GoString() string              { return redacted }
func (secret) Format(f fmt.State, _ rune)    { _, _ = io.WriteString(f, redacted) }
func (secret) LogValue() slog.Value          { return slog.StringValue(redacted) }
func (secret) MarshalText() ([]byte, error)  { return []byte(redacted), nil }
func (s secret) redact(text string) string   { return redactSecret(text, s()) }
func (s secret) authorizationHeader() string { return "Bearer " + s() }

// redactTask and redactCharge take the key out of what a vendor sent
// before it is checked, quoted in an error (cut to a length that could
// leave part of the key) or kept (a task's error text goes to history).
func (s secret) redactTask(w vendorapi.Task) vendorapi.Task {
	for _, f := range []*string{&w.ID, &w.IdempotencyKey, &w.Kind, &w.Status, &w.SHA256, &w.Error} {
		*f = s.redact(*f)
	}
	if w.Cost != nil {
		cost := *w.Cost
		cost.Currency = s.redact(cost.Currency)
		w.Cost = &cost
	}
	return w
}

func (s secret) redactCharge(w vendorapi.Charge) vendorapi.Charge {
	w.ID, w.TaskID, w.IdempotencyKey, w.Currency = s.redact(w.ID), s.redact(w.TaskID), s.redact(w.IdempotencyKey), s.redact(w.Currency)
	return w
}

// trimSecretPrefix drops the end of a cut text that is the beginning of
// the secret.
func trimSecretPrefix(text, secret string) string {
	for n := min(len(secret)-1, len(text)); n > 0; n-- {
		if strings.HasSuffix(text, secret[:n]) {
			return text[:len(text)-n]
		}
	}
	return text
}

func redactSecret(text, secret string) string {
	if secret == "" {
		return text
	}
	return strings.ReplaceAll(text, secret, redacted)
}

var (
	_ Client     = (*HTTPClient)(nil)
	_ BillReader = (*HTTPClient)(nil)
)

// NewHTTPClient returns a client for the vendor API at baseURL (http or
// https, optionally with a path prefix; no credentials, query or fragment)
// authenticating with apiKey as a bearer token. httpClient may be nil (then
// a client with DefaultHTTPTimeout is used); the given client is copied, not
// changed, and the copy does not follow redirects, so the Authorization
// header never goes anywhere but baseURL.
func NewHTTPClient(baseURL string, apiKey string, httpClient *http.Client) (*HTTPClient, error) {
	base, err := parseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	if err := checkAPIKey(apiKey); err != nil {
		return nil, err
	}
	var hc http.Client
	if httpClient != nil {
		hc = *httpClient
	} else {
		hc.Timeout = DefaultHTTPTimeout
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &HTTPClient{base: base, key: newSecret(apiKey), hc: &hc}, nil
}

func parseBaseURL(raw string) (string, error) {
	if strings.TrimSpace(raw) == "" {
		return "", errors.New("paidvendor: vendor base URL is empty: give e.g. http://127.0.0.1:8787")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes the whole input, which may hold credentials: keep
		// only the reason.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("paidvendor: vendor base URL does not parse: %v", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("paidvendor: vendor base URL %s: scheme must be http or https", u.Redacted())
	case u.Host == "" || u.Opaque != "":
		return "", fmt.Errorf("paidvendor: vendor base URL %s has no host", u.Redacted())
	case u.User != nil:
		return "", fmt.Errorf("paidvendor: vendor base URL %s carries credentials: pass the API key separately", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", fmt.Errorf("paidvendor: vendor base URL %s must not have a query or fragment", u.Redacted())
	}
	return strings.TrimRight(u.String(), "/"), nil
}

func checkAPIKey(key string) error {
	if key == "" {
		return errors.New("paidvendor: vendor API key is empty")
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c >= 0x7f {
			// Never echo the key, not even a part of it.
			return fmt.Errorf("paidvendor: vendor API key has a space, control or non-ASCII byte at position %d: it cannot be sent in an HTTP header", i)
		}
	}
	return nil
}

// String describes the client without its API key.
func (c HTTPClient) String() string {
	return "paidvendor.HTTPClient{base: " + c.base + ", apiKey: " + redacted + "}"
}

// GoString is String: %#v must not show the API key either.
func (c HTTPClient) GoString() string { return c.String() }

// Format makes every fmt verb (%v, %+v, %#v, %s, %q, %x, ...) print String.
func (c HTTPClient) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// LogValue keeps the API key out of slog output.
func (c HTTPClient) LogValue() slog.Value {
	return slog.GroupValue(slog.String("base", c.base), slog.String("api_key", redacted))
}

// BaseURL returns the vendor base URL the client talks to.
func (c *HTTPClient) BaseURL() string { return c.base }

// Submit implements Client. The request is sent once: a lost response comes
// back as a *TransportError, never as a silent re-send.
func (c *HTTPClient) Submit(ctx context.Context, req SubmitRequest) (Task, error) {
	const op = "submit"
	if err := validateIdempotencyKey(req.IdempotencyKey); err != nil {
		return Task{}, fmt.Errorf("paidvendor: %s: %w", op, err)
	}
	if req.Kind == "" {
		return Task{}, fmt.Errorf("paidvendor: %s: %w: kind is empty", op, ErrInvalidRequest)
	}
	params := req.Params
	if params == nil {
		params = map[string]string{}
	}
	body, err := json.Marshal(vendorapi.SubmitRequest{Kind: req.Kind, Params: params})
	if err != nil {
		return Task{}, fmt.Errorf("paidvendor: %s: %w: %v", op, ErrInvalidRequest, err)
	}
	resp, err := c.do(ctx, op, http.MethodPost, vendorapi.TasksPath, nil, body, req.IdempotencyKey)
	if err != nil {
		return Task{}, err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return Task{}, c.httpError(op, resp, map[int]error{http.StatusConflict: ErrIdempotencyConflict})
	}
	var wt vendorapi.Task
	if err := c.decode(op, resp, maxTaskBody, &wt); err != nil {
		return Task{}, err
	}
	t, err := taskFromWire(c.key.redactTask(wt))
	if err != nil {
		return Task{}, fmt.Errorf("paidvendor: %s: %w", op, err)
	}
	if t.IdempotencyKey != "" && t.IdempotencyKey != req.IdempotencyKey {
		return Task{}, fmt.Errorf("paidvendor: %s: %w: task %s carries idempotency key %s, not the one sent", op, ErrBadResponse, t.ID, quoteForError(t.IdempotencyKey))
	}
	t.IdempotencyKey = req.IdempotencyKey
	if t.Kind == "" {
		t.Kind = req.Kind
	}
	return t, nil
}

// Task implements Client.
func (c *HTTPClient) Task(ctx context.Context, id string) (Task, error) {
	const op = "get task"
	if err := ValidateTaskID(id); err != nil {
		return Task{}, fmt.Errorf("paidvendor: %s: %w", op, err)
	}
	resp, err := c.do(ctx, op, http.MethodGet, vendorapi.TaskPath(id), nil, nil, "")
	if err != nil {
		return Task{}, err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return Task{}, c.httpError(op, resp, map[int]error{http.StatusNotFound: ErrNotFound})
	}
	var wt vendorapi.Task
	if err := c.decode(op, resp, maxTaskBody, &wt); err != nil {
		return Task{}, err
	}
	t, err := taskFromWire(c.key.redactTask(wt))
	if err != nil {
		return Task{}, fmt.Errorf("paidvendor: %s: %w", op, err)
	}
	if t.ID != id {
		return Task{}, fmt.Errorf("paidvendor: %s: %w: asked for task %s, got %s", op, ErrBadResponse, id, t.ID)
	}
	return t, nil
}

// LookupByIdempotencyKey implements Client.
func (c *HTTPClient) LookupByIdempotencyKey(ctx context.Context, key string) (Task, error) {
	const op = "lookup by idempotency key"
	if err := validateIdempotencyKey(key); err != nil {
		return Task{}, fmt.Errorf("paidvendor: %s: %w", op, err)
	}
	resp, err := c.do(ctx, op, http.MethodGet, vendorapi.TasksPath, url.Values{vendorapi.IdempotencyKeyParam: {key}}, nil, "")
	if err != nil {
		return Task{}, err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return Task{}, c.httpError(op, resp, map[int]error{
			http.StatusNotFound:       ErrNotFound,
			http.StatusNotImplemented: ErrLookupUnsupported,
		})
	}
	var wt vendorapi.Task
	if err := c.decode(op, resp, maxTaskBody, &wt); err != nil {
		return Task{}, err
	}
	t, err := taskFromWire(c.key.redactTask(wt))
	if err != nil {
		return Task{}, fmt.Errorf("paidvendor: %s: %w", op, err)
	}
	if t.IdempotencyKey != "" && t.IdempotencyKey != key {
		return Task{}, fmt.Errorf("paidvendor: %s: %w: task %s carries a different idempotency key", op, ErrBadResponse, t.ID)
	}
	t.IdempotencyKey = key
	return t, nil
}

// Result implements Client. Reading the returned body may still fail with a
// transport error; check the bytes against Task.SHA256.
func (c *HTTPClient) Result(ctx context.Context, id string) (io.ReadCloser, error) {
	const op = "get result"
	if err := ValidateTaskID(id); err != nil {
		return nil, fmt.Errorf("paidvendor: %s: %w", op, err)
	}
	resp, err := c.do(ctx, op, http.MethodGet, vendorapi.ResultPath(id), nil, nil, "")
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer drainClose(resp.Body)
		return nil, c.httpError(op, resp, map[int]error{
			http.StatusNotFound: ErrNotFound,
			http.StatusConflict: ErrNoResult,
		})
	}
	return resp.Body, nil
}

// Charges lists everything the vendor has billed, oldest first, reading
// the bill page by page from its start. It is not part of Client: the
// paid activities never need it, because the ledger, not the vendor's
// bill, decides what to pay for. It is for `starter check --vendor` and
// for tests that count what was charged; a reader that keeps a watermark
// uses ReadBill.
func (c *HTTPClient) Charges(ctx context.Context) ([]Charge, error) {
	const op = "list charges"
	var (
		out   []Charge
		after string
		// A vendor whose cursors go round in a circle would have this loop
		// read forever.
		seen = map[string]bool{}
	)
	for {
		page, err := c.readBill(ctx, op, ReadBillInput{After: after})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Lines...)
		if !page.HasMore {
			return out, nil
		}
		if seen[page.Next] {
			return nil, fmt.Errorf("paidvendor: %s: %w: the vendor gave cursor %s twice: its pages go round in a circle", op, ErrBadResponse, quoteForError(page.Next))
		}
		seen[page.Next] = true
		after = page.Next
	}
}

// ReadBill implements BillReader: one page of the vendor's bill after the
// watermark in.After (GET /v1/charges?after=...&limit=...). A page that
// could lose the reader its place (lines and no new cursor, no lines and
// another cursor, more to come and nothing given) is ErrBadResponse.
func (c *HTTPClient) ReadBill(ctx context.Context, in ReadBillInput) (BillPage, error) {
	return c.readBill(ctx, "read bill", in)
}

func (c *HTTPClient) readBill(ctx context.Context, op string, in ReadBillInput) (BillPage, error) {
	if in.Limit < 0 {
		return BillPage{}, fmt.Errorf("paidvendor: %s: %w: limit %d is negative: give 0 for the vendor's default", op, ErrInvalidRequest, in.Limit)
	}
	query := url.Values{}
	if in.After != "" {
		query.Set(vendorapi.AfterParam, in.After)
	}
	if in.Limit > 0 {
		query.Set(vendorapi.LimitParam, strconv.Itoa(in.Limit))
	}
	resp, err := c.do(ctx, op, http.MethodGet, vendorapi.ChargesPath, query, nil, "")
	if err != nil {
		return BillPage{}, err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return BillPage{}, c.httpError(op, resp, nil)
	}
	var wp vendorapi.ChargesPage
	if err := c.decode(op, resp, maxBillPageBody, &wp); err != nil {
		return BillPage{}, err
	}
	next := c.key.redact(wp.NextCursor)
	bad := func(format string, args ...any) (BillPage, error) {
		return BillPage{}, fmt.Errorf("paidvendor: %s: %w: "+format, append([]any{op, ErrBadResponse}, args...)...)
	}
	switch {
	case next != wp.NextCursor:
		// The reader keeps the cursor as its watermark; redacted, it would
		// no longer be the vendor's.
		return bad("the cursor holds the API key, and a reader would store it")
	case len(wp.Charges) == 0 && wp.NextCursor != in.After:
		return bad("a page with no lines moves the cursor from %s to %s", quoteForError(in.After), quoteForError(next))
	case len(wp.Charges) == 0 && wp.HasMore:
		return bad("a page with no lines says more follow")
	case len(wp.Charges) > 0 && (wp.NextCursor == "" || wp.NextCursor == in.After):
		return bad("a page of %d lines does not move the cursor past %s", len(wp.Charges), quoteForError(in.After))
	case in.Limit > 0 && len(wp.Charges) > in.Limit:
		return bad("a page of %d lines, over the limit of %d asked for", len(wp.Charges), in.Limit)
	}
	page := BillPage{Lines: make([]Charge, 0, len(wp.Charges)), Next: wp.NextCursor, HasMore: wp.HasMore, Account: wp.Account}
	for _, wc := range wp.Charges {
		ch, err := chargeFromWire(c.key.redactCharge(wc))
		if err != nil {
			return BillPage{}, fmt.Errorf("paidvendor: %s: %w", op, err)
		}
		page.Lines = append(page.Lines, ch)
	}
	return page, nil
}

// BillFaults lists the faults the simulated vendor planted in its bill
// (GET /v1/bill-faults), for a checker that compares them with the drift
// allot found. Like Stats it is the simulator's, not a real vendor's.
func (c *HTTPClient) BillFaults(ctx context.Context) ([]vendorapi.BillFault, error) {
	const op = "bill faults"
	resp, err := c.do(ctx, op, http.MethodGet, vendorapi.BillFaultsPath, nil, nil, "")
	if err != nil {
		return nil, err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, c.httpError(op, resp, nil)
	}
	var bf vendorapi.BillFaults
	if err := c.decode(op, resp, maxBillPageBody, &bf); err != nil {
		return nil, err
	}
	return bf.Faults, nil
}

// Stats is what the vendor reports it saw (GET /v1/stats; allot's
// simulated vendor serves it). Like Charges it is not part of Client: tests
// and the chaos run assert allot's shared limits with it.
func (c *HTTPClient) Stats(ctx context.Context) (vendorapi.Stats, error) {
	const op = "stats"
	resp, err := c.do(ctx, op, http.MethodGet, vendorapi.StatsPath, nil, nil, "")
	if err != nil {
		return vendorapi.Stats{}, err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return vendorapi.Stats{}, c.httpError(op, resp, nil)
	}
	var st vendorapi.Stats
	if err := c.decode(op, resp, maxTaskBody, &st); err != nil {
		return vendorapi.Stats{}, err
	}
	return st, nil
}

// do sends one request. Transport failures come back as *TransportError.
func (c *HTTPClient) do(ctx context.Context, op, method, path string, query url.Values, body []byte, idempotencyKey string) (*http.Response, error) {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("paidvendor: %s: building request: %w", op, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		// Without GetBody the transport cannot re-send the body, so it never
		// retries this request on its own. net/http otherwise treats a
		// request with an Idempotency-Key header as replayable and re-sends
		// it when a kept-alive connection closes before the response: a
		// second submission nobody decided on, and a lost response the
		// caller never hears of (invariant 7).
		req.GetBody = nil
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", c.key.authorizationHeader())
	if idempotencyKey != "" {
		req.Header.Set(vendorapi.IdempotencyKeyHeader, idempotencyKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &TransportError{Op: op, Err: scrubError(err, c.key)}
	}
	return resp, nil
}

// scrubError keeps err's chain for errors.Is/As but, in the unlikely case its
// text holds the API key, replaces the text.
func scrubError(err error, key secret) error {
	if msg := err.Error(); strings.Contains(msg, key()) {
		return &scrubbedError{msg: key.redact(msg), err: err}
	}
	return err
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// decode reads a JSON body. A read failure (cut connection) is a transport
// error; a body that does not parse is ErrBadResponse.
func (c *HTTPClient) decode(op string, resp *http.Response, limit int64, v any) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return &TransportError{Op: op, Err: scrubError(fmt.Errorf("reading response body: %w", err), c.key)}
	}
	if int64(len(data)) > limit {
		return fmt.Errorf("paidvendor: %s: %w: response body over %d bytes", op, ErrBadResponse, limit)
	}
	if err := json.Unmarshal(data, v); err != nil {
		// The decoder quotes values it cannot parse (a time, say), and a
		// vendor may echo the key in any of them.
		return fmt.Errorf("paidvendor: %s: %w: %s", op, ErrBadResponse, c.key.redact(err.Error()))
	}
	return nil
}

// httpError builds the *HTTPError for a non-2xx answer; 401 and 403 always
// map to ErrUnauthorized, other statuses through byStatus.
func (c *HTTPClient) httpError(op string, resp *http.Response, byStatus map[int]error) error {
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	body := c.key.redact(strings.ToValidUTF8(string(data), "?"))
	if readErr != nil || len(data) == maxErrorBody {
		// The body was cut (at the limit, or by a broken connection): a
		// key it echoes there must not leave its beginning behind.
		body = trimSecretPrefix(body, c.key())
	}
	e := &HTTPError{Op: op, StatusCode: resp.StatusCode, Body: body}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		e.sentinel = ErrUnauthorized
	default:
		e.sentinel = byStatus[resp.StatusCode]
	}
	return e
}

// drainClose reads a little of what is left so the connection can be reused.
func drainClose(rc io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(rc, 64<<10))
	_ = rc.Close()
}
