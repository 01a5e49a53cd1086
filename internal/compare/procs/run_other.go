//go:build !linux

package main

import (
	"context"
	"errors"
)

// unsupported says why this machine cannot run the comparison: it needs
// network namespaces.
func unsupported() string { return "needs Linux (network namespaces, /proc)" }

func run(context.Context, *options) (*report, error) {
	return nil, errors.New(unsupported())
}

const loProbeFlag = "lo-probe"

func runLoProbe() int { return 1 }
