package main

import (
	"fmt"
	"strings"
	"time"
)

// phases times the stages of one update — loading the policy, reading the
// optimizer state, the steps, writing --out — for a line printed at the
// end: at 7B the loading and writing of 15 GB checkpoints and 30 GB of
// optimizer state can take longer than the steps, and only this line says
// which.
type phases struct {
	last  time.Time
	parts []string
}

func newPhases() *phases { return &phases{last: time.Now()} }

// mark ends the phase called name (the time since the previous mark).
func (p *phases) mark(name string) {
	if p == nil {
		return
	}
	now := time.Now()
	p.parts = append(p.parts, fmt.Sprintf("%s %.1f s", name, now.Sub(p.last).Seconds()))
	p.last = now
}

func (p *phases) String() string { return strings.Join(p.parts, ", ") }
