package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"allot"
)

// DriftGauge is the unacknowledged drift items of one vendor, class and
// currency, and the money they put at stake in minor units of Currency.
type DriftGauge struct {
	Vendor, Class, Currency string
	Count                   int
	Amount                  int64
}

// BillGauge is whether allot reconciles a vendor's bill, and when it last
// read it.
type BillGauge struct {
	Vendor     string
	Reconciled bool
	LastRead   time.Time // zero LastRead: never read
}

var (
	driftItemsDesc = prometheus.NewDesc("allot_vendor_drift_items",
		"Unacknowledged drift items between a vendor's bill and the ledger, per vendor and class (starter drift list); 0 for each class of a vendor whose bill allot reconciles.",
		[]string{"vendor", "class"}, nil)
	driftAmountDesc = prometheus.NewDesc("allot_vendor_drift_minor_units",
		"The money the unacknowledged drift items put at stake, per vendor, class and currency, in minor units of the currency.",
		[]string{"vendor", "class", "currency"}, nil)
	billReconciledDesc = prometheus.NewDesc("allot_vendor_bill_reconciled",
		"1 when allot reconciles the vendor's bill, 0 when it cannot read it: its costs are then not reconciled, never fine.",
		[]string{"vendor"}, nil)
	billLastReadDesc = prometheus.NewDesc("allot_vendor_bill_last_read_timestamp_seconds",
		"When the vendor's bill was last read successfully (Unix seconds); absent when it never was.",
		[]string{"vendor"}, nil)
)

// driftKey is one series of allot_vendor_drift_minor_units.
type driftKey struct{ vendor, class, currency string }

// classKey is one series of allot_vendor_drift_items.
type classKey struct{ vendor, class string }

// billGauges reads the drift items and the vendors' bills from the ledger
// when scraped; either reader may be unset.
type billGauges struct {
	drift  func(ctx context.Context) ([]DriftGauge, error)
	bills  func(ctx context.Context) ([]BillGauge, error)
	logger *slog.Logger
}

func (g *billGauges) Describe(ch chan<- *prometheus.Desc) {
	if g.drift != nil {
		ch <- driftItemsDesc
		ch <- driftAmountDesc
	}
	if g.bills != nil {
		ch <- billReconciledDesc
		ch <- billLastReadDesc
	}
}

func (g *billGauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var bills []BillGauge
	if g.bills != nil {
		var err error
		if bills, err = g.bills(ctx); err != nil {
			g.fail(ch, "read vendor bills", err, billReconciledDesc, billLastReadDesc)
			bills = nil
		}
		for _, b := range bills {
			ch <- prometheus.MustNewConstMetric(billReconciledDesc, prometheus.GaugeValue, boolValue(b.Reconciled), b.Vendor)
			if !b.LastRead.IsZero() {
				ch <- prometheus.MustNewConstMetric(billLastReadDesc, prometheus.GaugeValue, float64(b.LastRead.UnixNano())/1e9, b.Vendor)
			}
		}
	}
	if g.drift == nil {
		return
	}
	rows, err := g.drift(ctx)
	if err != nil {
		g.fail(ch, "read drift items", err, driftItemsDesc, driftAmountDesc)
		return
	}
	counts := map[classKey]int{}
	// Only a vendor whose bill allot reads gets 0 for a class without
	// items: for one it cannot read, "no drift" is not known, and an
	// absent series says so.
	for _, b := range bills {
		if b.Reconciled {
			for _, c := range allot.DriftClasses {
				counts[classKey{b.Vendor, string(c)}] += 0
			}
		}
	}
	amounts := map[driftKey]int64{}
	for _, r := range rows {
		counts[classKey{r.Vendor, r.Class}] += r.Count
		k := driftKey{r.Vendor, r.Class, r.Currency}
		// Rows of one series add up; a sum out of range is the ledger's
		// error, not a number to show.
		sum, err := allot.AddAmount(amounts[k], r.Amount)
		if err != nil {
			g.fail(ch, "sum drift amounts", allot.Errorf(allot.InvalidInput, "drift of vendor %s, class %s: %v (acknowledge the items with starter drift ack and fix the ledger's amounts)", r.Vendor, r.Class, err), driftItemsDesc, driftAmountDesc)
			return
		}
		amounts[k] = sum
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(driftItemsDesc, prometheus.GaugeValue, float64(n), k.vendor, k.class)
	}
	for k, a := range amounts {
		ch <- prometheus.MustNewConstMetric(driftAmountDesc, prometheus.GaugeValue, float64(a), k.vendor, k.class, k.currency)
	}
}

// fail makes the scrape fail with err for descs, as the other ledger gauges
// do: a gauge that cannot be read must not look like 0.
func (g *billGauges) fail(ch chan<- prometheus.Metric, what string, err error, descs ...*prometheus.Desc) {
	if g.logger != nil {
		g.logger.Warn(what, "error", err)
	}
	for _, d := range descs {
		ch <- prometheus.NewInvalidMetric(d, err)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
