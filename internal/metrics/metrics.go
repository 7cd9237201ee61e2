// Package metrics serves the worker's Prometheus metrics: the Temporal SDK's
// own worker metrics and allot's counters (both through one Temporal metrics
// handler backed by a tally scope), and gauges read from the ledger at scrape
// time.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// Counts reads a count per pipeline from the ledger; pipelines with none may
// be absent.
type Counts func(ctx context.Context) (map[string]int, error)

// Gauges are the ledger's gauges, read on every scrape.
type Gauges struct {
	// Pipelines are the pipelines the worker knows: every gauge exports
	// each of them, 0 when the ledger has nothing to count, so that a
	// pipeline with none is told apart from one that is not watched.
	Pipelines []string
	// NeedingAttention feeds allot_episodes_needing_attention.
	NeedingAttention Counts
	// Stalled feeds allot_episodes_stalled: episodes whose step has been
	// retrying longer than their pipeline's stall_after.
	Stalled Counts
	// WaitingPausedVendor feeds allot_episodes_waiting_paused_vendor:
	// episodes whose step waits on a vendor an operator paused.
	WaitingPausedVendor Counts
	// Budgets feeds allot_budget_limit_minor_units,
	// allot_budget_settled_minor_units, allot_budget_reserved_minor_units,
	// allot_budget_held_for_schedule_minor_units and
	// allot_budget_free_minor_units.
	Budgets func(ctx context.Context) ([]Budget, error)
	// Vendors feeds allot_vendor_state, allot_vendor_in_flight and
	// allot_vendor_consecutive_failures (vendors.go).
	Vendors VendorStates
	// Drift feeds allot_vendor_drift_items and
	// allot_vendor_drift_minor_units: the unacknowledged drift items
	// (drift.go).
	Drift func(ctx context.Context) ([]DriftGauge, error)
	// Bills feeds allot_vendor_bill_reconciled and
	// allot_vendor_bill_last_read_timestamp_seconds, one row per vendor
	// with a bill; the vendors it reconciles get every drift class, 0 when
	// they have none.
	Bills func(ctx context.Context) ([]BillGauge, error)
	// Deadlines feeds allot_deadline_periods, allot_deadline_late_open and
	// allot_deadline_on_time_ratio (deadlines.go).
	Deadlines func(ctx context.Context) (Deadlines, error)
	// Forecasts feeds allot_budget_forecast_minor_units and
	// allot_budget_forecast_unbounded: each budget's current period
	// (forecast.go).
	Forecasts func(ctx context.Context) ([]Forecast, error)
}

// Budget is one budget period's amounts, in minor units of Currency.
type Budget struct {
	Budget, Period, Currency string
	Limit, Settled, Reserved int64
	// HeldForSchedule is what the period holds for its scheduled runs
	// still due (hold_scheduled); Free what is left after settled,
	// reserved and held, for manual runs, backfills and retries.
	HeldForSchedule, Free int64
	// Current says the period is the budget's current one by the clock
	// (allot_budget_period_current): the period before it is exported too,
	// for its final figures, and must not keep alerting once it is over.
	Current bool
}

// labelValues keeps label values as they are (a pipeline is "weekly-video",
// not "weekly_video"): Prometheus allows any UTF-8 in a label value, and
// only names and keys need the SDK's sanitizing.
var labelValues = tally.ValidCharacters{Ranges: []tally.SanitizeRange{{0, unicode.MaxRune}}}

// Metrics is one Prometheus registry for a worker.
type Metrics struct {
	registry *prometheus.Registry
	scope    io.Closer
	handler  client.MetricsHandler
}

// New builds the registry with the ledger's gauges (those whose reader is
// set).
func New(gauges Gauges, logger *slog.Logger) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer: reg,
		Gatherer:   reg,
		// A metric emitted with another label set must not crash the worker.
		OnRegisterError: func(err error) {
			if logger != nil {
				logger.Warn("metric not registered", "error", err)
			}
		},
	})
	sanitize := sdktally.PrometheusSanitizeOptions
	sanitize.ValueCharacters = labelValues
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       "_",
		SanitizeOptions: &sanitize,
	}, time.Second)
	if gauges.NeedingAttention != nil {
		reg.MustRegister(&ledgerGauge{desc: attentionDesc, what: "episodes needing attention", read: gauges.NeedingAttention, pipelines: gauges.Pipelines, logger: logger})
	}
	if gauges.Stalled != nil {
		reg.MustRegister(&ledgerGauge{desc: stalledDesc, what: "stalled episodes", read: gauges.Stalled, pipelines: gauges.Pipelines, logger: logger})
	}
	if gauges.WaitingPausedVendor != nil {
		reg.MustRegister(&ledgerGauge{desc: waitingPausedDesc, what: "episodes waiting on a paused vendor", read: gauges.WaitingPausedVendor, pipelines: gauges.Pipelines, logger: logger})
	}
	if gauges.Budgets != nil {
		reg.MustRegister(&budgetGauges{read: gauges.Budgets, logger: logger})
	}
	if gauges.Vendors != nil {
		reg.MustRegister(&vendorGauge{read: gauges.Vendors, logger: logger})
	}
	if gauges.Drift != nil || gauges.Bills != nil {
		reg.MustRegister(&billGauges{drift: gauges.Drift, bills: gauges.Bills, logger: logger})
	}
	if gauges.Deadlines != nil {
		reg.MustRegister(&deadlineGauges{read: gauges.Deadlines, logger: logger})
	}
	if gauges.Forecasts != nil {
		reg.MustRegister(&forecastGauges{read: gauges.Forecasts, logger: logger})
	}
	return &Metrics{
		registry: reg,
		scope:    closer,
		handler:  sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)),
	}
}

// Handler is the Temporal metrics handler for client.Options.MetricsHandler;
// activities reach it through activity.GetMetricsHandler.
func (m *Metrics) Handler() client.MetricsHandler { return m.handler }

// HTTPHandler serves the registry in the Prometheus text format.
func (m *Metrics) HTTPHandler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Close flushes and stops the tally scope.
func (m *Metrics) Close() error { return m.scope.Close() }

// Serve serves /metrics on addr until ctx ends. ready, if set, gets the
// address actually bound (useful with port 0).
func (m *Metrics) Serve(ctx context.Context, addr string, ready func(addr string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen on %s: %w (choose another --metrics-addr)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.HTTPHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

var (
	attentionDesc = prometheus.NewDesc("allot_episodes_needing_attention",
		"Episodes parked until an operator decides (unknown outcome, vendor failure, ...), per pipeline.",
		[]string{"pipeline"}, nil)
	stalledDesc = prometheus.NewDesc("allot_episodes_stalled",
		"Episodes whose step has been retrying for longer than the pipeline's stall_after, per pipeline.",
		[]string{"pipeline"}, nil)
	waitingPausedDesc = prometheus.NewDesc("allot_episodes_waiting_paused_vendor",
		"Episodes whose step waits because an operator paused its vendor (waiting_vendor, vendor_paused), per pipeline.",
		[]string{"pipeline"}, nil)
)

// ledgerGauge reads the ledger when scraped, so the gauge is the ledger's
// truth and survives worker restarts.
type ledgerGauge struct {
	desc      *prometheus.Desc
	what      string
	read      Counts
	pipelines []string
	logger    *slog.Logger
}

func (c *ledgerGauge) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *ledgerGauge) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.read(ctx)
	if err != nil {
		if c.logger != nil {
			c.logger.Warn("read "+c.what, "error", err)
		}
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, p := range c.pipelines {
		if _, ok := counts[p]; !ok {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 0, p)
		}
	}
	for pipeline, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), pipeline)
	}
}

var (
	budgetLimitDesc = prometheus.NewDesc("allot_budget_limit_minor_units",
		"A budget period's limit (the pipeline file's, or a raise), in minor units of its currency.",
		[]string{"budget", "period", "currency"}, nil)
	budgetSettledDesc = prometheus.NewDesc("allot_budget_settled_minor_units",
		"Costs recorded against a budget period, in minor units of its currency.",
		[]string{"budget", "period", "currency"}, nil)
	budgetReservedDesc = prometheus.NewDesc("allot_budget_reserved_minor_units",
		"Reservations a budget period holds for paid tasks not yet answered, in minor units of its currency.",
		[]string{"budget", "period", "currency"}, nil)
	budgetHeldDesc = prometheus.NewDesc("allot_budget_held_for_schedule_minor_units",
		"What a budget period holds for its scheduled runs still due (hold_scheduled), up to what its limit leaves: only those runs draw on it, in minor units of its currency.",
		[]string{"budget", "period", "currency"}, nil)
	budgetFreeDesc = prometheus.NewDesc("allot_budget_free_minor_units",
		"What a budget period's limit leaves after settled, reserved and held for its scheduled runs: what manual runs, backfills and retries may spend, in minor units of its currency (negative after an overrun).",
		[]string{"budget", "period", "currency"}, nil)
	budgetCurrentDesc = prometheus.NewDesc("allot_budget_period_current",
		"1 for a budget's current period by the clock (in its zone), 0 for another period exported for its figures or its reservations.",
		[]string{"budget", "period", "currency"}, nil)
)

// budgetGauges reads every exported budget period from the ledger when
// scraped.
type budgetGauges struct {
	read   func(ctx context.Context) ([]Budget, error)
	logger *slog.Logger
}

func (g *budgetGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- budgetLimitDesc
	ch <- budgetSettledDesc
	ch <- budgetReservedDesc
	ch <- budgetHeldDesc
	ch <- budgetFreeDesc
	ch <- budgetCurrentDesc
}

func (g *budgetGauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bs, err := g.read(ctx)
	if err != nil {
		if g.logger != nil {
			g.logger.Warn("read budgets", "error", err)
		}
		for _, d := range []*prometheus.Desc{budgetLimitDesc, budgetSettledDesc, budgetReservedDesc, budgetHeldDesc, budgetFreeDesc, budgetCurrentDesc} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
		return
	}
	for _, b := range bs {
		ch <- prometheus.MustNewConstMetric(budgetLimitDesc, prometheus.GaugeValue, float64(b.Limit), b.Budget, b.Period, b.Currency)
		ch <- prometheus.MustNewConstMetric(budgetSettledDesc, prometheus.GaugeValue, float64(b.Settled), b.Budget, b.Period, b.Currency)
		ch <- prometheus.MustNewConstMetric(budgetReservedDesc, prometheus.GaugeValue, float64(b.Reserved), b.Budget, b.Period, b.Currency)
		ch <- prometheus.MustNewConstMetric(budgetHeldDesc, prometheus.GaugeValue, float64(b.HeldForSchedule), b.Budget, b.Period, b.Currency)
		ch <- prometheus.MustNewConstMetric(budgetFreeDesc, prometheus.GaugeValue, float64(b.Free), b.Budget, b.Period, b.Currency)
		current := 0.0
		if b.Current {
			current = 1
		}
		ch <- prometheus.MustNewConstMetric(budgetCurrentDesc, prometheus.GaugeValue, current, b.Budget, b.Period, b.Currency)
	}
}
