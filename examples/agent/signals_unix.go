//go:build unix

package main

import (
	"os"
	"syscall"
)

// leaveSignals make the agent leave the cluster gracefully.
var leaveSignals = []os.Signal{syscall.SIGUSR1}

// reloadSignals make the agent re-read its key file.
var reloadSignals = []os.Signal{syscall.SIGHUP}
