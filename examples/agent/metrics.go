package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/swimprom"
)

// agentMetrics is the member's Prometheus collector (swimprom) and the
// registry /metrics serves: the member's counters, gauges and histograms,
// and the Go runtime's and the process's own.
type agentMetrics struct {
	col *swimprom.Collector
	reg *prometheus.Registry
}

// newAgentMetrics builds the collector, which must be the Config's
// Observer before swim.New for the histograms to fill.
func newAgentMetrics(cfg *swim.Config) (*agentMetrics, error) {
	col := swimprom.New()
	cfg.Observer = col
	reg := prometheus.NewRegistry()
	if err := reg.Register(col); err != nil {
		return nil, err
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &agentMetrics{col: col, reg: reg}, nil
}

// handler serves /metrics for the member ml.
func (a *agentMetrics) handler(ml *swim.Memberlist) http.Handler {
	a.col.Attach(ml)
	return promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{})
}
