// Command memhop reads rollouts files of the world demo and asks whether the
// memory reward ranks the second hop's memory update. A two-hop objective
// ("(2) Pifu employer product?") is searched twice: the person, whose
// passage names a company the agent files as a pending entry ("[2] Tekvex
// product"), then that entry from memory ("<think>look up 2 from
// memory</think><search>[2] Tekvex product</search>"). The memory written
// right after that search should replace the pending entry by the passage's
// answer. memhop sorts those memories into absorbed (entry j now holds
// objective j's gold), pending (the memory is the one before, unchanged: the
// search will be repeated, the demo's greedy loops) and other (changed, but
// entry j is not the gold: a copy error), with the mean P(gold | mem) and
// R^M of each; and within each pool of the step pool (the task's memories
// of one step index), how often an absorbed memory's P(gold | mem) is above a
// pending one's. Also the trajectories that loop (one step's output three
// times in a row) and how many of those repeat a search from memory.
//
//	go run ./scripts/memhop data/world/tokenizer.json runs/demo/mempo/rollouts-1.parquet …
package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/tokenizer"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: memhop TOKENIZER.json ROLLOUTS...")
		os.Exit(2)
	}
	tk, err := tokenizer.Load(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "memhop:", err)
		os.Exit(1)
	}
	for _, f := range os.Args[2:] {
		if err := report(os.Stdout, tk, f); err != nil {
			fmt.Fprintln(os.Stderr, "memhop:", err)
			os.Exit(1)
		}
	}
}

// fromMemory is a search of a pending entry: its objective's number.
var fromMemory = regexp.MustCompile(`from memory</think><search>\[(\d+)\] `)

var kinds = []string{"absorbed", "other", "pending"}

type mean struct {
	n     int
	p, rm float64
}

func (m mean) String() string {
	if m.n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (P(gold|mem) %.3f, R^M %+.3f)", m.n, m.p/float64(m.n), m.rm/float64(m.n))
}

func report(w io.Writer, tk *tokenizer.Tokenizer, f string) error {
	rows, err := records.ReadFile[records.Rollout](f)
	if err != nil {
		return err
	}
	dec := func(ids []int32) string {
		s, _ := tk.Decode(records.IDs(ids))
		return s
	}
	means := map[string]*mean{}
	for _, k := range kinds {
		means[k] = &mean{}
	}
	type pkey struct {
		task string
		step int
	}
	pools := map[pkey]map[string][]float64{}
	loops, hopLoops := 0, 0
	for _, r := range rows {
		for t := 2; t < len(r.Steps); t++ {
			a, b, c := r.Steps[t-2].OutputIDs, r.Steps[t-1].OutputIDs, r.Steps[t].OutputIDs
			if slices.Equal(a, b) && slices.Equal(b, c) {
				loops++
				if fromMemory.MatchString(dec(c)) {
					hopLoops++
				}
				break
			}
		}
		for t := 1; t < len(r.Steps); t++ {
			prev, st := r.Steps[t-1], r.Steps[t]
			m := fromMemory.FindStringSubmatch(dec(prev.OutputIDs))
			if m == nil || prev.MemStart < 0 || st.MemStart < 0 || st.PGoldMem == nil || st.RMem == nil {
				continue
			}
			kind := "other"
			mem := dec(st.OutputIDs[st.MemStart:st.MemEnd])
			mem = strings.TrimSuffix(strings.TrimPrefix(mem, "<mem>"), "</mem>")
			j, _ := strconv.Atoi(m[1])
			switch {
			case slices.Equal(prev.OutputIDs[prev.MemStart:prev.MemEnd], st.OutputIDs[st.MemStart:st.MemEnd]):
				kind = "pending"
			case j >= 1 && j <= len(r.Golds) && len(r.Golds[j-1]) > 0 &&
				strings.Contains(mem+";", fmt.Sprintf("[%d] %s;", j, r.Golds[j-1][0])):
				kind = "absorbed"
			}
			mm := means[kind]
			mm.n++
			mm.p += *st.PGoldMem
			mm.rm += *st.RMem
			k := pkey{r.TaskID, t}
			if pools[k] == nil {
				pools[k] = map[string][]float64{}
			}
			pools[k][kind] = append(pools[k][kind], *st.PGoldMem)
		}
	}
	pairs, above := 0, 0
	for _, p := range pools {
		for _, a := range p["absorbed"] {
			for _, b := range p["pending"] {
				pairs++
				if a > b {
					above++
				}
			}
		}
	}
	fmt.Fprintf(w, "%s: %d trajectories, %d loop (%d on a search from memory); after a search from memory: ", f, len(rows), loops, hopLoops)
	for i, k := range kinds {
		if i > 0 {
			fmt.Fprint(w, ", ")
		}
		fmt.Fprintf(w, "%s %v", k, *means[k])
	}
	fmt.Fprintf(w, "; absorbed above pending in %d of %d pairs of one step pool\n", above, pairs)
	return nil
}
