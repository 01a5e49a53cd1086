package main

import (
	"net/http"

	"github.com/swim-go/swim"
)

// metricsHandler serves /metrics. The Prometheus exposition lives in
// package swimprom, which this build does not include: the endpoint says
// so with status 501 rather than serve a format of its own.
func metricsHandler(*swim.Memberlist) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		http.Error(rw, "/metrics is not available in this build: it needs package github.com/swim-go/swim/swimprom", http.StatusNotImplemented)
	})
}
