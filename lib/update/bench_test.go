package update

import (
	"testing"
	"time"

	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/rl"
)

// BenchmarkUpdateStep times one full MemPO optimizer step on the CPU — log-prob
// recomputation under each step's context, rl.Loss, backward, clipping and
// AdamW — over 8 trajectories (4 tasks × 2) of 2 steps of 128 context + 64
// output tokens (3072 tokens), on lib/model's 4-layer "demo" shape (vocab 2048, hidden 256).
// It reports tokens/s (context + output tokens through the model) and, as the
// reference measured in the same run, the ratio to a bare model.Backward over
// the same sequences: the overhead of the update stage (the second forward
// that the ratio needs before the backward, advantages, the optimizer).
// Run with -benchtime 1x.
const benchCtx = 128

func BenchmarkUpdateStep(b *testing.B) {
	cfg := &checkpoint.Config{
		Architecture: checkpoint.ArchQwen2, ModelType: "qwen2",
		VocabSize: 2048, HiddenSize: 256, IntermediateSize: 704, NumLayers: 4,
		NumHeads: 4, NumKVHeads: 2, HeadDim: 64, MaxPositions: 4096,
		RopeTheta: 1e6, RMSNormEps: 1e-6, TieWordEmbeddings: true, AttentionBias: true,
		InitializerRange: 0.02,
	}
	m, err := model.New(cfg, checkpoint.RandomInit(cfg, 1), nil)
	if err != nil {
		b.Fatal(err)
	}
	var rolls []records.Rollout
	var seqs [][]int
	var ws [][]float32
	n := 0
	for task := 0; task < 4; task++ {
		for g := 0; g < 2; g++ {
			ro := records.Rollout{TaskID: "t", Group: int64(task), Sample: int32(g), K: 1, Golds: [][]string{{"x"}}, RewardTask: float64(g % 2)}
			for st := 0; st < 2; st++ {
				ctx, out := make([]int32, benchCtx), make([]int32, 64)
				seq := make([]int, 0, benchCtx+64)
				for i := range ctx {
					ctx[i] = int32((n*7919 + i*31) % 2048)
					seq = append(seq, int(ctx[i]))
				}
				for i := range out {
					out[i] = int32((n*104729 + i*17) % 2048)
					seq = append(seq, int(out[i]))
				}
				n++
				lp, err := m.LogProbs([][]int{seq})
				if err != nil {
					b.Fatal(err)
				}
				ro.Steps = append(ro.Steps, records.Step{ContextIDs: ctx, OutputIDs: out, Logprobs: lp[0][benchCtx:], MemStart: 0, MemEnd: 16,
					RMem: records.Ptr(float64(g) / 10)})
				w := make([]float32, len(seq))
				for i := benchCtx; i < len(seq); i++ {
					w[i] = 1e-3
				}
				seqs, ws = append(seqs, seq), append(ws, w)
			}
			rolls = append(rolls, ro)
		}
	}
	batch, err := Prepare(rolls, PrepareOptions{Vocab: 2048, RL: true, Adv: rl.DefaultAdvConfig()})
	if err != nil {
		b.Fatal(err)
	}
	ucfg := DefaultConfig()
	ucfg.Loss.KLCoef = 0
	ucfg.MicroTokens = 2048
	tr, err := NewTrainer(m, batch, ucfg)
	if err != nil {
		b.Fatal(err)
	}
	tokens := 0
	for _, s := range seqs {
		tokens += len(s)
	}
	plan := Plan{NTraj: len(batch.Trajs), Epochs: 1}

	// Reference: the bare backward over the same sequences, packed per
	// trajectory as the update packs them (second of two runs: the first
	// allocates the gradients). A warm-up step does the same for the update.
	var ref time.Duration
	for rep := 0; rep < 2; rep++ {
		start := time.Now()
		for i := 0; i < len(seqs); i += 2 {
			if _, _, err := m.Backward(seqs[i:i+2], ws[i:i+2]); err != nil {
				b.Fatal(err)
			}
		}
		ref = time.Since(start)
	}
	m.ZeroGrads()
	if _, err := tr.Step(plan, 0, 1); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := tr.Step(plan, 0, 1); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(tokens)/el.Seconds(), "tokens/s")
	b.ReportMetric(float64(batch.Tokens)/el.Seconds(), "out-tokens/s")
	b.ReportMetric(el.Seconds()/ref.Seconds(), "x-backward")
}
