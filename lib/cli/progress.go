package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// Progress reports a long stage on stderr. On a terminal it is one
// self-overwriting status line, redrawn at most five times a second; piped or
// logged, it is a plain line at most every LogInterval, so a log shows the
// run moving without filling up.
type Progress struct {
	mu       sync.Mutex
	w        io.Writer
	terminal bool
	interval time.Duration
	last     time.Time
	start    time.Time
	logged   bool // a log-mode line was printed
}

// LogInterval is how often a Progress that is not on a terminal prints.
const LogInterval = 10 * time.Second

// NewProgress returns a Progress on stderr.
func NewProgress() *Progress {
	return NewProgressTo(os.Stderr, term.IsTerminal(int(os.Stderr.Fd())), LogInterval)
}

// NewProgressTo is a Progress on w: a status line when terminal, else a
// plain line at most every interval.
func NewProgressTo(w io.Writer, terminal bool, interval time.Duration) *Progress {
	now := time.Now()
	return &Progress{w: w, terminal: terminal, interval: interval, start: now, last: now}
}

// Terminal says whether the Progress draws a status line.
func (p *Progress) Terminal() bool { return p != nil && p.terminal }

// Elapsed is the time since the Progress was made.
func (p *Progress) Elapsed() time.Duration { return time.Since(p.start) }

// Printf updates the status (rate-limited).
func (p *Progress) Printf(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.terminal {
		if now.Sub(p.last) < 200*time.Millisecond {
			return
		}
		p.last = now
		fmt.Fprintf(p.w, "\r\x1b[K"+format, args...)
		return
	}
	if now.Sub(p.last) < p.interval {
		return
	}
	p.last = now
	p.logged = true
	fmt.Fprintf(p.w, format+"\n", args...)
}

// Done ends the status with a final message: on a terminal it replaces the
// status line (an empty message only clears it); in a log it is printed
// only after periodic lines were, so a short stage leaves the log as it
// was (a command's own summary or error stays its one line).
func (p *Progress) Done(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	if p.terminal {
		fmt.Fprint(p.w, "\r\x1b[K")
	} else if !p.logged {
		return
	}
	if msg != "" {
		fmt.Fprintln(p.w, msg)
	}
}

// ETA is the remaining time of a stage that is frac done after elapsed, as
// "ETA 1m05s", or "" when frac gives no estimate yet.
func ETA(elapsed time.Duration, frac float64) string {
	if !(frac > 0) || frac > 1 || elapsed <= 0 {
		return ""
	}
	left := time.Duration(float64(elapsed) * (1 - frac) / frac).Round(time.Second)
	return "ETA " + left.String()
}
