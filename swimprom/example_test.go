package swimprom_test

import (
	"bufio"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/swim-go/swim"
	"github.com/swim-go/swim/swimprom"
)

// A member with its metrics: the Collector is the member's Observer (for
// the histograms), is attached to the Memberlist (for the counters and
// gauges), and is registered on the registry that /metrics serves. Here the
// handler is called directly instead of through a server, and the
// member, alone, reports itself alive.
func Example() {
	cfg := swim.DefaultLocalConfig()
	cfg.Name = "a"
	cfg.BindPort = 0 // a free port of 127.0.0.1

	col := swimprom.New(swimprom.WithConstLabels(prometheus.Labels{"member": cfg.Name}))
	cfg.Observer = col
	ml, err := swim.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer ml.Shutdown()
	col.Attach(ml)

	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	handler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{}) // http.Handle("/metrics", handler)

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	lines := bufio.NewScanner(rec.Body)
	for lines.Scan() {
		if line := lines.Text(); strings.HasPrefix(line, "swim_members{") || strings.HasPrefix(line, "swim_health_score{") {
			fmt.Println(line)
		}
	}
	// Output:
	// swim_health_score{member="a"} 0
	// swim_members{member="a",state="alive"} 1
	// swim_members{member="a",state="dead"} 0
	// swim_members{member="a",state="left"} 0
	// swim_members{member="a",state="suspect"} 0
}
