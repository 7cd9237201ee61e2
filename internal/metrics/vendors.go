package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// VendorGauge is one vendor's shared state as the ledger has it.
type VendorGauge struct {
	Vendor string
	// State is active, paused or tripped.
	State    string
	InFlight int
	Failures int
}

// VendorStates reads every vendor's state; vendors the worker knows and
// the ledger has nothing of are active.
type VendorStates func(ctx context.Context) ([]VendorGauge, error)

// VendorStateNames are the values of allot_vendor_state's state label.
var VendorStateNames = []string{"active", "paused", "tripped"}

var (
	vendorStateDesc = prometheus.NewDesc("allot_vendor_state",
		"1 for the state each vendor is in (active, paused by an operator, tripped by its breaker), 0 for the others; shared by every worker through the ledger.",
		[]string{"vendor", "state"}, nil)
	vendorInFlightDesc = prometheus.NewDesc("allot_vendor_in_flight",
		"Requests holding one of a vendor's max_in_flight slots now, across all workers.",
		[]string{"vendor"}, nil)
	vendorFailuresDesc = prometheus.NewDesc("allot_vendor_consecutive_failures",
		"A vendor's consecutive failures, which open its breaker at trip_after.",
		[]string{"vendor"}, nil)
)

// vendorGauge reads the vendors' state from the ledger when scraped.
type vendorGauge struct {
	read   VendorStates
	logger *slog.Logger
}

func (c *vendorGauge) Describe(ch chan<- *prometheus.Desc) {
	ch <- vendorStateDesc
	ch <- vendorInFlightDesc
	ch <- vendorFailuresDesc
}

func (c *vendorGauge) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	vs, err := c.read(ctx)
	if err != nil {
		if c.logger != nil {
			c.logger.Warn("read vendor states", "error", err)
		}
		ch <- prometheus.NewInvalidMetric(vendorStateDesc, err)
		return
	}
	for _, v := range vs {
		for _, s := range VendorStateNames {
			val := 0.0
			if s == v.State {
				val = 1
			}
			ch <- prometheus.MustNewConstMetric(vendorStateDesc, prometheus.GaugeValue, val, v.Vendor, s)
		}
		ch <- prometheus.MustNewConstMetric(vendorInFlightDesc, prometheus.GaugeValue, float64(v.InFlight), v.Vendor)
		ch <- prometheus.MustNewConstMetric(vendorFailuresDesc, prometheus.GaugeValue, float64(v.Failures), v.Vendor)
	}
}
