// Command memdrops reads rollouts files of the world demo and counts the
// memory drops in them: steps that repeat the previous step's search with
// the same memory, the signature of a fact that was found and not filed
// (what the lossy expert, mempo-rollout expert --drop-rate, demonstrates).
// For each file it prints the drop rate (repeats over search steps) and the
// mean memory reward R^M and P(gold | mem) of those steps against the other
// searches after the first and the last steps, so one can check that R^M ranks a memory that
// dropped a fact below one that kept it (docs/DEMO.md).
//
//	go run ./scripts/memdrops runs/demo/mempo/rollouts-1.parquet …
package main

import (
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/mempo/mempo/lib/records"
)

type acc struct {
	n        int
	rm, pgm  float64
	withTerm int
}

func (a *acc) add(st records.Step) {
	a.n++
	if st.RMem != nil && st.PGoldMem != nil {
		a.withTerm++
		a.rm += *st.RMem
		a.pgm += *st.PGoldMem
	}
}

func (a acc) String() string {
	if a.withTerm == 0 {
		return fmt.Sprintf("%d steps (no R^M)", a.n)
	}
	return fmt.Sprintf("%d steps, R^M %.4f, P(gold|mem) %.4f", a.n, a.rm/float64(a.withTerm), a.pgm/float64(a.withTerm))
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: memdrops ROLLOUTS.parquet …")
		os.Exit(2)
	}
	for _, f := range os.Args[1:] {
		if err := report(os.Stdout, f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// report writes rollouts file f's line.
func report(w io.Writer, f string) error {
	rows, err := records.ReadFile[records.Rollout](f)
	if err != nil {
		return err
	}
	var drop, kept, answer acc
	searches, correct := 0, 0.0
	for _, r := range rows {
		correct += r.RewardTask
		for i, st := range r.Steps {
			if st.Action == "search" {
				searches++
			}
			if i == 0 {
				continue
			}
			p := r.Steps[i-1]
			mem := func(s records.Step) []int32 {
				if s.MemStart < 0 || s.MemEnd > int32(len(s.OutputIDs)) || s.MemStart > s.MemEnd {
					return nil
				}
				return s.OutputIDs[s.MemStart:s.MemEnd]
			}
			if st.Action == "search" && p.Action == "search" && st.Query == p.Query && slices.Equal(mem(st), mem(p)) {
				drop.add(st)
			} else if st.Action == "search" {
				kept.add(st)
			} else {
				answer.add(st)
			}
		}
	}
	rate := 0.0
	if searches > 0 {
		rate = float64(drop.n) / float64(searches)
	}
	_, err = fmt.Fprintf(w, "%s: %d trajectories, mean R^T %.3f, drop rate %.3f of %d searches; drops: %v; other searches after the first: %v; last steps: %v\n",
		f, len(rows), correct/float64(max(len(rows), 1)), rate, searches, drop, kept, answer)
	return err
}
