package harness

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ParseSizes reads a comma-separated list of cluster sizes, each at
// least 2.
func ParseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 2 {
			return nil, fmt.Errorf("bad size %q (want integers ≥ 2)", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no size given")
	}
	return out, nil
}

// ShutdownAll calls shutdown for each of n members, 64 at a time, and
// returns when all have returned.
func ShutdownAll(n int, shutdown func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			shutdown(i)
		})
	}
	wg.Wait()
}

// WaitGoroutines waits until at most target goroutines run, or the bound
// passes, polling; it returns how many are left over the target.
func WaitGoroutines(target int, bound time.Duration) int {
	deadline := time.Now().Add(bound)
	for {
		n := runtime.NumGoroutine()
		if n <= target || time.Now().After(deadline) {
			return max(0, n-target)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
