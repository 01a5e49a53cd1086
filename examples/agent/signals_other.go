//go:build !unix

package main

import "os"

// leaveSignals is empty where there is no SIGUSR1: such an agent cannot be
// asked to leave without shutting down.
var leaveSignals []os.Signal

// reloadSignals is empty where there is no SIGHUP: such an agent keeps the
// keys it started with.
var reloadSignals []os.Signal
