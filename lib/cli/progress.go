package cli

import (
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// Progress prints a self-overwriting status line on stderr, at most a few
// times a second, and only when stderr is a terminal: piped or logged runs
// stay quiet.
type Progress struct {
	mu      sync.Mutex
	enabled bool
	last    time.Time
	shown   bool
}

// NewProgress returns a Progress that is active only on a terminal.
func NewProgress() *Progress {
	return &Progress{enabled: term.IsTerminal(int(os.Stderr.Fd()))}
}

// Printf updates the status line (rate-limited).
func (p *Progress) Printf(format string, args ...any) {
	if p == nil || !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.last) < 200*time.Millisecond {
		return
	}
	p.last = now
	p.shown = true
	fmt.Fprintf(os.Stderr, "\r\x1b[K"+format, args...)
}

// Done ends the status line with a final message.
func (p *Progress) Done(format string, args ...any) {
	if p == nil || !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(os.Stderr, "\r\x1b[K"+format+"\n", args...)
	p.shown = false
}
