// Command memscore checks whether P(gold | mem) ranks memories by what they
// hold, on the training rollouts of the world demo (k = 2, numbered gold,
// the demo's lead-in). `memscore seqs ROLLOUTS TOKENIZER` writes, for every
// <mem> step, two teacher-forcing sequences as JSONL for `mempo-score
// logprobs`: "memonly", the memory-reward context the rollout engine scores
// (the prompt, the step's <mem> block, the lead-in, the gold), and
// "stepctx", the same after the context the policy saw at that step (its
// keep-1 context: the task, the previous step and its observation) instead
// of the prompt alone. Each row is labelled with the step's kind: first,
// drop (a search repeating the previous step's query with the same memory),
// other, or last (the answer step, split by whether the answer was right).
// `memscore summary LOGPROBS` prints the mean P(gold | ·) per context and
// kind. docs/DEMO.md ("The lossy expert") reports what it found:
//
//	memscore seqs runs/demo/mempo/rollouts-1.parquet data/world/tokenizer.json > seqs.jsonl
//	mempo-score logprobs --model runs/demo/sft --in seqs.jsonl --out lp.jsonl
//	memscore summary lp.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"

	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/tokenizer"
)

type row struct {
	IDs      []int      `json:"ids"`
	N        int        `json:"n"`
	Kind     string     `json:"kind"`
	Ctx      string     `json:"ctx"`
	Logprobs []*float64 `json:"logprobs,omitempty"`
}

func main() {
	switch {
	case len(os.Args) == 4 && os.Args[1] == "seqs":
		check(seqs(os.Args[2], os.Args[3]))
	case len(os.Args) == 3 && os.Args[1] == "summary":
		check(summary(os.Args[2]))
	default:
		fmt.Fprintln(os.Stderr, "usage: memscore seqs ROLLOUTS TOKENIZER | memscore summary LOGPROBS")
		os.Exit(2)
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "memscore:", err)
		os.Exit(1)
	}
}

func ints(v []int32) []int {
	o := make([]int, len(v))
	for i, x := range v {
		o[i] = int(x)
	}
	return o
}

func seqs(path, tokPath string) error {
	rows, err := records.ReadFile[records.Rollout](path)
	if err != nil {
		return err
	}
	tk, err := tokenizer.Load(tokPath)
	if err != nil {
		return err
	}
	lead := tk.Encode("<think>all 2 answers are known</think><answer>")
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if len(r.Golds) != 2 || len(r.Steps) == 0 {
			return fmt.Errorf("%s: task %s: want k = 2 trajectories", path, r.TaskID)
		}
		gold := tk.Encode(fmt.Sprintf("[1] %s; [2] %s", r.Golds[0][0], r.Golds[1][0]))
		for i, st := range r.Steps {
			if st.MemStart < 0 {
				continue
			}
			kind := "other"
			switch p := r.Steps[max(i-1, 0)]; {
			case st.Action == "answer" && r.RewardTask == 1:
				kind = "last-right"
			case st.Action == "answer":
				kind = "last-wrong"
			case i == 0:
				kind = "first"
			case st.Action == "search" && p.Action == "search" && st.Query == p.Query && p.MemStart >= 0 &&
				slices.Equal(st.OutputIDs[st.MemStart:st.MemEnd], p.OutputIDs[p.MemStart:p.MemEnd]):
				kind = "drop"
			}
			mem := ints(st.OutputIDs[st.MemStart:st.MemEnd])
			for _, c := range []struct {
				name string
				ctx  []int32
			}{{"memonly", r.Steps[0].ContextIDs}, {"stepctx", st.ContextIDs}} {
				ids := slices.Concat(ints(c.ctx), mem, lead, gold)
				if err := enc.Encode(row{IDs: ids, N: len(gold), Kind: kind, Ctx: c.name}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func summary(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	type key struct{ ctx, kind string }
	sum, n := map[key]float64{}, map[key]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for line := 1; sc.Scan(); line++ {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if r.N <= 0 || len(r.Logprobs) < r.N {
			return fmt.Errorf("%s:%d: %d log-probs for %d gold ids", path, line, len(r.Logprobs), r.N)
		}
		s := 0.0
		for _, lp := range r.Logprobs[len(r.Logprobs)-r.N:] {
			if lp == nil {
				return fmt.Errorf("%s:%d: no log-prob for a gold id", path, line)
			}
			s += *lp
		}
		k := key{r.Ctx, r.Kind}
		sum[k] += math.Exp(s / float64(r.N))
		n[k]++
	}
	if err := sc.Err(); err != nil {
		return err
	}
	keys := make([]key, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ctx+keys[i].kind < keys[j].ctx+keys[j].kind })
	fmt.Println("| context | step | steps | mean P(gold \\| ·) |")
	fmt.Println("|---|---|---:|---:|")
	for _, k := range keys {
		fmt.Printf("| %s | %s | %d | %.4f |\n", k.ctx, k.kind, n[k], sum[k]/float64(n[k]))
	}
	return nil
}
