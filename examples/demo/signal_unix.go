//go:build unix

package main

import (
	"os"
	"syscall"
)

// sigLeave asks an agent to leave gracefully.
var sigLeave os.Signal = syscall.SIGUSR1
