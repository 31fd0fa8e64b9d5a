package main

import (
	"fmt"
	"io"
	"time"

	ucli "github.com/urfave/cli/v2"
)

// checkpointEveryFlag bounds what a kill loses: the run state (weights,
// moments, metrics rows so far) is written to --out at this interval, and a
// rerun of the same command resumes from it.
var checkpointEveryFlag = &ucli.DurationFlag{Name: "checkpoint-every", Value: 10 * time.Minute,
	Usage: "write a resumable checkpoint to --out at this interval (0: only at the end and at --stop-after), so a kill loses at most this much; stretched to 10× a save's duration when saves are slow"}

// checkpointer decides when the next periodic checkpoint is due: after the
// interval, and never sooner than ten times the last save took, so saving
// costs at most about a tenth of the run.
type checkpointer struct {
	every time.Duration
	next  time.Time
}

func newCheckpointer(every time.Duration) *checkpointer {
	return &checkpointer{every: every, next: time.Now().Add(every)}
}

func (c *checkpointer) due() bool { return c.every > 0 && !time.Now().Before(c.next) }

func (c *checkpointer) save(log io.Writer, out string, done, total int, save func(int) error) error {
	start := time.Now()
	if err := save(done); err != nil {
		return err
	}
	took := time.Since(start)
	c.next = time.Now().Add(max(c.every, 10*took))
	fmt.Fprintf(log, "mempo-update: checkpoint at step %d of %d → %s (%.1fs); a rerun resumes here\n", done, total, out, took.Seconds())
	return nil
}

// forceFlag lets --out replace a non-empty directory that is not a
// checkpoint (one without config.json); without it that is refused.
var forceFlag = &ucli.BoolFlag{Name: "force", Usage: "replace an existing non-empty --out directory that is not a checkpoint"}
