//go:build !unix

package main

import "os"

// sigLeave is nil where there is no SIGUSR1: the demo skips the graceful
// leave.
var sigLeave os.Signal
