// Package rl is the pure math of MemPO's learning stage, on plain Go slices:
// trajectory and memory advantages (GRPO group z-scores, paper Eq. 9 and
// docs/ARCHITECTURE.md), the memory reward helper (Eq. 4–5), verl's clipped
// policy loss with dual clip, the KL estimators k1/k2/k3, and the loss aggregation
// modes (Eq. 10 and verl's agg_loss) with the per-token derivatives
// dL/dlogp that the update stage feeds back through the model.
//
// The package knows nothing about models, tokenizers or files. The update
// command computes log-probs with lib/model, calls Loss here to get one
// coefficient per generated token, and backpropagates the weighted sum
// Σ coef_t · logp_t through the model (Example shows the whole path). A
// CUDA backend can mirror every function token by token; all arithmetic is
// done in float64, inputs and per-token outputs are float32.
//
// Conventions the callers must know:
//
//   - Std: the group z-scores use the unbiased std (N−1) by default, as
//     verl's GRPO (torch.std) does; the paper writes "std" without saying
//     which. StdPopulation is a knob. ε = 1e-6 is added to the std; a group
//     or pool whose values are all equal, or that has one member, gets
//     exactly 0 (verl would give a single sample score/(1+ε)).
//   - Non-finite rewards: NaN or ±Inf R^T, and ±Inf R^M, are an error naming
//     the trajectory by default (NonFiniteError); NonFiniteZero replaces
//     them by 0 and counts them. NaN R^M is not an error: it means "no
//     memory reward for this block" and leaves the block out of its pool.
//   - Shards: Loss weights each token by the aggregation's global
//     denominators (Denoms, from CountDenoms over the whole batch) and, for
//     the trajectory mode, by the trajectory's total token count
//     (TrajInput.Tokens when a shard holds only some of its steps). With
//     those passed in, each shard's coefficients equal the unsplit batch's
//     bit for bit, so summing the shards' gradients gives the batch
//     gradient; verl's dp_size factor does not apply because shards are
//     summed, not averaged.
//   - Entropy: its gradient needs the full distribution and is the model's
//     job: ∂Loss/∂H_t = −EntropyCoef·Weight_t.
package rl
