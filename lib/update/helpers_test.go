package update

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/records"
)

// tinyConfig is a Qwen2 small enough for finite differences.
func tinyConfig() *checkpoint.Config {
	return &checkpoint.Config{
		Architecture: checkpoint.ArchQwen2, ModelType: "qwen2",
		VocabSize: 24, HiddenSize: 16, IntermediateSize: 24, NumLayers: 2,
		NumHeads: 2, NumKVHeads: 1, HeadDim: 8, MaxPositions: 128,
		RopeTheta: 10000, RMSNormEps: 1e-6, TieWordEmbeddings: true, AttentionBias: true,
		InitializerRange: 0.02, EOSTokenIDs: []int{23},
	}
}

// tinyTensors are parameters large enough that the network is far from
// linear (RandomInit's 0.02 would make every distribution nearly uniform).
func tinyTensors(cfg *checkpoint.Config, seed uint64) map[string][]float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	out := map[string][]float32{}
	for _, s := range cfg.Tensors() {
		n := 1
		for _, d := range s.Shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			switch {
			case strings.Contains(s.Name, "norm"):
				v[i] = float32(1 + 0.1*r.NormFloat64())
			case strings.Contains(s.Name, "embed"):
				v[i] = float32(r.NormFloat64())
			default:
				v[i] = float32(0.3 * r.NormFloat64())
			}
		}
		out[s.Name] = v
	}
	return out
}

func tinyModel(t testing.TB, seed uint64) *model.Model {
	t.Helper()
	cfg := tinyConfig()
	m, err := model.New(cfg, tinyTensors(cfg, seed), nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// synth describes a synthetic batch: tasks × G rollouts of steps steps,
// each with a 2-token <mem> span at the start of the output.
type synth struct {
	tasks, G, steps int
	rt              func(task, g int) float64
	rm              func(task, g, step int) *float64 // nil = undefined
	noise           float64                          // |old − current| log-prob noise
	seed            uint64
}

// rollouts builds rollouts whose stored log-probs are m's own log-probs
// under each step's context (plus noise), as a rollout engine sampling from
// m would have stored.
func (s synth) rollouts(t testing.TB, m *model.Model) []records.Rollout {
	t.Helper()
	r := rand.New(rand.NewPCG(s.seed, 3))
	V := m.VocabSize()
	var out []records.Rollout
	for task := 0; task < s.tasks; task++ {
		for g := 0; g < s.G; g++ {
			ro := records.Rollout{TaskID: "t" + string(rune('a'+task)), K: 1, Golds: [][]string{{"x"}}, Group: int64(task), Sample: int32(g)}
			if s.rt != nil {
				ro.RewardTask = s.rt(task, g)
			}
			for st := 0; st < s.steps; st++ {
				ctx := make([]int32, 3+r.IntN(5))
				for i := range ctx {
					ctx[i] = int32(r.IntN(V))
				}
				outIDs := make([]int32, 3+r.IntN(4))
				for i := range outIDs {
					outIDs[i] = int32(r.IntN(V))
				}
				step := records.Step{Index: int32(st), ContextIDs: ctx, OutputIDs: outIDs, MemStart: 0, MemEnd: 2,
					ContextTokens: int32(len(ctx)), OutputTokens: int32(len(outIDs))}
				if s.rm != nil {
					step.RMem = s.rm(task, g, st)
				}
				seq := make([]int, 0, len(ctx)+len(outIDs))
				for _, x := range ctx {
					seq = append(seq, int(x))
				}
				for _, x := range outIDs {
					seq = append(seq, int(x))
				}
				lp, err := m.LogProbs([][]int{seq})
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range lp[0][len(ctx):] {
					v := float64(x) + s.noise*(2*r.Float64()-1)
					step.Logprobs = append(step.Logprobs, float32(math.Min(v, 0)))
				}
				ro.Steps = append(ro.Steps, step)
				ro.TotalTokens += int64(len(seq))
				ro.PeakTokens = max(ro.PeakTokens, int64(len(seq)))
			}
			ro.Turns = int32(s.steps)
			out = append(out, ro)
		}
	}
	return out
}

func maxAbs(v []float32) float64 {
	m := 0.0
	for _, x := range v {
		m = math.Max(m, math.Abs(float64(x)))
	}
	return m
}

func allTrajs(b *Batch) []int {
	idx := make([]int, len(b.Trajs))
	for i := range idx {
		idx[i] = i
	}
	return idx
}
