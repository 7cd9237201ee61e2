package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Forecast is one budget period's forecast (internal/forecast): what it
// will have cost by its end, in minor units of Currency.
type Forecast struct {
	Budget, Period, Currency string
	Forecast                 int64
	// Unbounded: a covered step is priced only by its vendor's quote, so
	// the forecast may be short of what the period will cost.
	Unbounded bool
	// RefusedRuns are the runs to come the limit would not admit: they
	// would park, waiting for a raise.
	RefusedRuns int
}

var (
	forecastDesc = prometheus.NewDesc("allot_budget_forecast_minor_units",
		"What a budget's current period will have cost by its end: settled + reserved + the runs its Schedules will still start (paused ones excluded, caps applied) and the episodes not yet reserved, each at what one run reserves, in minor units of its currency.",
		[]string{"budget", "period", "currency"}, nil)
	forecastUnboundedDesc = prometheus.NewDesc("allot_budget_forecast_unbounded",
		"1 when a covered step is priced only by its vendor's quote, so the budget period's forecast may be short; 0 otherwise.",
		[]string{"budget", "period"}, nil)
	forecastRefusedDesc = prometheus.NewDesc("allot_budget_forecast_refused_runs",
		"The runs still to come in a budget's current period that its limit would not admit, in the order they come, each at what one run reserves at most: they would park, waiting for a raise.",
		[]string{"budget", "period"}, nil)
)

// forecastGauges forecasts every budget's current period when scraped.
type forecastGauges struct {
	read   func(ctx context.Context) ([]Forecast, error)
	logger *slog.Logger
}

func (g *forecastGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- forecastDesc
	ch <- forecastUnboundedDesc
	ch <- forecastRefusedDesc
}

func (g *forecastGauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fs, err := g.read(ctx)
	if err != nil {
		if g.logger != nil {
			g.logger.Warn("forecast budgets", "error", err)
		}
		ch <- prometheus.NewInvalidMetric(forecastDesc, err)
		ch <- prometheus.NewInvalidMetric(forecastUnboundedDesc, err)
		ch <- prometheus.NewInvalidMetric(forecastRefusedDesc, err)
		return
	}
	for _, f := range fs {
		unbounded := 0.0
		if f.Unbounded {
			unbounded = 1
		}
		ch <- prometheus.MustNewConstMetric(forecastDesc, prometheus.GaugeValue, float64(f.Forecast), f.Budget, f.Period, f.Currency)
		ch <- prometheus.MustNewConstMetric(forecastUnboundedDesc, prometheus.GaugeValue, unbounded, f.Budget, f.Period)
		ch <- prometheus.MustNewConstMetric(forecastRefusedDesc, prometheus.GaugeValue, float64(f.RefusedRuns), f.Budget, f.Period)
	}
}
