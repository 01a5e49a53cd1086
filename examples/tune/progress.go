package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress reports runs done on stderr. On a terminal it is one line,
// redrawn every second (so the elapsed time moves even while a long run is
// in progress); elsewhere (a log, a test) it prints one line per finished
// run, since carriage returns would pile up there.
type progress struct {
	w     io.Writer
	total int
	start time.Time
	live  bool

	// mu guards count and the writes: workers finish runs concurrently,
	// and the writer (a bytes.Buffer in the test) need not be safe for
	// concurrent use.
	mu    sync.Mutex
	count int

	stop chan struct{}
	wg   sync.WaitGroup
}

func newProgress(w io.Writer, total int) *progress {
	p := &progress{w: w, total: total, start: time.Now(), stop: make(chan struct{})}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.live = true
		}
	}
	if p.live {
		p.redraw()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-p.stop:
					return
				case <-t.C:
					p.redraw()
				}
			}
		}()
	}
	return p
}

// line is the progress text: runs done, elapsed, and once a run has
// finished an estimate of the rest (runs cost about the same). Call it with
// mu held.
func (p *progress) line() string {
	done := p.count
	el := time.Since(p.start)
	s := fmt.Sprintf("tune: %d/%d runs done, %v elapsed", done, p.total, el.Round(time.Second))
	if done > 0 && done < p.total {
		left := time.Duration(float64(el) / float64(done) * float64(p.total-done))
		s += fmt.Sprintf(", about %v left", left.Round(time.Second))
	}
	return s
}

// redraw rewrites the terminal line; \x1b[K clears what a longer
// previous line left.
func (p *progress) redraw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r%s\x1b[K", p.line())
}

// done counts one finished run.
func (p *progress) done() {
	if p.live {
		p.mu.Lock()
		p.count++
		p.mu.Unlock()
		p.redraw()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count++
	fmt.Fprintln(p.w, p.line())
}

// finish stops the redrawing and ends the line.
func (p *progress) finish() {
	close(p.stop)
	p.wg.Wait()
	if p.live {
		p.redraw()
		fmt.Fprintln(p.w)
	}
}
