package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressLogLines(t *testing.T) {
	var b bytes.Buffer
	p := NewProgressTo(&b, false, 0)
	p.Printf("step %d", 1)
	p.Printf("step %d", 2)
	p.Done("done %d", 2)
	if got := b.String(); got != "step 1\nstep 2\ndone 2\n" {
		t.Errorf("log mode wrote %q", got)
	}
	// Within the interval lines are dropped, and a stage that never logged
	// leaves no final line either.
	b.Reset()
	p = NewProgressTo(&b, false, time.Hour)
	p.Printf("early")
	p.Done("end")
	if got := b.String(); got != "" {
		t.Errorf("log mode within the interval wrote %q", got)
	}
	b.Reset()
	p = NewProgressTo(&b, true, 0)
	p.last = time.Time{}
	p.Printf("x %d", 1)
	p.Done("")
	if got := b.String(); !strings.HasPrefix(got, "\r\x1b[Kx 1") || strings.HasSuffix(got, "\n") {
		t.Errorf("terminal mode wrote %q", got)
	}
}

func TestETA(t *testing.T) {
	for _, c := range []struct {
		el   time.Duration
		frac float64
		want string
	}{
		{10 * time.Second, 0.25, "ETA 30s"},
		{90 * time.Second, 0.5, "ETA 1m30s"},
		{time.Second, 0, ""},
		{time.Second, 1, "ETA 0s"},
	} {
		if got := ETA(c.el, c.frac); got != c.want {
			t.Errorf("ETA(%v, %v) = %q, want %q", c.el, c.frac, got, c.want)
		}
	}
}
