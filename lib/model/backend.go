package model

import "fmt"

// Tensor is a row-major float32 matrix owned by a Backend: host memory for the
// CPU backend, device memory for a GPU backend. The model never touches its
// elements directly; it only passes tensors back to the backend that made them.
// Every tensor is two-dimensional: vectors are 1×n, per-row scalars are n×1.
// A view (Backend.View, Backend.Reshape) shares storage with its parent.
type Tensor interface {
	Rows() int
	Cols() int
}

// AttnSeq places one sequence of an attention call. Its queries are rows
// [Q, Q+N) of q; its keys and values are rows [K, K+Past+N) of k and v, where
// the first Past rows come before the first query (a KV cache) and query i sees
// keys [K, K+Past+i] (causal). In training the sequences of a batch are packed
// back to back with no padding: Q = K = start of the sequence and Past = 0.
// In decoding, k and v are the KV cache and Past is the tokens already
// cached. Sequences never see each other's keys.
//
// A sequence may read its first PN keys from rows [P, P+PN) instead of
// [K, K+PN): a prompt that several sequences continue (a request's samples,
// the task prompt that a turn's contexts begin with) is cached once and
// each sequence keeps only its own rows [K+PN, K+Past+N) (Generate's
// cacheLayout). Keys [PN, Past+N) stay at rows K+j, so the rows a sequence
// writes are K+Past+i either way. The prefix comes before the queries
// (PN ≤ Past), so only the forward takes one.
type AttnSeq struct {
	Q, N, K, Past int
	P, PN         int
}

// keyRuns is where s's keys are, as copies into one run of rows from dst:
// rows [K, K+Past+N), or with a shared prefix its rows [P, P+PN) and then
// [K+PN, K+Past+N).
func keyRuns(s AttnSeq, dst int) []rowCopy {
	if s.PN == 0 {
		return []rowCopy{{dst: dst, src: s.K, n: s.Past + s.N}}
	}
	return []rowCopy{{dst: dst, src: s.P, n: s.PN}, {dst: dst + s.PN, src: s.K + s.PN, n: s.Past + s.N - s.PN}}
}

// checkPrefix panics where s reads a prefix it may not (AttnSeq).
func (s AttnSeq) checkPrefix() {
	if s.PN > 0 && (s.PN > s.Past || s.P < 0) {
		panic(fmt.Sprintf("model: attention sequence %+v: a shared prefix must come before the queries", s))
	}
}

// keyRow is the row of k and v that holds key j of s.
func (s AttnSeq) keyRow(j int) int {
	if j < s.PN {
		return s.P + j
	}
	return s.K + j
}

// AttnShape is the head layout of an attention call. q and out have
// Heads·HeadDim columns, head h in columns [h·HeadDim, (h+1)·HeadDim); k and v
// have KVHeads·HeadDim columns. Query head h reads key/value head
// h / (Heads/KVHeads): Hugging Face's repeat_kv repeats each kv head for a run
// of consecutive query heads. Scale multiplies the scores (1/√HeadDim).
type AttnShape struct {
	Heads, KVHeads, HeadDim int
	Scale                   float32
}

// SampleParams is how one row's next token is drawn. Temperature 0 is greedy
// (the first maximum). TopK ≤ 0 and TopP ≥ 1 (or ≤ 0) switch those filters off.
type SampleParams struct {
	Temperature float64
	TopP        float64
	TopK        int
}

// DefaultSampling draws from the model's own distribution: temperature 1,
// no top-p or top-k filter (what the RL ratio assumes of rollouts).
func DefaultSampling() SampleParams { return SampleParams{Temperature: 1, TopP: 1} }

// Sampled is one drawn token with two log-probabilities: LogProb under the
// model's own distribution (softmax of the raw logits, temperature 1, no
// filters), which is what the RL ratio needs; and SampleLogProb under the
// distribution it was actually drawn from (after temperature, top-k, top-p;
// 0 for greedy).
type Sampled struct {
	ID            int
	LogProb       float32
	SampleLogProb float32
}

// Backend is the seam between the model and the hardware. The model code
// (model.go, generate.go) is written once over this interface; the CPU backend
// (cpu.go) implements it with OpenBLAS and Go loops, and a CUDA backend
// implements it with cuBLASLt and its own kernels. Every operation acts on
// tensors of the same backend, in place on its first arguments, and must not
// retain its arguments. Operations may run asynchronously on a device; ToHost
// and Sample are the synchronization points.
//
// Naming: "dst +=" means the operation accumulates (gradients of weights,
// which are summed over layers, sequences and calls); every other output is
// overwritten.
type Backend interface {
	// Name identifies the backend ("cpu", "cuda").
	Name() string

	// Zeros allocates a rows×cols tensor of zeros.
	Zeros(rows, cols int) Tensor
	// Empty allocates a rows×cols tensor whose contents are unspecified, for
	// outputs an operation overwrites entirely (a GPU backend skips the
	// memset; the CPU backend returns zeros).
	Empty(rows, cols int) Tensor
	// FromHost copies len(data) = rows·cols values into a new tensor.
	FromHost(data []float32, rows, cols int) Tensor
	// ToHost copies t into dst (allocated when nil or too short) and returns it.
	ToHost(t Tensor, dst []float32) []float32
	// View is rows [row0, row0+rows) of t, sharing its storage.
	View(t Tensor, row0, rows int) Tensor
	// Reshape is t seen as rows×cols (same element count), sharing storage.
	Reshape(t Tensor, rows, cols int) Tensor
	// Copy copies src into dst (same shape).
	Copy(dst, src Tensor)
	// Fill sets every element of t to v.
	Fill(t Tensor, v float32)
	// GatherRows sets dst row i to src row rows[i].
	GatherRows(dst, src Tensor, rows []int)
	// ScatterRows sets dst row rows[i] to src row i (rows has one entry per
	// row of src and no repeats): one call appends a decoding step's keys
	// and values to every sequence's KV-cache slot.
	ScatterRows(dst, src Tensor, rows []int)
	// Free releases t early; using it afterwards is an error. Optional for
	// correctness (the CPU backend leaves it to the garbage collector).
	Free(t Tensor)

	// MatMul computes c = alpha·op(a)·op(b) + beta·c, op(x) = x or xᵀ. With
	// beta = 1 it accumulates (weight gradients). Linear layers keep weights
	// as Hugging Face stores them, [out, in], so y = x·Wᵀ is MatMul(y, x, W,
	// false, true, 1, 0), dx = dy·W and dW += dyᵀ·x.
	MatMul(c, a, b Tensor, transA, transB bool, alpha, beta float32)
	// Add computes dst += src (residual connections, gradient sums).
	Add(dst, src Tensor)
	// AddBias adds the 1×cols bias to every row of x.
	AddBias(x, bias Tensor)
	// SumRows computes dst += Σ_r x[r, :] into a 1×cols dst (bias gradients).
	SumRows(dst, x Tensor)

	// Embedding sets out row i to table row ids[i].
	Embedding(out, table Tensor, ids []int)
	// EmbeddingBackward computes dTable[ids[i]] += dOut[i] (repeated ids add up).
	EmbeddingBackward(dTable, dOut Tensor, ids []int)

	// RMSNorm normalizes each row of x over len(w) = cols: out = x·rstd·w with
	// rstd = 1/√(mean(x²)+eps), stored in the rows×1 rstd for the backward.
	// x may have a multiple of len(w) columns: each group of len(w) columns is
	// normalized on its own (Qwen3's per-head q/k norm).
	RMSNorm(out, rstd, x, w Tensor, eps float32)
	// RMSNormBackward computes dx (overwritten) and dw += from dy, the
	// forward's x, w and rstd. dx may alias dy.
	RMSNormBackward(dx, dw, dy, x, w, rstd Tensor)

	// RoPE rotates each head of x in place by the angle pos[row]·θ^(-2i/headDim)
	// on the pairs (i, i+headDim/2), Hugging Face's rotate_half convention.
	// inverse rotates by the negative angle: the backward of RoPE.
	RoPE(x Tensor, pos []int, headDim int, theta float64, inverse bool)

	// Attention is causal grouped-query attention with softmax in float32:
	// out (rows of q × Heads·HeadDim) and lse (rows of q × Heads), the
	// log-sum-exp of each row's scores, which the backward uses to rebuild the
	// probabilities without storing them. Rows of q not covered by seqs are
	// left untouched.
	Attention(out, lse, q, k, v Tensor, seqs []AttnSeq, shape AttnShape)
	// AttentionBackward computes dq (overwritten), dk and dv (overwritten)
	// from dout and the forward's q, k, v, out and lse. Past must be 0.
	AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse Tensor, seqs []AttnSeq, shape AttnShape)

	// Dropout sets dst = src·keep/(1−p) elementwise, where keep of element
	// i (row-major index) is a function of (seed, i) alone (see
	// dropoutKeep), identical on every backend: the same call on the
	// gradient is the dropout's backward. dst may alias src.
	Dropout(dst, src Tensor, p float32, seed uint64)

	// SwiGLU computes out = silu(gate)·up elementwise.
	SwiGLU(out, gate, up Tensor)
	// SwiGLUBackward computes dgate and dup (overwritten) from dout.
	SwiGLUBackward(dgate, dup, dout, gate, up Tensor)

	// TokenLogProbs computes, for each row r of logits with targets[r] ≥ 0,
	// lp[r] = logits[r, targets[r]] − logsumexp(logits[r, :]), and lse[r];
	// rows with a negative target get lp = 0. lp and lse are rows×1.
	TokenLogProbs(lp, lse, logits Tensor, targets []int)
	// TokenLogProbsBackward turns dL/dlp (one value per row, in dlp) into
	// dL/dlogits = dlp[r]·(onehot(target) − softmax(logits[r])), written into
	// dlogits, which may be logits itself (the logits are not needed after).
	TokenLogProbsBackward(dlogits, logits, lse Tensor, targets []int, dlp []float32)

	// Sample draws one token per row of logits with that row's params, using
	// the uniform number u[r] in [0, 1) as its only randomness (the caller
	// seeds it per row, so a row's draw does not depend on the batch).
	Sample(logits Tensor, params []SampleParams, u []float64) []Sampled
}
