package metrics

import (
	"context"
	"errors"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A vendor whose bill allot reads exports every drift class, 0 when it has
// none; one it cannot read is "not reconciled" and gets no zeros, yet the
// items the ledger holds of it still show. Rows of one series add up.
func TestDriftAndBillGauges(t *testing.T) {
	lastRead := time.Date(2026, 12, 3, 21, 0, 0, 0, time.UTC)
	m := New(Gauges{
		Bills: func(context.Context) ([]BillGauge, error) {
			return []BillGauge{{Vendor: "video-gen", Reconciled: true, LastRead: lastRead}, {Vendor: "covers"}}, nil
		},
		Drift: func(context.Context) ([]DriftGauge, error) {
			return []DriftGauge{
				{Vendor: "video-gen", Class: "charged_unrecorded", Currency: "USD", Count: 2, Amount: 1500},
				{Vendor: "video-gen", Class: "amount_differs", Currency: "USD", Count: 1, Amount: 30},
				{Vendor: "video-gen", Class: "amount_differs", Currency: "USD", Count: 1, Amount: 12},
				{Vendor: "video-gen", Class: "amount_differs", Currency: "EUR", Count: 1, Amount: 20},
				{Vendor: "covers", Class: "refunded", Currency: "USD", Count: 1, Amount: 700},
			}, nil
		},
	}, nil)
	defer m.Close()
	body := scrape(t, m)
	for _, want := range []string{
		`allot_vendor_drift_items{class="charged_unrecorded",vendor="video-gen"} 2`,
		`allot_vendor_drift_items{class="amount_differs",vendor="video-gen"} 3`,
		`allot_vendor_drift_items{class="recorded_uncharged",vendor="video-gen"} 0`,
		`allot_vendor_drift_items{class="double_charge",vendor="video-gen"} 0`,
		`allot_vendor_drift_items{class="refunded",vendor="video-gen"} 0`,
		`allot_vendor_drift_items{class="refunded",vendor="covers"} 1`,
		`allot_vendor_drift_minor_units{class="charged_unrecorded",currency="USD",vendor="video-gen"} 1500`,
		`allot_vendor_drift_minor_units{class="amount_differs",currency="USD",vendor="video-gen"} 42`,
		`allot_vendor_drift_minor_units{class="amount_differs",currency="EUR",vendor="video-gen"} 20`,
		`allot_vendor_drift_minor_units{class="refunded",currency="USD",vendor="covers"} 700`,
		`allot_vendor_bill_reconciled{vendor="video-gen"} 1`,
		`allot_vendor_bill_reconciled{vendor="covers"} 0`,
		`allot_vendor_bill_last_read_timestamp_seconds{vendor="video-gen"} 1.7963316e+09`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, grep(body, "allot_vendor"))
		}
	}
	for _, absent := range []string{
		`allot_vendor_drift_items{class="charged_unrecorded",vendor="covers"}`,
		`allot_vendor_bill_last_read_timestamp_seconds{vendor="covers"}`,
	} {
		if strings.Contains(body, absent) {
			t.Errorf("metrics have %q, which nothing backs:\n%s", absent, grep(body, "allot_vendor"))
		}
	}
}

// A bill or drift reader that fails fails the scrape: "cannot read" must
// not look like "reconciled, no drift".
func TestBillAndDriftReadErrorsFailTheScrape(t *testing.T) {
	for name, g := range map[string]Gauges{
		"bills": {Bills: func(context.Context) ([]BillGauge, error) { return nil, errors.New("ledger is down") }},
		"drift": {Drift: func(context.Context) ([]DriftGauge, error) { return nil, errors.New("ledger is down") }},
	} {
		t.Run(name, func(t *testing.T) {
			m := New(g, nil)
			defer m.Close()
			rec := httptest.NewRecorder()
			m.HTTPHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			if rec.Code != 500 || !strings.Contains(rec.Body.String(), "ledger is down") {
				t.Fatalf("scrape with a failing %s reader: %d %s", name, rec.Code, rec.Body.String())
			}
		})
	}
}

// Drift amounts that add up beyond int64 fail the scrape instead of
// wrapping around to a small or negative sum.
func TestDriftAmountOverflowFailsTheScrape(t *testing.T) {
	m := New(Gauges{Drift: func(context.Context) ([]DriftGauge, error) {
		row := DriftGauge{Vendor: "video-gen", Class: "double_charge", Currency: "USD", Count: 1, Amount: math.MaxInt64}
		return []DriftGauge{row, row}, nil
	}}, nil)
	defer m.Close()
	rec := httptest.NewRecorder()
	m.HTTPHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "starter drift ack") {
		t.Fatalf("scrape with an overflowing drift sum: %d %s", rec.Code, rec.Body.String())
	}
}
