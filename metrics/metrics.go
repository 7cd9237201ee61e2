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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// NeedingAttention reports episodes needing attention per pipeline.
type NeedingAttention func(ctx context.Context) (map[string]int, error)

// Metrics is one Prometheus registry for a worker.
type Metrics struct {
	registry *prometheus.Registry
	scope    io.Closer
	handler  client.MetricsHandler
}

// New builds the registry. attention, when set, feeds the
// allot_episodes_needing_attention gauge on every scrape.
func New(attention NeedingAttention, logger *slog.Logger) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
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
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       "_",
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	if attention != nil {
		reg.MustRegister(&attentionCollector{read: attention, logger: logger})
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

var attentionDesc = prometheus.NewDesc("allot_episodes_needing_attention",
	"Episodes parked until an operator decides (unknown outcome, vendor failure, ...), per pipeline.",
	[]string{"pipeline"}, nil)

// attentionCollector reads the ledger when scraped, so the gauge is the
// ledger's truth and survives worker restarts.
type attentionCollector struct {
	read   NeedingAttention
	logger *slog.Logger
}

func (c *attentionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- attentionDesc }

func (c *attentionCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.read(ctx)
	if err != nil {
		if c.logger != nil {
			c.logger.Warn("read episodes needing attention", "error", err)
		}
		ch <- prometheus.NewInvalidMetric(attentionDesc, err)
		return
	}
	for pipeline, n := range counts {
		ch <- prometheus.MustNewConstMetric(attentionDesc, prometheus.GaugeValue, float64(n), pipeline)
	}
}
