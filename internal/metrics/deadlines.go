package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"allot"
)

// Deadlines is what the deadline gauges show (docs/design.md, "Period
// deadlines"), read from the ledger on every scrape.
type Deadlines struct {
	// Pipelines declare a deadline: each gets every kind of
	// allot_deadline_periods and allot_deadline_late_open, 0 when it has
	// none, so that the first warning is an increase an alert sees.
	Pipelines []string
	// Periods count each pipeline's records per kind.
	Periods []DeadlinePeriods
	// LateOpen counts, per pipeline, the periods recorded late that have
	// not completed since.
	LateOpen map[string]int
}

// DeadlinePeriods counts one pipeline's deadline records of one kind.
type DeadlinePeriods struct {
	Pipeline, Kind string
	Count          int
}

var (
	deadlinePeriodsDesc = prometheus.NewDesc("allot_deadline_periods",
		"Periods judged against their pipeline's deadline, per pipeline and kind (warning, late, on_time, completed_late); only ever grows.",
		[]string{"pipeline", "kind"}, nil)
	deadlineLateOpenDesc = prometheus.NewDesc("allot_deadline_late_open",
		"Periods recorded late that have not completed since, per pipeline (starter check lists them as period_late).",
		[]string{"pipeline"}, nil)
	deadlineOnTimeDesc = prometheus.NewDesc("allot_deadline_on_time_ratio",
		"on_time / (on_time + late) over every period judged at its deadline, per pipeline; absent before the first.",
		[]string{"pipeline"}, nil)
)

// deadlineGauges reads the deadline records from the ledger when scraped.
type deadlineGauges struct {
	read   func(ctx context.Context) (Deadlines, error)
	logger *slog.Logger
}

func (g *deadlineGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- deadlinePeriodsDesc
	ch <- deadlineLateOpenDesc
	ch <- deadlineOnTimeDesc
}

func (g *deadlineGauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := g.read(ctx)
	if err != nil {
		// A gauge that cannot be read must not look like "never late".
		if g.logger != nil {
			g.logger.Warn("read deadline records", "error", err)
		}
		for _, desc := range []*prometheus.Desc{deadlinePeriodsDesc, deadlineLateOpenDesc, deadlineOnTimeDesc} {
			ch <- prometheus.NewInvalidMetric(desc, err)
		}
		return
	}
	type key struct{ pipeline, kind string }
	periods := map[key]int{}
	late := map[string]int{}
	for _, p := range d.Pipelines {
		for _, k := range allot.DeadlineKinds {
			periods[key{p, string(k)}] += 0
		}
		late[p] += 0
	}
	for _, r := range d.Periods {
		periods[key{r.Pipeline, r.Kind}] += r.Count
	}
	for p, n := range d.LateOpen {
		late[p] += n
	}
	for k, n := range periods {
		ch <- prometheus.MustNewConstMetric(deadlinePeriodsDesc, prometheus.GaugeValue, float64(n), k.pipeline, k.kind)
	}
	for p, n := range late {
		ch <- prometheus.MustNewConstMetric(deadlineLateOpenDesc, prometheus.GaugeValue, float64(n), p)
	}
	judged := map[string][2]int{} // on time, late
	for k, n := range periods {
		j := judged[k.pipeline]
		switch allot.DeadlineKind(k.kind) {
		case allot.DeadlineOnTime:
			j[0] += n
		case allot.DeadlineLate:
			j[1] += n
		default:
			continue
		}
		judged[k.pipeline] = j
	}
	for p, j := range judged {
		if j[0]+j[1] > 0 {
			ch <- prometheus.MustNewConstMetric(deadlineOnTimeDesc, prometheus.GaugeValue, float64(j[0])/float64(j[0]+j[1]), p)
		}
	}
}
