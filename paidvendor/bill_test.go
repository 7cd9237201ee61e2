package paidvendor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"allot"
	"allot/paidvendor"
	"allot/paidvendor/paidvendortest"
	"allot/paidvendor/vendorapi"
)

func TestReadBillOverHTTP(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{})
	ctx := context.Background()
	for i := range 5 {
		if _, err := tv.client.Submit(ctx, submitReq(allot.IdempotencyKey("weekly-video", fmt.Sprintf("2026-W32-%d", i), "render", 0))); err != nil {
			t.Fatal(err)
		}
	}
	var reader paidvendor.BillReader = tv.client

	var (
		lines []paidvendor.Charge
		in    paidvendor.ReadBillInput
		pages int
	)
	for {
		in.Limit = 2
		page, err := reader.ReadBill(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Lines) == 0 || len(page.Lines) > 2 || page.Next == in.After {
			t.Fatalf("page %d after %q: %+v", pages, in.After, page)
		}
		lines = append(lines, page.Lines...)
		in.After = page.Next
		if !page.HasMore {
			break
		}
	}
	if pages != 3 || !reflect.DeepEqual(lines, tv.sim.Charges()) {
		t.Fatalf("%d pages of\n%+v\nwant 3 of the simulator's bill\n%+v", pages, lines, tv.sim.Charges())
	}
	all, err := tv.client.Charges(ctx)
	if err != nil || !reflect.DeepEqual(all, lines) {
		t.Fatalf("Charges = %+v, %v; want the same lines as the pages", all, err)
	}

	// At the watermark nothing is new, and the watermark stays.
	page, err := reader.ReadBill(ctx, in)
	if err != nil || len(page.Lines) != 0 || page.Next != in.After || page.HasMore {
		t.Fatalf("at the watermark %q: %+v, %v", in.After, page, err)
	}
	refundID, err := tv.sim.Refund(lines[0].TaskID, 50)
	if err != nil {
		t.Fatal(err)
	}
	page, err = reader.ReadBill(ctx, in)
	if err != nil || len(page.Lines) != 1 || page.Lines[0].ID != refundID || !page.Lines[0].Refund || page.Lines[0].Amount != 50 {
		t.Fatalf("after a refund: %+v, %v", page, err)
	}

	if _, err := reader.ReadBill(ctx, paidvendor.ReadBillInput{Limit: -1}); !errors.Is(err, paidvendor.ErrInvalidRequest) {
		t.Fatalf("a negative limit: %v, want ErrInvalidRequest", err)
	}
	var he *paidvendor.HTTPError
	if _, err := reader.ReadBill(ctx, paidvendor.ReadBillInput{After: "no-such-cursor"}); !errors.As(err, &he) || he.StatusCode != http.StatusBadRequest || !strings.Contains(he.Body, vendorapi.CodeBadCursor) {
		t.Fatalf("a cursor the vendor never gave: %v, want HTTP 400 %s", err, vendorapi.CodeBadCursor)
	}
}

// TestChargesReadsEveryPage: the whole bill, over more than one page of
// the largest size.
func TestChargesReadsEveryPage(t *testing.T) {
	tv := newTestVendor(t, paidvendortest.SimConfig{})
	for range 2*vendorapi.MaxChargesLimit + 1 {
		tv.sim.PlantPhantomCharge(3, "USD")
	}
	got, err := tv.client.Charges(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tv.sim.Charges()) || len(got) != 2*vendorapi.MaxChargesLimit+1 {
		t.Fatalf("Charges gave %d lines, want the simulator's %d in order", len(got), tv.sim.ChargeCount())
	}
}

// pageVendor answers GET /v1/charges with the pages handed to it, one per
// request, from the first again once they run out.
func pageVendor(t *testing.T, pages ...string) (*paidvendor.HTTPClient, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)-1) % len(pages)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(pages[i]))
	}))
	t.Cleanup(srv.Close)
	c, err := paidvendor.NewHTTPClient(srv.URL, testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, &n
}

const goodLine = `{"id":"L1","task_id":"vt_0123456789abcdef","idempotency_key":"k","amount":250,"currency":"USD","at":"2026-08-07T09:00:00Z"}`

func TestBadBillPagesAreBadResponses(t *testing.T) {
	const (
		readBill = 1 << iota // ReadBill of the first page is ErrBadResponse
		charges              // Charges is ErrBadResponse
	)
	for name, tc := range map[string]struct {
		pages []string
		limit int
		bad   int
	}{
		"a line without an ID":     {[]string{`{"charges":[{"task_id":"vt_0123456789abcdef","amount":250,"currency":"USD"}],"next_cursor":"1"}`}, 0, readBill | charges},
		"a line ID with a space":   {[]string{`{"charges":[{"id":"L 1","task_id":"vt_0123456789abcdef","amount":250,"currency":"USD"}],"next_cursor":"1"}`}, 0, readBill | charges},
		"a line of no task":        {[]string{`{"charges":[{"id":"L1","task_id":"","amount":250,"currency":"USD"}],"next_cursor":"1"}`}, 0, readBill | charges},
		"a negative amount":        {[]string{`{"charges":[{"id":"L1","task_id":"vt_0123456789abcdef","amount":-250,"currency":"USD"}],"next_cursor":"1"}`}, 0, readBill | charges},
		"the bare list of old":     {[]string{`[` + goodLine + `]`}, 0, readBill | charges},
		"lines and no cursor":      {[]string{`{"charges":[` + goodLine + `],"next_cursor":""}`}, 0, readBill | charges},
		"no lines, a cursor moved": {[]string{`{"charges":[],"next_cursor":"9"}`}, 0, readBill | charges},
		"no lines but more":        {[]string{`{"charges":[],"next_cursor":"","has_more":true}`}, 0, readBill | charges},
		// The first page is fine; the next one does not move on.
		"the same cursor again": {[]string{`{"charges":[` + goodLine + `],"next_cursor":"1","has_more":true}`}, 0, charges},
		"cursors that go round": {[]string{
			`{"charges":[` + goodLine + `],"next_cursor":"1","has_more":true}`,
			`{"charges":[` + goodLine + `],"next_cursor":"2","has_more":true}`,
		}, 0, charges},
		"more lines than asked for": {[]string{`{"charges":[` + goodLine + `,` + goodLine + `,` + goodLine + `],"next_cursor":"1"}`}, 2, readBill},
	} {
		t.Run(name, func(t *testing.T) {
			// Bounds a reader that never stops, which would fail the test
			// with a timeout instead of ErrBadResponse.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, _ := pageVendor(t, tc.pages...)
			if _, err := c.ReadBill(ctx, paidvendor.ReadBillInput{Limit: tc.limit}); errors.Is(err, paidvendor.ErrBadResponse) != (tc.bad&readBill != 0) {
				t.Fatalf("ReadBill: %v, want ErrBadResponse: %v", err, tc.bad&readBill != 0)
			}
			c, requests := pageVendor(t, tc.pages...)
			if _, err := c.Charges(ctx); errors.Is(err, paidvendor.ErrBadResponse) != (tc.bad&charges != 0) {
				t.Fatalf("Charges: %v, want ErrBadResponse: %v", err, tc.bad&charges != 0)
			}
			if n := requests.Load(); n > int64(len(tc.pages))+1 {
				t.Fatalf("Charges asked %d times for %d pages", n, len(tc.pages))
			}
		})
	}
}

// TestBillLinesNeverHoldTheAPIKey: a vendor that echoes the key in its
// bill's lines and cursor gets it back redacted.
func TestBillLinesNeverHoldTheAPIKey(t *testing.T) {
	page := vendorapi.ChargesPage{Charges: []vendorapi.Charge{{
		ID: "L-" + testKey, TaskID: "vt_0123456789abcdef", IdempotencyKey: "key=" + testKey, Amount: 250, Currency: testKey, At: time.Now(),
	}}, NextCursor: "1"}
	body, err := json.Marshal(page)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := pageVendor(t, string(body))
	got, err := c.ReadBill(context.Background(), paidvendor.ReadBillInput{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := c.Charges(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{fmt.Sprintf("%+v", got), fmt.Sprintf("%#v", all)} {
		assertNoKey(t, "a bill line", text)
	}
	if got.Lines[0].ID != "L-[REDACTED]" {
		t.Fatalf("line ID %q, want the key redacted in it", got.Lines[0].ID)
	}

	// A cursor is sent back as it came, so one with the key is refused.
	page.NextCursor = "c-" + testKey
	if body, err = json.Marshal(page); err != nil {
		t.Fatal(err)
	}
	c, _ = pageVendor(t, string(body))
	_, err = c.ReadBill(context.Background(), paidvendor.ReadBillInput{})
	if !errors.Is(err, paidvendor.ErrBadResponse) {
		t.Fatalf("a cursor holding the key: %v, want ErrBadResponse", err)
	}
	assertNoKey(t, "the error", err.Error())
}
