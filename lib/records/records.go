// Package records defines the rows of every file that passes between mempo
// stages — rollouts (one trajectory per row), update metrics (one optimizer
// step per row) and scores (one metric of one run, data source and objective
// count per row) — and reads and writes them as Parquet (parquet-go, standard
// LIST encoding, readable by pyarrow) or JSONL, chosen by file extension.
//
// docs/formats.md documents these schemas column by column; keep the two in
// step. Readers validate every row and report a bad one by file, 1-based row
// number and field.
package records

import (
	"fmt"
	"math"
	"slices"
)

// Rollout is one trajectory: one row of a rollouts file.
type Rollout struct {
	TaskID     string     `parquet:"task_id" json:"task_id"`
	DataSource string     `parquet:"data_source" json:"data_source"`
	K          int32      `parquet:"k" json:"k"`                     // number of objectives
	Prompt     string     `parquet:"prompt" json:"prompt,omitempty"` // the k questions as put to the policy
	Questions  []string   `parquet:"questions,list" json:"questions"`
	Golds      [][]string `parquet:"golds,list" json:"golds"` // k gold alias lists, in question order
	Group      int64      `parquet:"group" json:"group"`      // one id per task within a rollout batch; GRPO groups by it
	Sample     int32      `parquet:"sample" json:"sample"`    // 0..G-1 within the group
	Policy     string     `parquet:"policy" json:"policy"`    // checkpoint id of the policy that sampled it
	Keep       string     `parquet:"keep" json:"keep"`        // context knob: "1" (MemPO), "all" (full history), or a number
	Seed       int64      `parquet:"seed" json:"seed"`
	// Sampling settings the trajectory was drawn with (0 temperature: greedy;
	// top_p 1 and top_k 0: filters off).
	Temperature float64 `parquet:"temperature" json:"temperature"`
	TopP        float64 `parquet:"top_p" json:"top_p"`
	TopK        int32   `parquet:"top_k" json:"top_k"`
	Steps       []Step  `parquet:"steps,list" json:"steps"`

	Answer   string   `parquet:"answer" json:"answer"`             // raw text of the final step's last <answer>, "" when none
	Answers  []string `parquet:"answers,list" json:"answers"`      // Answer split on ";" and trimmed
	FormatOK bool     `parquet:"format_ok" json:"format_ok"`       // every step well formed and exactly k answers
	Failure  string   `parquet:"failure" json:"failure,omitempty"` // "" or why the episode ended badly (see docs/formats.md)

	RewardTask float64   `parquet:"reward_task" json:"reward_task"` // R^T
	EM         []float64 `parquet:"em,list" json:"em"`              // per objective, 0 or 1
	F1         []float64 `parquet:"f1,list" json:"f1"`              // per objective, 0..1

	Turns       int32   `parquet:"turns" json:"turns"`
	TotalTokens int64   `parquet:"total_tokens" json:"total_tokens"` // Σ over steps of context + output tokens
	PeakTokens  int64   `parquet:"peak_tokens" json:"peak_tokens"`   // max over steps of context + output tokens
	WallS       float64 `parquet:"wall_s" json:"wall_s"`
}

// Step is one policy turn of a trajectory: the exact context it saw, what it
// generated, and what the environment did with it.
type Step struct {
	Index      int32     `parquet:"index" json:"index"`
	ContextIDs []int32   `parquet:"context_ids,list" json:"context_ids"` // token ids of the prompt the policy saw
	OutputIDs  []int32   `parquet:"output_ids,list" json:"output_ids"`   // sampled token ids
	Logprobs   []float32 `parquet:"logprobs,list" json:"logprobs"`       // policy log-prob of each output id at temperature 1, no filters (the ratio's old log-prob)
	// SampleLogprobs is the log-prob of each output id under the distribution
	// it was drawn from (temperature, top-k, top-p applied; 0 when greedy).
	SampleLogprobs []float32 `parquet:"sample_logprobs,list" json:"sample_logprobs,omitempty"`
	MemStart       int32     `parquet:"mem_start" json:"mem_start"` // token span of the <mem> content in output_ids, [start,end); -1 when none
	MemEnd         int32     `parquet:"mem_end" json:"mem_end"`
	Action         string    `parquet:"action" json:"action"` // "search", "answer" or "invalid"
	Query          string    `parquet:"query" json:"query,omitempty"`
	DocIDs         []string  `parquet:"doc_ids,list" json:"doc_ids"`
	Finish         string    `parquet:"finish" json:"finish,omitempty"` // "stop" or "length"
	// ObsIDs are the ids of the observation that answered the step (empty
	// when none): with the output ids they let lib/agent's CheckRecord
	// rebuild every later context from the file alone.
	ObsIDs []int32 `parquet:"obs_ids,list" json:"obs_ids,omitempty"`

	ContextTokens int32 `parquet:"context_tokens" json:"context_tokens"`
	OutputTokens  int32 `parquet:"output_tokens" json:"output_tokens"`

	// Memory reward terms; null when the step has no <mem> or they were not
	// computed. RMem = PGoldMem − PGoldHist.
	PGoldMem  *float64 `parquet:"p_gold_mem,optional" json:"p_gold_mem"`
	PGoldHist *float64 `parquet:"p_gold_hist,optional" json:"p_gold_hist"`
	RMem      *float64 `parquet:"r_mem,optional" json:"r_mem"`
	// The same terms per objective, when the memory reward was scored per
	// objective (mempo-rollout --score-per-objective): P(gold_j | q, mem_t)
	// and P(gold_j | q, s_<t) of each objective j, whose means are
	// PGoldMem and PGoldHist. Empty otherwise.
	PGoldMemObj  []float64 `parquet:"p_gold_mem_obj,list" json:"p_gold_mem_obj,omitempty"`
	PGoldHistObj []float64 `parquet:"p_gold_hist_obj,list" json:"p_gold_hist_obj,omitempty"`

	// Readable text, written by --jsonl copies; usually empty in Parquet.
	ContextText string `parquet:"context_text" json:"context_text,omitempty"`
	OutputText  string `parquet:"output_text" json:"output_text,omitempty"`
	InfoText    string `parquet:"info_text" json:"info_text,omitempty"` // the <information> the environment returned
}

// Update is one optimizer step of mempo-update: one row of a metrics file.
type Update struct {
	Step            int64   `parquet:"step" json:"step"`
	Epoch           int32   `parquet:"epoch" json:"epoch"`
	Policy          string  `parquet:"policy" json:"policy"` // checkpoint id after this step
	Loss            float64 `parquet:"loss" json:"loss"`
	PGLoss          float64 `parquet:"pg_loss" json:"pg_loss"`
	PGClipfrac      float64 `parquet:"pg_clipfrac" json:"pg_clipfrac"`
	PGClipfracLower float64 `parquet:"pg_clipfrac_lower" json:"pg_clipfrac_lower"` // verl's name: dual clip active
	PPOKL           float64 `parquet:"ppo_kl" json:"ppo_kl"`                       // verl's name: mean old_logp − logp
	// ApproxKL is the k3 estimate of KL(rollout policy ‖ policy) on the
	// step's mini-batch before the step: the mean over loss tokens of
	// r − 1 − log r, r = π/π_old (what mempo-update --target-kl bounds).
	ApproxKL float64 `parquet:"approx_kl" json:"approx_kl"`
	// StopApproxKL is set on the last row of an update that --target-kl
	// stopped early: the approximate KL of the next mini-batch, which
	// passed 1.5 × the target, so that neither it nor any later step of
	// the plan was taken. Null otherwise.
	StopApproxKL *float64 `parquet:"stop_approx_kl,optional" json:"stop_approx_kl"`
	// Metrics a run may not compute are null there, not 0: KL without a
	// reference (--kl-coef 0), entropy without --entropy-metric, the memory
	// reward and advantage without memory blocks (GRPO).
	KL               *float64 `parquet:"kl,optional" json:"kl"`
	Entropy          *float64 `parquet:"entropy,optional" json:"entropy"`
	GradNorm         float64  `parquet:"grad_norm" json:"grad_norm"`
	LR               float64  `parquet:"lr" json:"lr"`
	AdvTaskMean      float64  `parquet:"adv_task_mean" json:"adv_task_mean"`
	AdvTaskStd       float64  `parquet:"adv_task_std" json:"adv_task_std"`
	AdvMemMean       *float64 `parquet:"adv_mem_mean,optional" json:"adv_mem_mean"`
	AdvMemStd        *float64 `parquet:"adv_mem_std,optional" json:"adv_mem_std"`
	RewardTaskMean   float64  `parquet:"reward_task_mean" json:"reward_task_mean"`
	RewardMemMean    *float64 `parquet:"reward_mem_mean,optional" json:"reward_mem_mean"`
	PeakTokensMean   float64  `parquet:"peak_tokens_mean" json:"peak_tokens_mean"` // mean peak tokens of the trajectories trained on
	Tokens           int64    `parquet:"tokens" json:"tokens"`                     // generated tokens that carried loss
	Trajectories     int64    `parquet:"trajectories" json:"trajectories"`
	WallS            float64  `parquet:"wall_s" json:"wall_s"`
	LogprobDriftMean float64  `parquet:"logprob_drift_mean" json:"logprob_drift_mean"` // mean |recomputed − rollout| log-prob
	LogprobDriftMax  float64  `parquet:"logprob_drift_max" json:"logprob_drift_max"`
	PeakGPUBytes     int64    `parquet:"peak_gpu_bytes" json:"peak_gpu_bytes"` // device memory in use at its highest so far in the run (0 on the CPU)
}

// Score is one metric of one run, data source and objective count: one row
// of a scores file (long form).
type Score struct {
	Run        string  `parquet:"run" json:"run"`
	DataSource string  `parquet:"data_source" json:"data_source"`
	K          int32   `parquet:"k" json:"k"`
	Metric     string  `parquet:"metric" json:"metric"`
	Value      float64 `parquet:"value" json:"value"`
	CILow      float64 `parquet:"ci_low" json:"ci_low"` // bootstrap 95% interval
	CIHigh     float64 `parquet:"ci_high" json:"ci_high"`
	N          int64   `parquet:"n" json:"n"` // trajectories the value averages over
}

// FieldError names the field of a row that is invalid.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Msg }

func bad(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Validate checks the invariants every stage may rely on.
func (r *Rollout) Validate() error {
	if r.TaskID == "" {
		return bad("task_id", "is empty")
	}
	if r.K < 1 {
		return bad("k", "must be at least 1, got %d", r.K)
	}
	if len(r.Golds) != int(r.K) {
		return bad("golds", "has %d gold lists for k = %d", len(r.Golds), r.K)
	}
	for i, g := range r.Golds {
		if len(g) == 0 {
			return bad("golds", "objective %d has no gold answer", i+1)
		}
	}
	if len(r.Questions) != 0 && len(r.Questions) != int(r.K) {
		return bad("questions", "has %d questions for k = %d", len(r.Questions), r.K)
	}
	if r.Sample < 0 {
		return bad("sample", "is negative (%d)", r.Sample)
	}
	for i, xs := range [][]float64{r.EM, r.F1} {
		name := [...]string{"em", "f1"}[i]
		if len(xs) != 0 && len(xs) != int(r.K) {
			return bad(name, "has %d values for k = %d", len(xs), r.K)
		}
		for _, x := range xs {
			if !finite(x) || x < 0 || x > 1 {
				return bad(name, "value %v is outside [0, 1]", x)
			}
		}
	}
	if !finite(r.RewardTask) {
		return bad("reward_task", "is %v", r.RewardTask)
	}
	if !finite(r.WallS) || r.WallS < 0 {
		return bad("wall_s", "is %v", r.WallS)
	}
	if r.Turns < 0 {
		return bad("turns", "is negative (%d)", r.Turns)
	}
	if r.TotalTokens < 0 || r.PeakTokens < 0 {
		return bad("total_tokens", "token counts are negative (total %d, peak %d)", r.TotalTokens, r.PeakTokens)
	}
	if r.PeakTokens > r.TotalTokens {
		return bad("peak_tokens", "%d exceeds total_tokens %d", r.PeakTokens, r.TotalTokens)
	}
	for i := range r.Steps {
		if err := r.Steps[i].validate(); err != nil {
			err.Field = fmt.Sprintf("steps[%d].%s", i, err.Field)
			return err
		}
	}
	return nil
}

func (s *Step) validate() *FieldError {
	if len(s.Logprobs) != 0 && len(s.Logprobs) != len(s.OutputIDs) {
		return bad("logprobs", "has %d values for %d output ids", len(s.Logprobs), len(s.OutputIDs))
	}
	for _, lp := range s.Logprobs {
		if math.IsNaN(float64(lp)) || lp > 0 {
			return bad("logprobs", "value %v is not a log-probability", lp)
		}
	}
	if len(s.SampleLogprobs) != 0 && len(s.SampleLogprobs) != len(s.OutputIDs) {
		return bad("sample_logprobs", "has %d values for %d output ids", len(s.SampleLogprobs), len(s.OutputIDs))
	}
	for _, lp := range s.SampleLogprobs {
		if math.IsNaN(float64(lp)) || lp > 0 {
			return bad("sample_logprobs", "value %v is not a log-probability", lp)
		}
	}
	switch {
	case s.MemStart == -1 && s.MemEnd == -1:
	case s.MemStart < 0 || s.MemEnd < s.MemStart:
		return bad("mem_start", "span [%d, %d) is invalid (use -1, -1 for none)", s.MemStart, s.MemEnd)
	case len(s.OutputIDs) > 0 && int(s.MemEnd) > len(s.OutputIDs):
		return bad("mem_end", "%d is past the %d output ids", s.MemEnd, len(s.OutputIDs))
	}
	if s.ContextTokens < 0 || s.OutputTokens < 0 {
		return bad("context_tokens", "token counts are negative")
	}
	for i, p := range []*float64{s.PGoldMem, s.PGoldHist} {
		if p != nil && (!finite(*p) || *p < 0 || *p > 1) {
			return bad([...]string{"p_gold_mem", "p_gold_hist"}[i], "value %v is not a probability", *p)
		}
	}
	if s.RMem != nil && (!finite(*s.RMem) || *s.RMem < -1 || *s.RMem > 1) {
		return bad("r_mem", "value %v is outside [-1, 1]", *s.RMem)
	}
	if len(s.PGoldMemObj) != len(s.PGoldHistObj) {
		return bad("p_gold_hist_obj", "has %d objectives where p_gold_mem_obj has %d", len(s.PGoldHistObj), len(s.PGoldMemObj))
	}
	for i, ps := range [][]float64{s.PGoldMemObj, s.PGoldHistObj} {
		for _, p := range ps {
			if !finite(p) || p < 0 || p > 1 {
				return bad([...]string{"p_gold_mem_obj", "p_gold_hist_obj"}[i], "value %v is not a probability", p)
			}
		}
	}
	return nil
}

// Validate checks an update metrics row.
func (u *Update) Validate() error {
	if u.Step < 0 {
		return bad("step", "is negative (%d)", u.Step)
	}
	return nil
}

// Validate checks a scores row.
func (s *Score) Validate() error {
	if s.Run == "" {
		return bad("run", "is empty")
	}
	if s.Metric == "" {
		return bad("metric", "is empty")
	}
	return nil
}

// PGoldMemMean is the mean of the defined p_gold_mem values of the steps, and
// whether there was any.
func (r *Rollout) PGoldMemMean() (float64, bool) {
	t, n := 0.0, 0
	for i := range r.Steps {
		if p := r.Steps[i].PGoldMem; p != nil {
			t += *p
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return t / float64(n), true
}

// Repeats says whether step t's whole output is the same ids as step t−1's
// (neither empty): under --keep 1 the agent wrote the same memory and took
// the same action again, which in the demo's world is a fact found, left
// out of the memory, and searched for again. mempo-score's loops metric
// and mempo-update's --mem-skip-repeats read it.
func (r *Rollout) Repeats(t int) bool {
	return t > 0 && t < len(r.Steps) && len(r.Steps[t].OutputIDs) > 0 && slices.Equal(r.Steps[t].OutputIDs, r.Steps[t-1].OutputIDs)
}

// Ptr returns a pointer to x, for the optional float columns.
func Ptr(x float64) *float64 { return &x }

// IDs is a Step's token ids (int32) as the []int the tokenizer and the
// model take; nil when there are none.
func IDs(ids []int32) []int {
	if len(ids) == 0 {
		return nil
	}
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// IDs32 is token ids as a Step stores them (int32), from the []int the
// tokenizer and the model use.
func IDs32(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}
