package protocoltest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"

	"allot/paidvendor"
	"allot/paidvendor/vendorapi"
)

// InProcessClient is a Go vendor adapter: a paidvendor.Client a custom
// worker registers under a [[vendor]] with adapter = "go". It calls the
// vendor's handler in the same process (no network) and maps its answers
// as a Go adapter must: 401/403 is ErrUnauthorized, 404 ErrNotFound, 501
// on a look-up ErrLookupUnsupported, another 4xx a definite refusal
// (*paidvendor.HTTPError), and a 5xx or an answer that never came an
// unknown outcome.
type InProcessClient struct {
	h   http.Handler
	key string
}

var _ paidvendor.Client = (*InProcessClient)(nil)

// NewInProcessClient reaches h with apiKey.
func NewInProcessClient(h http.Handler, apiKey string) *InProcessClient {
	return &InProcessClient{h: h, key: apiKey}
}

// Factory is the adapter's paidvendor.Factory over h.
func Factory(h http.Handler) paidvendor.Factory {
	return func(apiKey string) (paidvendor.Submitter, error) { return NewInProcessClient(h, apiKey), nil }
}

// do serves one request. A handler that aborts (the simulator dropping a
// response after it accepted) is a transport error, as over a network.
func (c *InProcessClient) do(ctx context.Context, op, method, target string, body []byte, idempotencyKey string) (rec *httptest.ResponseRecorder, err error) {
	if err := ctx.Err(); err != nil {
		return nil, &paidvendor.TransportError{Op: op, Err: err}
	}
	req := httptest.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set(vendorapi.IdempotencyKeyHeader, idempotencyKey)
	}
	rec = httptest.NewRecorder()
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			rec, err = nil, &paidvendor.TransportError{Op: op, Err: io.ErrUnexpectedEOF}
		}
	}()
	c.h.ServeHTTP(rec, req)
	return rec, nil
}

func (c *InProcessClient) fail(op string, rec *httptest.ResponseRecorder, byStatus map[int]error) error {
	switch sentinel := byStatus[rec.Code]; {
	case rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden:
		return fmt.Errorf("%s: vendor answered %d: %w", op, rec.Code, paidvendor.ErrUnauthorized)
	case sentinel != nil:
		return fmt.Errorf("%s: vendor answered %d: %w", op, rec.Code, sentinel)
	}
	return &paidvendor.HTTPError{Op: op, StatusCode: rec.Code, Body: rec.Body.String()}
}

func (c *InProcessClient) task(op string, rec *httptest.ResponseRecorder) (paidvendor.Task, error) {
	var w vendorapi.Task
	if err := json.Unmarshal(rec.Body.Bytes(), &w); err != nil {
		return paidvendor.Task{}, fmt.Errorf("%s: %w: %v", op, paidvendor.ErrBadResponse, err)
	}
	at := paidvendor.ActivityTask{ID: w.ID, IdempotencyKey: w.IdempotencyKey, Kind: w.Kind, Status: paidvendor.Status(w.Status), SHA256: w.SHA256, Error: w.Error}
	if w.Cost != nil {
		at.Cost = &paidvendor.Cost{Amount: w.Cost.Amount, Currency: w.Cost.Currency}
	}
	t, err := at.Task()
	if err != nil {
		return paidvendor.Task{}, fmt.Errorf("%s: %w", op, err)
	}
	return t, nil
}

// Submit implements paidvendor.Submitter.
func (c *InProcessClient) Submit(ctx context.Context, req paidvendor.SubmitRequest) (paidvendor.Task, error) {
	const op = "submit"
	body, err := json.Marshal(vendorapi.SubmitRequest{Kind: req.Kind, Params: req.Params})
	if err != nil {
		return paidvendor.Task{}, fmt.Errorf("%s: %w: %v", op, paidvendor.ErrInvalidRequest, err)
	}
	rec, err := c.do(ctx, op, http.MethodPost, vendorapi.TasksPath, body, req.IdempotencyKey)
	if err != nil {
		return paidvendor.Task{}, err
	}
	if rec.Code != http.StatusOK && rec.Code != http.StatusCreated {
		return paidvendor.Task{}, c.fail(op, rec, map[int]error{http.StatusConflict: paidvendor.ErrIdempotencyConflict})
	}
	return c.task(op, rec)
}

// LookupByIdempotencyKey implements paidvendor.Submitter.
func (c *InProcessClient) LookupByIdempotencyKey(ctx context.Context, key string) (paidvendor.Task, error) {
	const op = "lookup"
	rec, err := c.do(ctx, op, http.MethodGet, vendorapi.TasksPath+"?"+url.Values{vendorapi.IdempotencyKeyParam: {key}}.Encode(), nil, "")
	if err != nil {
		return paidvendor.Task{}, err
	}
	if rec.Code != http.StatusOK {
		return paidvendor.Task{}, c.fail(op, rec, map[int]error{http.StatusNotFound: paidvendor.ErrNotFound, http.StatusNotImplemented: paidvendor.ErrLookupUnsupported})
	}
	return c.task(op, rec)
}

// Task implements paidvendor.Client.
func (c *InProcessClient) Task(ctx context.Context, id string) (paidvendor.Task, error) {
	const op = "get task"
	if err := paidvendor.ValidateTaskID(id); err != nil {
		return paidvendor.Task{}, err
	}
	rec, err := c.do(ctx, op, http.MethodGet, vendorapi.TaskPath(id), nil, "")
	if err != nil {
		return paidvendor.Task{}, err
	}
	if rec.Code != http.StatusOK {
		return paidvendor.Task{}, c.fail(op, rec, map[int]error{http.StatusNotFound: paidvendor.ErrNotFound})
	}
	return c.task(op, rec)
}

// Result implements paidvendor.Client.
func (c *InProcessClient) Result(ctx context.Context, id string) (io.ReadCloser, error) {
	const op = "get result"
	if err := paidvendor.ValidateTaskID(id); err != nil {
		return nil, err
	}
	rec, err := c.do(ctx, op, http.MethodGet, vendorapi.ResultPath(id), nil, "")
	if err != nil {
		return nil, err
	}
	if rec.Code != http.StatusOK {
		return nil, c.fail(op, rec, map[int]error{http.StatusNotFound: paidvendor.ErrNotFound, http.StatusConflict: paidvendor.ErrNoResult})
	}
	return io.NopCloser(bytes.NewReader(rec.Body.Bytes())), nil
}
