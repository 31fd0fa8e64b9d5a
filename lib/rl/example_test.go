package rl_test

import (
	"fmt"
	"math"

	"github.com/mempo/mempo/lib/rl"
)

// Example is the path the update command follows: rewards → advantages →
// per-token advantages → loss and per-token coefficients. Two rollouts of
// one task, each with two steps of three generated tokens (four at the second
// step of the second rollout) whose first two
// tokens are the <mem> span. Log-probs equal the rollout's (ratio 1) and
// the reference's (KL 0), so the loss is −Σ w·A.
//
// By hand: A^T = ±0.5/(√0.5 + 1e-6) = ±0.7071. The R^M pool {0.2, 0.4, 0.1}
// has mean 0.2333 and unbiased std 0.1528, so A^M = −0.2182, 1.0911,
// −0.8729 (and 0 for the NaN block). Trajectory 0 has 6 tokens, so w = 1/12
// and its step-1 <mem> tokens get −(0.7071 + 1.0911)/12 = −0.1498. The
// loss is (−(2·0.4889 + 0.7071 + 2·1.7982 + 0.7071)/6 + (2·1.5800 +
// 0.7071 + 4·0.7071)/7)/2 = (−0.9981 + 0.9565)/2 = −0.0208.
func Example() {
	rewards := []rl.TrajReward{
		{ID: "q1/0", Task: "q1", RT: 1, RM: []float64{0.2, 0.4}},
		{ID: "q1/1", Task: "q1", RT: 0, RM: []float64{0.1, math.NaN()}}, // no R^M for its last block
	}
	acfg := rl.DefaultAdvConfig()
	adv, err := acfg.ComputeAdvantages(rewards)
	if err != nil {
		panic(err)
	}
	var batch []rl.TrajInput
	for i := range rewards {
		tr := rl.TrajInput{ID: rewards[i].ID}
		for t := 0; t < 2; t++ {
			lp := []float32{-0.5, -1, -2, -0.1}[:3+i*t] // from the model, under the step's exact context
			a, err := acfg.TokenAdvantages(nil, len(lp), 0, 2, adv.Task[i], adv.Mem[i][t])
			if err != nil {
				panic(err)
			}
			tr.Steps = append(tr.Steps, rl.StepInput{Logp: lp, OldLogp: lp, RefLogp: lp, Adv: a})
		}
		batch = append(batch, tr)
	}
	out, err := rl.DefaultLossConfig().Loss(batch, nil) // nil: the whole batch is one shard
	if err != nil {
		panic(err)
	}
	// out.Coef[i][t][k] is ∂loss/∂logp of token k of step t of trajectory i:
	// backpropagate Σ Coef·logp through the model.
	out.Metrics.SetAdvantageStats(adv.Stats)
	fmt.Printf("A^T %.4f %.4f\n", adv.Task[0], adv.Task[1])
	fmt.Printf("A^M %.4f %.4f %.4f %.4f\n", adv.Mem[0][0], adv.Mem[0][1], adv.Mem[1][0], adv.Mem[1][1])
	fmt.Printf("coef of traj 0 step 1: %.4f %.4f %.4f\n", out.Coef[0][1][0], out.Coef[0][1][1], out.Coef[0][1][2])
	fmt.Printf("loss %.4f tokens %d\n", out.Metrics.Loss, out.Metrics.Tokens)
	// Output:
	// A^T 0.7071 -0.7071
	// A^M -0.2182 1.0911 -0.8729 0.0000
	// coef of traj 0 step 1: -0.1498 -0.1498 -0.0589
	// loss -0.0208 tokens 13
}
