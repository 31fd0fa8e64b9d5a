// Command memscore checks whether P(gold | mem) ranks memories by what they
// hold, on rollouts of the world demo (numbered gold, the demo's lead-in
// "<think>all {k} answers are known</think><answer>"). `memscore seqs
// ROLLOUTS TOKENIZER` writes, for every <mem> step, teacher-forcing sequences
// as JSONL for `mempo-score logprobs`, built by agent.MemorySequences, the
// function the rollout engine scores R^M with, so the rows are the engine's:
// "turn" and "next-step", the memory term under each --score-layout;
// "history", the raw-history term (the same under both layouts); and
// "stepctx", the memory and gold after the context the policy saw at that
// step (its keep-1 context: the task, the previous step and its observation)
// instead. Each row is labelled with the step's kind: first, drop (a search
// repeating the previous step's query with the same memory), other, or last
// (the answer step, split by whether the answer was right). `memscore
// summary LOGPROBS [TOKENIZER]` prints the mean P(gold | ·) per context, k
// and kind, the same per objective (--score-per-objective's form, each
// objective's "; [j] " ids included) and, with the tokenizer, per objective
// over each answer's own ids alone, and for the two layouts the mean R^M
// (P(gold | mem) − P(gold | history)).
// `memscore copy LOGPROBS TOKENIZER` prints, per context, k and objective
// number j, the mean P(answer j | ·) of the rows whose memory holds answer j
// ("[j] value") against those whose memory has another value under [j] or
// no [j]: whether the scorer copies each objective's answer from memory.
// docs/DEMO.md ("Making R^M rank memories", "What the scorer copies")
// reports what it found:
//
//	memscore seqs runs/demo/mempo/rollouts-1.parquet data/world/tokenizer.json > seqs.jsonl
//	mempo-score logprobs --model runs/demo/sft --in seqs.jsonl --out lp.jsonl
//	memscore summary lp.jsonl
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/rollout"
	"github.com/mempo/mempo/lib/tokenizer"
)

// leadIn is the demo's R^M lead-in (scripts/demo/run.sh).
const leadIn = "<think>all {k} answers are known</think><answer>"

// layouts are the memory terms written, by --score-layout name.
var layouts = []agent.ScoreLayout{agent.ScoreInTurn, agent.ScoreNextStep}

type row struct {
	IDs  []int  `json:"ids"`
	N    int    `json:"n"`
	Kind string `json:"kind"`
	Ctx  string `json:"ctx"`
	Traj int    `json:"traj"` // the trajectory's row in the rollouts file
	Step int    `json:"step"` // the step's index in the trajectory
	K    int    `json:"k"`    // the task's objectives
	// Ends holds, for each objective j, the number of gold ids up to the
	// end of its "[j] answer" (nil when the gold's tokenization does not
	// split there), for the per-objective score.
	Ends     []int      `json:"ends,omitempty"`
	Logprobs []*float64 `json:"logprobs,omitempty"`
}

func main() {
	switch {
	case len(os.Args) == 4 && os.Args[1] == "seqs":
		check(seqs(os.Args[2], os.Args[3]))
	case (len(os.Args) == 3 || len(os.Args) == 4) && os.Args[1] == "summary":
		tok := ""
		if len(os.Args) == 4 {
			tok = os.Args[3]
		}
		check(summary(os.Args[2], tok))
	case len(os.Args) == 3 && os.Args[1] == "pairs":
		check(pairs(os.Args[2]))
	case len(os.Args) == 4 && os.Args[1] == "copy":
		check(copied(os.Args[2], os.Args[3]))
	default:
		fmt.Fprintln(os.Stderr, "usage: memscore seqs ROLLOUTS TOKENIZER | memscore summary LOGPROBS [TOKENIZER] | memscore pairs LOGPROBS | memscore copy LOGPROBS TOKENIZER")
		os.Exit(2)
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "memscore:", err)
		os.Exit(1)
	}
}

// demoAgent is the demo's protocol (its keep and R^M flags) under layout l.
func demoAgent(tk *tokenizer.Tokenizer, keep string, l agent.ScoreLayout) (*agent.Agent, error) {
	cfg := agent.DefaultConfig()
	k, err := agent.ParseKeep(keep)
	if err != nil {
		return nil, err
	}
	cfg.Keep, cfg.TopK, cfg.TurnsHint = k, 2, false
	cfg.ScoreLeadIn, cfg.ScoreGoldNumbered, cfg.ScoreLayout = leadIn, true, l
	return agent.New(cfg, rollout.Tok{T: tk})
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
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	enc := json.NewEncoder(w)
	agents := map[string][]*agent.Agent{}
	for ti, r := range rows {
		if len(r.Steps) == 0 {
			continue
		}
		ags := agents[r.Keep]
		if ags == nil {
			for _, l := range layouts {
				a, err := demoAgent(tk, r.Keep, l)
				if err != nil {
					return fmt.Errorf("%s: task %s: %w", path, r.TaskID, err)
				}
				ags = append(ags, a)
			}
			agents[r.Keep] = ags
		}
		recs := rollout.StepRecords(&r)
		// The contexts must be the demo protocol's, or the sequences below
		// would not be the ones the engine scored.
		if err := ags[0].CheckRecord(r.Questions, recs); err != nil {
			return fmt.Errorf("%s: task %s: not the demo's protocol: %w", path, r.TaskID, err)
		}
		gold, err := agent.NumberedGoldText(r.Golds)
		if err != nil {
			return fmt.Errorf("%s: task %s: %w", path, r.TaskID, err)
		}
		lead := tk.Encode(strings.ReplaceAll(leadIn, "{k}", fmt.Sprint(len(r.Golds))))
		goldIDs := tk.Encode(gold)
		// The per-objective split (nil when the gold does not tokenize
		// apart at its parts: those rows get no per-objective score).
		ends, err := ags[0].GoldEnds(gold, goldIDs, len(r.Golds))
		if err != nil {
			ends = nil
		}
		prompt := ags[0].PromptIDs(r.Questions)
		history := make([]agent.Turn, len(recs))
		for i, s := range recs {
			history[i] = agent.Turn{Output: s.OutputIDs, Obs: s.ObsIDs}
		}
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
			var hist []int
			for li, a := range ags {
				ms, err := a.MemorySequences(prompt, history, i, int(st.MemStart), int(st.MemEnd), gold, len(r.Golds))
				if err != nil {
					return fmt.Errorf("%s: task %s: %w", path, r.TaskID, err)
				}
				if li == 0 {
					hist = ms.Hist
				} else if !slices.Equal(hist, ms.Hist) {
					return fmt.Errorf("%s: task %s: step %d: the history term differs between layouts", path, r.TaskID, i+1)
				}
				if err := enc.Encode(row{IDs: ms.Mem, N: len(ms.GoldIDs), Kind: kind, Ctx: layouts[li].String(), Traj: ti, Step: i, K: len(r.Golds), Ends: matchEnds(ends, ms.GoldIDs, goldIDs)}); err != nil {
					return err
				}
			}
			if err := enc.Encode(row{IDs: hist, N: len(goldIDs), Kind: kind, Ctx: "history", Traj: ti, Step: i, K: len(r.Golds)}); err != nil {
				return err
			}
			step := slices.Concat(recs[i].ContextIDs, recs[i].OutputIDs[st.MemStart:st.MemEnd], lead, goldIDs)
			if err := enc.Encode(row{IDs: step, N: len(goldIDs), Kind: kind, Ctx: "stepctx", Traj: ti, Step: i, K: len(r.Golds), Ends: ends}); err != nil {
				return err
			}
		}
	}
	return nil
}

// scored is a row of `mempo-score logprobs`' output with its P(gold | ·),
// the geometric mean of the gold ids' probabilities (rl.GeoMeanProb's).
type scored struct {
	row
	P    float64
	PObj float64 // the mean over objectives of each one's geometric mean (NaN without Ends)
}

func readScored(path string) ([]scored, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []scored
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for line := 1; sc.Scan(); line++ {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if r.N <= 0 || len(r.Logprobs) < r.N {
			return nil, fmt.Errorf("%s:%d: %d log-probs for %d gold ids", path, line, len(r.Logprobs), r.N)
		}
		gold := r.Logprobs[len(r.Logprobs)-r.N:]
		if slices.Contains(gold, nil) {
			return nil, fmt.Errorf("%s:%d: no log-prob for a gold id", path, line)
		}
		pobj := math.NaN()
		if len(r.Ends) > 0 {
			sum, from := 0.0, 0
			for _, end := range r.Ends {
				sum += geoMean(gold[from:end])
				from = end
			}
			pobj = sum / float64(len(r.Ends))
		}
		out = append(out, scored{r, geoMean(gold), pobj})
	}
	return out, sc.Err()
}

func summary(path, tokPath string) error {
	rows, err := readScored(path)
	if err != nil {
		return err
	}
	var markers []int
	if tokPath != "" {
		maxK := 0
		for _, r := range rows {
			maxK = max(maxK, r.K)
		}
		tk, err := tokenizer.Load(tokPath)
		if err != nil {
			return err
		}
		if markers, err = markerIDs(tk, tokPath, maxK); err != nil {
			return err
		}
	}
	type key struct {
		ctx  string
		k    int
		kind string
	}
	type sums struct {
		n, nObj, nAns int
		p, pObj, pAns float64
	}
	acc := map[key]*sums{}
	for _, r := range rows {
		k := key{r.Ctx, r.K, r.Kind}
		a := acc[k]
		if a == nil {
			a = &sums{}
			acc[k] = a
		}
		a.n++
		a.p += r.P
		if !math.IsNaN(r.PObj) {
			a.nObj++
			a.pObj += r.PObj
		}
		if markers != nil {
			if p := answersAlone(r, markers); !math.IsNaN(p) {
				a.nAns++
				a.pAns += p
			}
		}
	}
	keys := slices.SortedFunc(maps.Keys(acc), func(x, y key) int {
		return cmp.Or(strings.Compare(x.ctx, y.ctx), cmp.Compare(x.k, y.k), strings.Compare(x.kind, y.kind))
	})
	mean := func(s float64, n int) string {
		if n == 0 {
			return "—"
		}
		return fmt.Sprintf("%.4f", s/float64(n))
	}
	// R^M's mean is the difference of the means: every step has one row of
	// each context. The per-objective column is P(gold | ·) as
	// --score-per-objective scores it (each objective's ids, its "; [j] "
	// included); the answers-alone column, with a tokenizer, the same mean
	// over each answer's own ids (after its "[j]").
	fmt.Println("| context | k | step | steps | mean P(gold \\| ·) | per objective | answers alone | mean R^M |")
	fmt.Println("|---|---:|---|---:|---:|---:|---:|---:|")
	for _, k := range keys {
		a := acc[k]
		rm := "—"
		if h := acc[key{"history", k.k, k.kind}]; k.ctx != "history" && k.ctx != "stepctx" && h != nil && h.n == a.n {
			rm = fmt.Sprintf("%.4f", a.p/float64(a.n)-h.p/float64(h.n))
		}
		fmt.Printf("| %s | %d | %s | %d | %.4f | %s | %s | %s |\n", k.ctx, k.k, k.kind, a.n, a.p/float64(a.n), mean(a.pObj, a.nObj), mean(a.pAns, a.nAns), rm)
	}
	return nil
}

// oneID returns the id of s, which must be one id of tk (loaded from
// tokPath, which errors name).
func oneID(tk *tokenizer.Tokenizer, tokPath, s string) (int, error) {
	ids := tk.Encode(s)
	if len(ids) != 1 {
		return 0, fmt.Errorf("%s: %q is %d ids, want one", tokPath, s, len(ids))
	}
	return ids[0], nil
}

// markerIDs returns the ids of the answer markers "[1]" … "[k]" (index j−1
// for "[j]"); each must be one id of tk.
func markerIDs(tk *tokenizer.Tokenizer, tokPath string, k int) ([]int, error) {
	ids := make([]int, k)
	for j := range ids {
		var err error
		if ids[j], err = oneID(tk, tokPath, fmt.Sprintf("[%d]", j+1)); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// geoMean is the geometric mean probability of log-probs lps (none nil):
// exp of their mean, rl.GeoMeanProb's.
func geoMean(lps []*float64) float64 {
	t := 0.0
	for _, lp := range lps {
		t += *lp
	}
	return math.Exp(t / float64(len(lps)))
}

// answerSpan returns where objective j's answer ids lie in its part of the
// gold ids (span, from its "; " on): after its marker, to the part's end;
// ok is false when the part has no marker or nothing after it.
func answerSpan(span []int, marker int) (from int, ok bool) {
	m := slices.Index(span, marker)
	if m < 0 || m+1 >= len(span) {
		return 0, false
	}
	return m + 1, true
}

// answersAlone is r's P(gold | ·) per objective over each answer's own ids:
// the mean over objectives of the geometric mean probability of the ids
// after its marker (markers[j−1] for objective j); NaN without Ends or when
// an objective has no answer ids.
func answersAlone(r scored, markers []int) float64 {
	if len(r.Ends) == 0 || len(r.Ends) > len(markers) {
		return math.NaN()
	}
	gold, lps := r.IDs[len(r.IDs)-r.N:], r.Logprobs[len(r.Logprobs)-r.N:]
	sum, from := 0.0, 0
	for j, end := range r.Ends {
		a, ok := answerSpan(gold[from:end], markers[j])
		if !ok {
			return math.NaN()
		}
		sum += geoMean(lps[from+a : end])
		from = end
	}
	return sum / float64(len(r.Ends))
}

// pairs compares, for every drop step (a search repeating the previous
// step's query with the previous step's memory: the fact that search found
// was not filed), the memory term of the drop's memory with that of the
// next step's memory, which files it (when the next step is not a drop
// too): the same trajectory one step later, so the two memories differ by
// the fact, and P(gold | mem) of a scorer that ranks memories by what they
// hold is higher for the second. It prints, per layout and k, how many pairs
// rank that way and the mean difference.
func pairs(path string) error {
	rows, err := readScored(path)
	if err != nil {
		return err
	}
	type at struct {
		ctx        string
		traj, step int
	}
	byStep := map[at]scored{}
	for _, r := range rows {
		byStep[at{r.Ctx, r.Traj, r.Step}] = r
	}
	type key struct {
		ctx string
		k   int
	}
	n, higher, diff := map[key]int{}, map[key]int{}, map[key]float64{}
	nObj, higherObj, diffObj := map[key]int{}, map[key]int{}, map[key]float64{}
	for _, r := range rows {
		if r.Kind != "drop" || r.Ctx == "history" || r.Ctx == "stepctx" {
			continue
		}
		next, ok := byStep[at{r.Ctx, r.Traj, r.Step + 1}]
		if !ok || next.Kind == "drop" {
			continue
		}
		for _, k := range []key{{r.Ctx, r.K}, {r.Ctx, 0}} {
			n[k]++
			diff[k] += next.P - r.P
			if next.P > r.P {
				higher[k]++
			}
			if !math.IsNaN(r.PObj) && !math.IsNaN(next.PObj) {
				nObj[k]++
				diffObj[k] += next.PObj - r.PObj
				if next.PObj > r.PObj {
					higherObj[k]++
				}
			}
		}
	}
	keys := make([]key, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].ctx != keys[j].ctx {
			return keys[i].ctx < keys[j].ctx
		}
		return keys[i].k < keys[j].k
	})
	fmt.Println("| layout | k | pairs | the filed memory scores higher | mean P(gold \\| filed) − P(gold \\| dropped) | per objective: pairs | higher | mean difference |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|")
	for _, k := range keys {
		ks := fmt.Sprint(k.k)
		if k.k == 0 {
			ks = "all"
		}
		fmt.Printf("| %s | %s | %d | %d (%.0f%%) | %+.4f | %d | %d (%.0f%%) | %+.4f |\n", k.ctx, ks, n[k], higher[k],
			100*float64(higher[k])/float64(n[k]), diff[k]/float64(n[k]),
			nObj[k], higherObj[k], 100*float64(higherObj[k])/float64(max(nObj[k], 1)), diffObj[k]/float64(max(nObj[k], 1)))
	}
	return nil
}

// matchEnds returns ends when the gold ids the sequence scores are the
// gold text's own tokenization, else nil.
func matchEnds(ends, goldIDs, whole []int) []int {
	if ends == nil || !slices.Equal(goldIDs, whole) {
		return nil
	}
	return ends
}

// copied prints, per context (the memory-term layouts and stepctx), k and
// objective number j, how often answer j's value ids are in the memory the
// row scores ("[j] value" in its last <mem> block) and the mean probability
// (geometric mean over the value's ids) of answer j in the gold when they
// are, when [j] holds another value, and when there is no [j].
func copied(path, tokPath string) error {
	rows, err := readScored(path)
	if err != nil {
		return err
	}
	tk, err := tokenizer.Load(tokPath)
	if err != nil {
		return err
	}
	memOpen, err1 := oneID(tk, tokPath, "<mem>")
	memClose, err2 := oneID(tk, tokPath, "</mem>")
	sep, err3 := oneID(tk, tokPath, ";")
	maxK := 0
	for _, r := range rows {
		if r.Ctx != "history" { // the rows the table reads (below)
			maxK = max(maxK, len(r.Ends))
		}
	}
	markers, err4 := markerIDs(tk, tokPath, maxK)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	type key struct {
		ctx     string
		k, j    int
		holding string // in, other, absent
	}
	n, sum := map[key]int{}, map[key]float64{}
	for _, r := range rows {
		if r.Ctx == "history" || len(r.Ends) == 0 {
			continue
		}
		ctx, gold := r.IDs[:len(r.IDs)-r.N], r.IDs[len(r.IDs)-r.N:]
		lps := r.Logprobs[len(r.Logprobs)-r.N:]
		var mem []int // the last <mem> block's inside
		for i := len(ctx) - 1; i >= 0; i-- {
			if ctx[i] == memOpen {
				if e := slices.Index(ctx[i:], memClose); e > 0 {
					mem = ctx[i+1 : i+e]
				}
				break
			}
		}
		from := 0
		for jj, end := range r.Ends {
			j, marker := jj+1, markers[jj]
			span := gold[from:end]
			lp := lps[from:end]
			from = end
			a, ok := answerSpan(span, marker)
			if !ok {
				continue
			}
			value, vlp := span[a:], lp[a:]
			holding := "absent"
			if p := slices.Index(mem, marker); p >= 0 {
				holding = "other"
				if rest := mem[p+1:]; len(rest) >= len(value) && slices.Equal(rest[:len(value)], value) &&
					(len(rest) == len(value) || rest[len(value)] == sep) {
					holding = "in"
				}
			}
			kk := key{r.Ctx, r.K, j, holding}
			n[kk]++
			sum[kk] += geoMean(vlp)
		}
	}
	type row struct {
		ctx  string
		k, j int
	}
	seen := map[row]bool{}
	var order []row
	for kk := range n {
		if r := (row{kk.ctx, kk.k, kk.j}); !seen[r] {
			seen[r] = true
			order = append(order, r)
		}
	}
	sort.Slice(order, func(a, b int) bool {
		x, y := order[a], order[b]
		if x.ctx != y.ctx {
			return x.ctx < y.ctx
		}
		if x.k != y.k {
			return x.k < y.k
		}
		return x.j < y.j
	})
	cell := func(kk key) string {
		if n[kk] == 0 {
			return "— | 0"
		}
		return fmt.Sprintf("%.3f | %d", sum[kk]/float64(n[kk]), n[kk])
	}
	fmt.Println("| context | k | j | P(answer j) when the memory holds it | rows | another value under [j] | rows | no [j] | rows |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range order {
		fmt.Printf("| %s | %d | %d | %s | %s | %s |\n", r.ctx, r.k, r.j,
			cell(key{r.ctx, r.k, r.j, "in"}), cell(key{r.ctx, r.k, r.j, "other"}), cell(key{r.ctx, r.k, r.j, "absent"}))
	}
	return nil
}
