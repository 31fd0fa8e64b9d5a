// Package report turns rollouts and update metrics into evaluation results:
// per-run metrics with bootstrap confidence intervals (the scores file), a
// markdown table laid out like the MemPO paper's Table 1, and PNG plots.
package report

import (
	"cmp"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/mempo/mempo/lib/qa"
	"github.com/mempo/mempo/lib/records"
)

// Metric names, in the order tables list them.
const (
	MetricEM            = "em"
	MetricF1            = "f1"
	MetricSubEM         = "sub_em"
	MetricAllCorrect    = "all_correct"
	MetricFormatFailure = "format_failure"
	MetricRewardTask    = "reward_task"
	MetricTurns         = "turns"
	MetricTotalTokens   = "total_tokens"
	MetricPeakTokens    = "peak_tokens"
	MetricPGoldMem      = "p_gold_mem"
	MetricRMem          = "r_mem"
	MetricLoops         = "loops"
)

// Metrics lists every metric in table order.
var Metrics = []string{MetricEM, MetricF1, MetricSubEM, MetricAllCorrect, MetricFormatFailure, MetricRewardTask,
	MetricTurns, MetricTotalTokens, MetricPeakTokens, MetricPGoldMem, MetricRMem, MetricLoops}

// Options control scoring.
type Options struct {
	// Style is whose scripts EM, sub-EM and F1 follow (qa.SearchR1 by default).
	Style qa.Style
	// SumObjectives reports EM, F1 and sub-EM as the sum over the k
	// objectives (MEM1's 0..k scale) instead of the mean ×100.
	SumObjectives bool
	Resamples     int    // bootstrap resamples; 0 means 1000
	Seed          uint64 // bootstrap seed
}

// Key identifies one cell of results.
type Key struct {
	Run        string
	DataSource string
	K          int32
}

// Trajectory is the per-trajectory value of every metric; a metric missing
// from the map is undefined for the trajectory (e.g. no memory block).
type Trajectory map[string]float64

// ScoreRollout computes the per-trajectory metrics of one rollout. The answers
// come only from the rollout's final answer text, split on ";".
func ScoreRollout(r *records.Rollout, opt Options) Trajectory {
	answers, _ := qa.SplitAnswers(r.Answer, len(r.Golds))
	s := qa.ScoreStyle(answers, r.Golds, opt.Style)
	scale := func(xs []float64) float64 {
		if opt.SumObjectives {
			t := 0.0
			for _, x := range xs {
				t += x
			}
			return t
		}
		return 100 * qa.Mean(xs)
	}
	t := Trajectory{
		MetricEM:            scale(s.EM),
		MetricF1:            scale(s.F1),
		MetricSubEM:         scale(s.SubEM),
		MetricAllCorrect:    b100(s.AllCorrect),
		MetricFormatFailure: b100(!r.FormatOK),
		MetricRewardTask:    r.RewardTask,
		MetricTurns:         float64(r.Turns),
		MetricTotalTokens:   float64(r.TotalTokens),
		MetricPeakTokens:    float64(r.PeakTokens),
		MetricLoops:         b100(Loops(r)),
	}
	if p, ok := r.PGoldMemMean(); ok {
		t[MetricPGoldMem] = p
	}
	sum, n := 0.0, 0
	for i := range r.Steps {
		if x := r.Steps[i].RMem; x != nil {
			sum += *x
			n++
		}
	}
	if n > 0 {
		t[MetricRMem] = sum / float64(n)
	}
	return t
}

// loopRepeats is how many steps in a row with the same output make a loop.
const loopRepeats = 3

// Loops says whether the agent got stuck: loopRepeats steps in a row whose
// whole output (memory, thought and action) is the same ids
// (records.Rollout.Repeats). Under --keep 1 such steps see the same context
// again (the same memory, the same search, the same results), so a greedy
// policy repeats them to the turn limit.
func Loops(r *records.Rollout) bool {
	run := 1
	for t := 1; t < len(r.Steps); t++ {
		if !r.Repeats(t) {
			run = 1
		} else if run++; run >= loopRepeats {
			return true
		}
	}
	return false
}

func b100(b bool) float64 {
	if b {
		return 100
	}
	return 0
}

// Accumulator collects per-trajectory metrics by run, data source and k. It
// keeps only a few numbers per trajectory, so rollouts can be streamed.
type Accumulator struct {
	opt    Options
	runs   []string
	values map[Key]map[string][]float64
}

// NewAccumulator starts an empty accumulator.
func NewAccumulator(opt Options) *Accumulator {
	if opt.Resamples <= 0 {
		opt.Resamples = 1000
	}
	return &Accumulator{opt: opt, values: map[Key]map[string][]float64{}}
}

// Add scores one rollout of run.
func (a *Accumulator) Add(run string, r *records.Rollout) {
	if !slices.Contains(a.runs, run) {
		a.runs = append(a.runs, run)
	}
	k := Key{run, r.DataSource, r.K}
	m := a.values[k]
	if m == nil {
		m = map[string][]float64{}
		a.values[k] = m
	}
	for name, v := range ScoreRollout(r, a.opt) {
		m[name] = append(m[name], v)
	}
}

// Runs lists the runs in the order they were first added.
func (a *Accumulator) Runs() []string { return a.runs }

// Scores returns one row per (run, data source, k, metric) with a defined
// value: the mean, its bootstrap 95% percentile interval and n. Rows are
// ordered by run (first-added first), data source, k and metric.
func (a *Accumulator) Scores() []records.Score {
	keys := make([]Key, 0, len(a.values))
	for k := range a.values {
		keys = append(keys, k)
	}
	runIdx := func(r string) int { return slices.Index(a.runs, r) }
	slices.SortFunc(keys, func(x, y Key) int {
		return cmp.Or(cmp.Compare(runIdx(x.Run), runIdx(y.Run)), cmp.Compare(x.DataSource, y.DataSource), cmp.Compare(x.K, y.K))
	})
	var out []records.Score
	for _, k := range keys {
		for _, name := range Metrics {
			xs := a.values[k][name]
			if len(xs) == 0 {
				continue
			}
			lo, hi := Bootstrap(xs, a.opt.Resamples, seedFor(a.opt.Seed, k, name))
			out = append(out, records.Score{Run: k.Run, DataSource: k.DataSource, K: k.K, Metric: name,
				Value: mean(xs), CILow: lo, CIHigh: hi, N: int64(len(xs))})
		}
	}
	return out
}

// seedFor derives a stream per cell, so a cell's interval does not depend on
// which other runs or files were scored alongside it.
func seedFor(seed uint64, k Key, metric string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(k.Run))
	h.Write([]byte{0})
	h.Write([]byte(k.DataSource))
	h.Write([]byte{0, byte(k.K), byte(k.K >> 8), 0})
	h.Write([]byte(metric))
	return seed ^ h.Sum64()
}

func mean(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// Bootstrap returns the percentile 95% interval of the mean of xs over
// resamples resamples with replacement, drawn from a PCG stream seeded with
// seed. One value (or all equal) gives an interval of width 0.
func Bootstrap(xs []float64, resamples int, seed uint64) (lo, hi float64) {
	n := len(xs)
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	rng := rand.New(rand.NewPCG(seed, 0x6d656d706f))
	means := make([]float64, resamples)
	for b := range means {
		t := 0.0
		for range n {
			t += xs[rng.IntN(n)]
		}
		means[b] = t / float64(n)
	}
	sort.Float64s(means)
	return quantile(means, 0.025), quantile(means, 0.975)
}

// quantile of sorted xs with linear interpolation (NumPy's default).
func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	i := int(math.Floor(pos))
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(i)
	return sorted[i] + f*(sorted[i+1]-sorted[i])
}
