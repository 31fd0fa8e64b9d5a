// Package rollout is the MemPO rollout engine: it runs G trajectories of the
// memory agent (lib/agent) per task against a policy and a retriever and
// turns each finished task into G rows of the rollouts file (lib/records),
// rewards included.
//
// The engine is continuous-batched. Every turn it gathers the contexts of all
// active trajectories and generates one step for all of them in a single
// Policy.Generate call; the G trajectories of a task that has not generated
// yet share their prompt, so they go in as one request with N = G and the
// prompt is prefilled once. It then runs the searches of every trajectory
// that asked for one in a single Searcher call (each distinct query once).
// While that call runs, every task whose G trajectories have all ended gets
// its memory rewards (teacher-forced prefill-only passes through
// Policy.LogProbs, batched across every task that ended in the same turn) and
// is handed to the caller; then the searching trajectories observe. The slots of ended
// trajectories are refilled from the queue at the start of the next turn, a
// whole task at a time (its G samples share their first prefill) as soon as G
// slots are free, even while other samples of the same tasks still run.
//
// Tokens in, tokens out: a step's output ids are the sampled ids, stored with
// their log-probs and never decoded and encoded again; the context of every
// step is built by lib/agent from the ids of earlier steps.
//
// Sampling is reproducible per (run seed, group, sample, turn): each request
// carries its own seed and lib/model draws a row's randomness from its
// request's seed alone, so which other trajectories share a batch — for
// instance after a resume that skips finished tasks — does not change what a
// trajectory samples.
package rollout

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/retrieval"
	"github.com/mempo/mempo/lib/rl"
	"github.com/mempo/mempo/lib/tasks"
)

// Policy is what the engine needs of a model. *model.Model satisfies it;
// Scripted is a stand-in for tests and benchmarks of the engine itself.
type Policy interface {
	Generate(reqs []model.Request, opts model.GenerateOptions) ([]*model.Generation, error)
	Scorer
}

// Scorer is what the memory reward needs of a model: the policy, or
// Engine.Scorer.
type Scorer interface {
	LogProbs(seqs [][]int) ([][]float32, error)
}

// suffixLogProbs is a Policy that can score only the positions from a start
// on (*model.Model: the LM head then runs on those rows alone); the memory
// reward needs the gold's few ids at the end of each sequence.
type suffixLogProbs interface {
	LogProbsFrom(seqs [][]int, from []int) ([][]float32, error)
}

// sharedLogProbs is a Policy that also runs each beginning that several
// sequences share once (*model.Model: a step's history sequence is the
// trajectory's longest one cut short plus the gold, so most of the memory
// reward's ids would otherwise be run again for every step); it packs its
// own forwards of about budget ids.
type sharedLogProbs interface {
	LogProbsShared(seqs [][]int, from []int, budget int) ([][]float32, int, error)
}

// Options are the engine's knobs besides the protocol. The protocol is the
// Engine's Agent's agent.Config: a step's token budget is its MaxStepTokens,
// and its EOSIDs end a step (kept in the step's output).
type Options struct {
	// GroupSize is G, the trajectories per task.
	GroupSize int
	// Batch is the most trajectories in flight (not yet ended) at once. The
	// slots of ended trajectories are refilled with whole tasks, whose G
	// samples share their first prefill, so it is raised to GroupSize when
	// smaller.
	Batch int
	// MaxContext is the most positions the policy supports
	// (max_position_embeddings). A step whose context plus the agent's
	// MaxStepTokens would pass it is not generated: the trajectory ends
	// there with failure context_overflow. 0: no limit.
	MaxContext int
	Sampling   model.SampleParams
	// Decode turns ids into text for the stop-string check; required.
	Decode func(ids []int) string
	// Seed is the run seed (see SampleSeed).
	Seed uint64
	// PolicyID is copied into every row (with the agent's Keep).
	PolicyID string
	// MemoryReward computes p_gold_mem, p_gold_hist and r_mem for every step
	// with a <mem> block.
	MemoryReward bool
	// TaskReward is R^T's kind (see records.Rollout.FinishReward): "" or
	// "exact" (1 when every objective exact-matches, the paper's), "em" or
	// "f1" (the mean over objectives: partial credit).
	TaskReward string
	// MemTokensPerCall bounds the tokens of one forward of the memory
	// reward (default: the policy's ForwardBudget, what a quarter of the
	// free memory holds; 16384 for a policy without one).
	MemTokensPerCall int
	// NoSharedPrefixes runs every memory-reward sequence from its first id
	// even when the policy can run shared beginnings once (benchmarks
	// compare the two; the rewards differ by float rounding only).
	NoSharedPrefixes bool
	// NoSharedPrefill prefills every prompt of a generation call from its
	// first id, even where it begins like another (a task's trajectories
	// share its prompt, every task the system prompt); the default runs a
	// shared beginning once (model.Generate). Benchmarks compare the two.
	NoSharedPrefill bool
	// GenTokensPerCall, when > 0, bounds the KV cache of one Generate call
	// in rows (each context once, less the beginnings it reads from
	// another's, and each sample's new tokens): a call's rows take their
	// new-token rows as they write them and are preempted and resumed
	// when none is free (model.GenerateOptions CacheLimit), and a turn
	// over it is split into several calls, packed as if each row wrote
	// what the run's steps so far suggest (expectedStepRows; a request is
	// never split). 0: the whole turn in one call, every sample's
	// MaxStepTokens reserved. What the split and preemption change in the
	// samples is float rounding only.
	GenTokensPerCall int
	// ForceSearchTurns, when > 0, forces the first 1..ForceSearchTurns steps
	// (drawn per task) of every trajectory to be searches, for benchmarks of the whole loop
	// with a policy that does not search by itself (random weights): see
	// forced.go. Rows of such a run are not samples of the policy.
	ForceSearchTurns int
	// Encode turns text into ids; required with ForceSearchTurns.
	Encode func(text string) []int
	// SyncRetrieval waits for a turn's searches before the memory rewards
	// and the rows of the tasks that ended in that turn, instead of running
	// them while the searcher works (the default). Benchmarks compare both.
	SyncRetrieval bool
}

// Job is one task with its group id (unique within the run).
type Job struct {
	Group int64
	Task  tasks.Task
}

// Stats are running totals of a Run.
type Stats struct {
	Tasks, TasksDone int
	Trajectories     int   // finished
	TrajectoryTurns  int   // Σ turns of the finished trajectories
	Steps            int   // generated steps
	GeneratedTokens  int64 // output ids
	ContextTokens    int64 // context ids of the generated steps
	Searches         int   // queries asked by trajectories
	SearchesRun      int   // distinct queries sent to the searcher (per turn)
	Turns            int   // engine turns (Generate calls)
	Wall             time.Duration
	Generate, Search time.Duration
	// SearchWait is the part of Search the engine spent blocked on it: the
	// rest overlapped the memory rewards and the host work of the turn.
	SearchWait           time.Duration
	Reward               time.Duration // memory-reward passes
	SearchCalls          int           // Searcher calls (one per turn with searches)
	MemSeqs, MemSeqsUniq int           // memory-reward sequences built, and run after dedup
	MemIDs, MemIDsRun    int           // ids of those run, and how many of them went through the model (shared beginnings once)
	// Prefill is the part of Generate until each call's first tokens were
	// sampled: the prompts' forward (and the first sampling).
	Prefill time.Duration
	// PromptIDs are the ids of the distinct prompts the Generate calls
	// prefilled, PromptIDsRun how many of them went through the model
	// (a prompt that begins like another continues its keys and values).
	PromptIDs, PromptIDsRun int64
	// GenerateCalls are the Generate calls (a turn split by
	// GenTokensPerCall makes several), CacheRows the KV-cache rows they
	// took in all (model.GenerateReport), CacheRowsMax the largest call's,
	// CacheRowsPeak the most any call had in use at once and Preempted the
	// times calls' rows gave back their cache to stay within the bound.
	GenerateCalls int
	CacheRows     int64
	CacheRowsMax  int
	CacheRowsPeak int
	Preempted     int64

	// While a turn's Generate call runs (Progress is called during it, as
	// tokens are sampled): the trajectories in flight and the tokens the
	// call has sampled so far (not yet in GeneratedTokens).
	InFlight      int
	PendingTokens int64
	RewardTaskSum float64 // Σ R^T of the finished trajectories
	GroupSize     int     // G, trajectories per task
}

// Fraction estimates how much of the run is done, counting the turns of
// trajectories still in flight: generated steps over the steps all
// trajectories will take, at the mean turns of the finished ones (maxTurns
// before any has finished, so the first estimate errs long). 0 when
// nothing is known.
func (s Stats) Fraction(maxTurns int) float64 {
	total := float64(s.Tasks * s.GroupSize)
	if total == 0 {
		return 0
	}
	if s.TasksDone == s.Tasks {
		return 1
	}
	per := float64(maxTurns)
	if s.Trajectories > 0 {
		per = float64(s.TrajectoryTurns) / float64(s.Trajectories)
	}
	if per <= 0 {
		return 0
	}
	return min(float64(s.Steps)/(total*per), 0.999)
}

// SearchShare is the share of wall time spent waiting for retrieval.
func (s Stats) SearchShare() float64 {
	if s.Wall <= 0 {
		return 0
	}
	return s.SearchWait.Seconds() / s.Wall.Seconds()
}

// Host is the wall time spent in none of generation, waiting for retrieval
// and the memory rewards: parsing, context building, rows, emit.
func (s Stats) Host() time.Duration {
	return max(s.Wall-s.Generate-s.SearchWait-s.Reward, 0)
}

// Shares are the shares of wall time in generation, waiting for
// retrieval, the memory rewards and host work (they sum to 1).
func (s Stats) Shares() (gen, search, reward, host float64) {
	w := s.Wall.Seconds()
	if w <= 0 {
		return 0, 0, 0, 0
	}
	return s.Generate.Seconds() / w, s.SearchWait.Seconds() / w, s.Reward.Seconds() / w, s.Host().Seconds() / w
}

// Engine runs rollouts. Agent, Policy and Searcher are required.
type Engine struct {
	Agent    *agent.Agent
	Policy   Policy
	Searcher retrieval.Searcher
	// Scorer, when set, teacher-forces the memory reward's sequences in
	// Policy's place: a separate reader of memories, with the policy's
	// tokenizer (its LogProbsFrom and LogProbsShared are used when it has
	// them, as the policy's are). Nil: the policy scores its own memories,
	// as in the paper.
	Scorer Scorer
	Opts   Options
	// Progress, when set, is called after every turn with the totals so far,
	// and during a turn's generation after every sampled token position.
	Progress func(Stats)
}

// mix64 is splitmix64's finalizer over a seed and a value: distinct inputs
// give unrelated streams.
func mix64(seed, v uint64) uint64 {
	z := seed + 0x9e3779b97f4a7c15*(v+1)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// TaskSeed is the seed of the first, shared-prefill request of a task: its
// sample s draws from (TaskSeed, s).
func TaskSeed(run uint64, group int64) uint64 { return mix64(run, uint64(group)) }

// SampleSeed is the seed recorded for trajectory (group, sample); its turns
// after the first draw from mix64(SampleSeed, turn).
func SampleSeed(run uint64, group int64, sample int) uint64 {
	return mix64(TaskSeed(run, group)^0x5bd1e9955bd1e995, uint64(sample))
}

type traj struct {
	job      *jobState
	sample   int
	seed     uint64
	tr       *agent.Trajectory
	finish   []string    // per step: "stop" or "length"
	sampleLP [][]float32 // per step
	start    time.Time
	wall     time.Duration
	mem      []memTerms // per step, filled by the memory reward
	overflow bool       // ended before a step whose context would not fit MaxContext
}

// done reports whether the trajectory has ended, by the protocol or by
// overflow.
func (t *traj) done() bool { return t.overflow || t.tr.Done() }

// fits reports whether a step of at most step ids from a context of n ids
// fits MaxContext.
func (o *Options) fits(n, step int) bool { return o.MaxContext <= 0 || n+step <= o.MaxContext }

type memTerms struct {
	ok               bool
	pMem, pHis       float64
	pMemObj, pHisObj []float64 // per objective, under agent.Config.ScorePerObjective
}

type jobState struct {
	job   Job
	trajs []*traj
	fresh bool // no step generated yet: the first turn shares the prompt
	left  int  // trajectories not done
}

// Run rolls out every job, G trajectories each, and calls emit with the G
// rows of a task as soon as the task has finished (in the order tasks
// finish, rows by sample). An emit error stops the run. A generation or
// retrieval error stops it too: rows already emitted stay valid, the tasks
// in flight are dropped.
func (e *Engine) Run(ctx context.Context, jobs []Job, emit func(Job, []records.Rollout) error) (Stats, error) {
	o := e.Opts
	if e.Agent == nil || e.Policy == nil || e.Searcher == nil {
		return Stats{}, fmt.Errorf("rollout: engine needs an agent, a policy and a searcher")
	}
	if o.GroupSize < 1 {
		return Stats{}, fmt.Errorf("rollout: group size must be ≥ 1, got %d", o.GroupSize)
	}
	acfg := e.Agent.Config()
	if acfg.MaxStepTokens < 1 {
		return Stats{}, fmt.Errorf("rollout: max step tokens must be ≥ 1, got %d", acfg.MaxStepTokens)
	}
	if o.Decode == nil {
		return Stats{}, fmt.Errorf("rollout: a Decode function is needed for the stop strings")
	}
	if o.ForceSearchTurns > 0 && o.Encode == nil {
		return Stats{}, fmt.Errorf("rollout: forced search steps need an Encode function")
	}
	batch := max(o.Batch, o.GroupSize)
	gen := model.GenerateOptions{
		MaxTokens:   acfg.MaxStepTokens,
		Sampling:    o.Sampling,
		EOS:         acfg.EOSIDs,
		StopStrings: e.Agent.StopStrings(),
		Decode:      o.Decode,

		NoSharedPrefixes: o.NoSharedPrefill,
	}
	stats := Stats{Tasks: len(jobs), GroupSize: o.GroupSize}
	t0 := time.Now()
	queue := jobs
	var active []*jobState
	live := 0 // trajectories in flight (not ended)

	for {
		if err := ctx.Err(); err != nil {
			return stats, err
		}
		// Refill the slots of ended trajectories: admit whole tasks (their
		// G samples share the first prefill) while they fit beside the
		// trajectories still running.
		for len(queue) > 0 && (live == 0 || live+o.GroupSize <= batch) {
			active = append(active, e.admit(queue[0]))
			queue = queue[1:]
			live += o.GroupSize
		}
		if len(active) == 0 {
			break
		}

		// One step for every active trajectory, in one Generate call.
		type slot struct {
			trajs  []*traj // the trajectories of one request, by sample
			forced bool    // a forced search step (Options.ForceSearchTurns)
		}
		var reqs []model.Request
		var slots []slot
		for _, js := range active {
			if js.fresh {
				js.fresh = false
				prompt := js.trajs[0].tr.Context()
				if !o.fits(len(prompt), gen.MaxTokens) {
					for _, t := range js.trajs {
						t.overflow = true
					}
					continue
				}
				f := e.forced(js.trajs[0])
				if f {
					prompt = append(prompt, e.forcePrefix()...)
				}
				reqs = append(reqs, model.Request{Prompt: prompt, N: o.GroupSize, Seed: TaskSeed(o.Seed, js.job.Group)})
				slots = append(slots, slot{js.trajs, f})
				continue
			}
			for _, t := range js.trajs {
				if t.done() {
					continue
				}
				ctx := t.tr.Context()
				if !o.fits(len(ctx), gen.MaxTokens) {
					t.overflow = true
					continue
				}
				f := e.forced(t)
				if f {
					ctx = append(ctx, e.forcePrefix()...)
				}
				reqs = append(reqs, model.Request{Prompt: ctx, N: 1, Seed: mix64(t.seed, uint64(t.tr.Turns))})
				slots = append(slots, slot{[]*traj{t}, f})
			}
		}
		var gens []*model.Generation
		if len(reqs) > 0 {
			tg := time.Now()
			var err error
			g := gen
			if e.Progress != nil {
				stats.InFlight = live
				g.OnTokens = func(n int) {
					stats.PendingTokens += int64(n)
					stats.Wall = time.Since(t0)
					e.Progress(stats)
				}
			}
			gens, err = e.generate(reqs, g, &stats)
			stats.PendingTokens = 0
			stats.Generate += time.Since(tg)
			stats.Turns++
			if err != nil {
				return stats, fmt.Errorf("rollout: generate: %w", err)
			}
		}
		want := 0
		for _, r := range reqs {
			want += max(r.N, 1)
		}
		if len(gens) != want {
			return stats, fmt.Errorf("rollout: generate returned %d rows for %d", len(gens), want)
		}
		var searching []*traj
		for _, g := range gens {
			if g.Request < 0 || g.Request >= len(slots) || g.Sample < 0 || g.Sample >= len(slots[g.Request].trajs) {
				return stats, fmt.Errorf("rollout: generate returned row (%d, %d) that was not asked for", g.Request, g.Sample)
			}
			t := slots[g.Request].trajs[g.Sample]
			stats.ContextTokens += int64(len(reqs[g.Request].Prompt))
			stats.GeneratedTokens += int64(len(g.IDs))
			stats.Steps++
			ids, lp, slp := g.IDs, g.LogProbs, g.SampleLogProbs
			if slots[g.Request].forced {
				ids, lp, slp = e.forceStep(t, ids, lp, slp)
			}
			res, err := t.tr.Step(ids, lp)
			if err != nil {
				return stats, fmt.Errorf("rollout: task %s sample %d: %w", t.job.job.Task.TaskID, t.sample, err)
			}
			fin := "stop"
			if g.Finish == "length" {
				fin = "length"
			}
			t.finish = append(t.finish, fin)
			t.sampleLP = append(t.sampleLP, append([]float32(nil), slp...))
			if res.NeedSearch {
				searching = append(searching, t)
			}
		}

		// Every search of the turn in one call, each distinct query once
		// (the G samples of a task often ask the same thing). The call runs
		// while the tasks that ended this turn get their memory rewards and
		// rows (searching trajectories have not ended), unless SyncRetrieval.
		var searched chan searchResult
		var which []int
		if len(searching) > 0 {
			var queries []string
			which = make([]int, len(searching))
			seen := map[string]int{}
			for i, t := range searching {
				q := t.tr.Steps[len(t.tr.Steps)-1].Query
				n, ok := seen[q]
				if !ok {
					n = len(queries)
					seen[q] = n
					queries = append(queries, q)
				}
				which[i] = n
			}
			stats.Searches += len(searching)
			stats.SearchesRun += len(queries)
			stats.SearchCalls++
			searched = make(chan searchResult, 1)
			topK := e.Agent.Config().TopK
			call := func() {
				ts := time.Now()
				hits, err := e.Searcher.Search(ctx, queries, topK)
				if err == nil && len(hits) != len(queries) {
					err = fmt.Errorf("%d result lists for %d queries", len(hits), len(queries))
				}
				searched <- searchResult{hits, time.Since(ts), err}
			}
			if o.SyncRetrieval {
				call()
			} else {
				go call()
			}
		}
		// observe waits for the turn's searches and hands each trajectory
		// its results.
		observe := func() error {
			if searched == nil {
				return nil
			}
			tw := time.Now()
			r := <-searched
			searched = nil
			stats.SearchWait += time.Since(tw)
			stats.Search += r.took
			if o.SyncRetrieval {
				stats.SearchWait += r.took
			}
			if r.err != nil {
				return fmt.Errorf("rollout: retrieval: %w", r.err)
			}
			for i, t := range searching {
				if err := t.tr.Observe(docsOf(r.hits[which[i]])); err != nil {
					return err
				}
			}
			return nil
		}

		// Collect the tasks whose trajectories have all ended.
		var done []*jobState
		keep := active[:0]
		now := time.Now()
		live = 0
		for _, js := range active {
			js.left = 0
			for _, t := range js.trajs {
				if t.done() {
					if t.wall == 0 {
						t.wall = max(now.Sub(t.start), time.Nanosecond)
					}
				} else {
					js.left++
				}
			}
			live += js.left
			if js.left == 0 {
				done = append(done, js)
			} else {
				keep = append(keep, js)
			}
		}
		active = keep
		if len(done) > 0 {
			if o.MemoryReward {
				tr := time.Now()
				err := e.memoryRewards(done, &stats)
				stats.Reward += time.Since(tr)
				if err != nil {
					observe()
					return stats, err
				}
			}
			for _, js := range done {
				rows := e.rows(js)
				if err := emit(js.job, rows); err != nil {
					observe() // the search in flight ends before Run returns
					return stats, err
				}
				stats.TasksDone++
				stats.Trajectories += len(rows)
				for i := range rows {
					stats.TrajectoryTurns += len(rows[i].Steps)
					stats.RewardTaskSum += rows[i].RewardTask
				}
			}
		}
		if err := observe(); err != nil {
			return stats, err
		}
		stats.Wall = time.Since(t0)
		if e.Progress != nil {
			e.Progress(stats)
		}
	}
	stats.Wall = time.Since(t0)
	return stats, nil
}

// generate runs the turn's requests in one Generate call, or in several
// when GenTokensPerCall bounds them, renumbering the rows' requests, and
// adds each call's prefill and KV cache to stats. Under the bound a call's
// rows take their new-token rows as they write them (model.GenerateOptions
// CacheLimit), and a call takes as many requests as fit if each row wrote
// what the run's steps so far suggest (expectedStepRows; before any step,
// every row's MaxTokens, as without growing slots): rows that write more
// than that grow into the room of rows that write less, or are preempted
// and go on later.
func (e *Engine) generate(reqs []model.Request, opts model.GenerateOptions, stats *Stats) ([]*model.Generation, error) {
	limit := e.Opts.GenTokensPerCall
	opts.CacheLimit = max(limit, 0)
	packed := opts
	packed.MaxTokens = expectedStepRows(*stats, opts)
	fits := func(reqs []model.Request) bool {
		if model.CacheRows(reqs, opts) <= limit { // the reservation fits: one layout, the usual case
			return true
		}
		return model.CacheRows(reqs, packed) <= limit && model.StartCacheRows(reqs, opts) <= limit
	}
	call := func(reqs []model.Request) ([]*model.Generation, error) {
		var rep model.GenerateReport
		opts.Report = &rep
		start := time.Now()
		opts.OnPrefill = func(ran, ids int) {
			stats.Prefill += time.Since(start)
			stats.PromptIDsRun += int64(ran)
			stats.PromptIDs += int64(ids)
		}
		gens, err := e.Policy.Generate(reqs, opts)
		if rep.CacheRows == 0 { // a policy that does not report: what the call reserves
			n := model.CacheRows(reqs, opts)
			rep.CacheRows, rep.PeakRows = n, n
		}
		stats.GenerateCalls++
		stats.CacheRows += int64(rep.CacheRows)
		stats.CacheRowsMax = max(stats.CacheRowsMax, rep.CacheRows)
		stats.CacheRowsPeak = max(stats.CacheRowsPeak, rep.PeakRows)
		stats.Preempted += int64(rep.Preempted)
		return gens, err
	}
	if limit <= 0 {
		return call(reqs)
	}
	var out []*model.Generation
	for lo := 0; lo < len(reqs); {
		// The most requests from lo that fit (at least one): all of them,
		// the usual case, or else (the rows grow as requests are added) a
		// binary search.
		hi := len(reqs)
		if !fits(reqs[lo:]) {
			hi = lo + max(1, sort.Search(len(reqs)-lo, func(n int) bool { return !fits(reqs[lo : lo+n+1]) }))
		}
		gens, err := call(reqs[lo:hi])
		if err != nil {
			return nil, err
		}
		for _, g := range gens {
			g.Request += lo
		}
		out = append(out, gens...)
		lo = hi
	}
	return out, nil
}

// expectedStepRows is the new-token KV rows a generation call packs its
// rows by: the growing slot (model.SlotRows) of one and a half times the
// mean step the run has generated so far, or every row's MaxTokens before
// its first step. A policy whose steps stop well short of the budget packs
// many more rows into a call than the budget would allow; one whose steps
// run to it (random weights) packs as many as the budget allows, and its
// calls preempt nothing.
func expectedStepRows(st Stats, opts model.GenerateOptions) int {
	if st.Steps == 0 {
		return opts.MaxTokens
	}
	mean := float64(st.GeneratedTokens) / float64(st.Steps)
	return model.SlotRows(int(math.Ceil(1.5*mean)), opts)
}

func (e *Engine) admit(j Job) *jobState {
	js := &jobState{job: j, fresh: true}
	now := time.Now()
	for s := 0; s < e.Opts.GroupSize; s++ {
		js.trajs = append(js.trajs, &traj{
			job: js, sample: s, seed: SampleSeed(e.Opts.Seed, j.Group, s),
			tr: e.Agent.NewTrajectory(j.Task.Questions), start: now,
		})
	}
	return js
}

// searchResult is what a turn's Searcher call returned, and how long it took.
type searchResult struct {
	hits [][]retrieval.Hit
	took time.Duration
	err  error
}

func docsOf(hits []retrieval.Hit) []agent.Doc {
	docs := make([]agent.Doc, len(hits))
	for i, h := range hits {
		docs[i] = agent.Doc{ID: h.ID, Title: h.Title, Contents: h.Contents, Score: h.Score}
	}
	return docs
}

// memRef says which step of which trajectory a teacher-forcing sequence
// scores, and where its gold ids are.
type memRef struct {
	t          *traj
	step       int
	hist       bool
	start, end int
	ends       []int // agent.MemorySeqs.GoldEnds: per-objective scoring when set
}

// goldProb is P(gold | context) from the gold ids' log-probs: their
// geometric mean (rl.GeoMeanProb, the paper's), or with the ends of the
// objectives' ids (agent.Config.ScorePerObjective) the mean over objectives
// of each one's (rl.MultiGoldProb's, one alias each), with each objective's
// term (stored as p_gold_*_obj).
func goldProb(lp []float32, ends []int) (p float64, perObjective []float64, err error) {
	if ends == nil {
		p, err = rl.GeoMeanProb(lp)
		return p, nil, err
	}
	objs := make([][][]float32, len(ends))
	from := 0
	for j, end := range ends {
		objs[j] = [][]float32{lp[from:end]}
		from = end
	}
	if perObjective, err = rl.ObjectiveGoldProbs(objs); err != nil {
		return 0, nil, err
	}
	return rl.MeanGoldProb(perObjective), perObjective, nil
}

// memoryRewards fills the memory-reward terms of every step with a <mem>
// block of the finished tasks: R^M = P(gold | q, mem_t) − P(gold | q, s_<t),
// P = exp(mean teacher-forced log-prob of the gold ids) (or its mean over
// objectives, goldProb), under Scorer when one is set, else the policy. Identical sequences
// (the prompt-only prior of step 0 is the same for all G samples) are run
// once; the rest are packed into LogProbs calls of bounded size.
func (e *Engine) memoryRewards(done []*jobState, stats *Stats) error {
	var seqs [][]int
	index := map[string]int{}
	refs := map[int][]memRef{}
	for _, js := range done {
		for _, t := range js.trajs {
			t.mem = make([]memTerms, len(t.tr.Steps))
			for i, st := range t.tr.Steps {
				if st.MemStart < 0 {
					continue
				}
				ms, err := t.tr.MemorySequences(i, js.job.Task.Golds)
				if err != nil {
					return fmt.Errorf("rollout: task %s: memory reward: %w", js.job.Task.TaskID, err)
				}
				for _, r := range []memRef{
					{t: t, step: i, start: ms.MemGoldStart, end: ms.MemGoldEnd, ends: ms.GoldEnds},
					{t: t, step: i, hist: true, start: ms.HistGoldStart, end: ms.HistGoldEnd, ends: ms.GoldEnds},
				} {
					seq := ms.Mem
					if r.hist {
						seq = ms.Hist
					}
					stats.MemSeqs++
					k := idsKey(seq)
					n, ok := index[k]
					if !ok {
						n = len(seqs)
						index[k] = n
						seqs = append(seqs, seq)
					}
					refs[n] = append(refs[n], r)
				}
			}
		}
	}
	stats.MemSeqsUniq += len(seqs)
	for _, q := range seqs {
		stats.MemIDs += len(q)
	}
	var scorer Scorer = e.Policy
	if e.Scorer != nil {
		scorer = e.Scorer
	}
	budget := e.Opts.MemTokensPerCall
	if fb, ok := scorer.(interface{ ForwardBudget() int }); ok && budget <= 0 {
		budget = fb.ForwardBudget()
	}
	if budget <= 0 {
		budget = 16384
	}
	// lps[j] holds sequence j's log-probs, lp[t] = log p(ids[t] | ids[:t])
	// (Model.LogProbs' layout), so the gold's are lp[start:end].
	score := func(j int, lp []float32) error {
		for _, r := range refs[j] {
			p, po, err := goldProb(lp[r.start:r.end], r.ends)
			if err != nil {
				return fmt.Errorf("rollout: memory reward of task %s step %d: %w", r.t.job.job.Task.TaskID, r.step, err)
			}
			m := &r.t.mem[r.step]
			m.ok = true
			if r.hist {
				m.pHis, m.pHisObj = p, po
			} else {
				m.pMem, m.pMemObj = p, po
			}
		}
		return nil
	}
	firstGold := func(j int) int {
		f := len(seqs[j])
		for _, r := range refs[j] {
			f = min(f, r.start)
		}
		return f
	}
	if sp, ok := scorer.(sharedLogProbs); ok && !e.Opts.NoSharedPrefixes {
		from := make([]int, len(seqs))
		for j := range from {
			from[j] = firstGold(j)
		}
		lps, ran, err := sp.LogProbsShared(seqs, from, budget)
		if err != nil {
			return fmt.Errorf("rollout: memory reward: %w", err)
		}
		stats.MemIDsRun += ran
		for j, lp := range lps {
			if err := score(j, lp); err != nil {
				return err
			}
		}
		return nil
	}
	for lo := 0; lo < len(seqs); {
		hi, n := lo, 0
		for hi < len(seqs) && (hi == lo || n+len(seqs[hi]) <= budget) {
			n += len(seqs[hi])
			hi++
		}
		var lps [][]float32
		var err error
		if sp, ok := scorer.(suffixLogProbs); ok {
			from := make([]int, hi-lo)
			for j := range from {
				from[j] = firstGold(lo + j)
			}
			lps, err = sp.LogProbsFrom(seqs[lo:hi], from)
		} else {
			lps, err = scorer.LogProbs(seqs[lo:hi])
		}
		if err != nil {
			return fmt.Errorf("rollout: memory reward: %w", err)
		}
		stats.MemIDsRun += n
		for j, lp := range lps {
			if err := score(lo+j, lp); err != nil {
				return err
			}
		}
		lo = hi
	}
	return nil
}

// idsKey is an exact map key for a sequence of ids (4 bytes each).
func idsKey(ids []int) string {
	b := make([]byte, 4*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(id))
	}
	return string(b)
}

// rows turns a finished task into its G records.
func (e *Engine) rows(js *jobState) []records.Rollout {
	o := e.Opts
	t := js.job.Task
	out := make([]records.Rollout, 0, len(js.trajs))
	for _, tj := range js.trajs {
		tr := tj.tr
		r := records.Rollout{
			TaskID: t.TaskID, DataSource: t.DataSource, K: int32(len(t.Golds)), Prompt: t.Prompt,
			Questions: append([]string(nil), t.Questions...), Golds: t.Golds,
			Group: js.job.Group, Sample: int32(tj.sample), Policy: o.PolicyID, Keep: e.Agent.Config().Keep.String(),
			Seed: int64(tj.seed), Temperature: o.Sampling.Temperature, TopP: o.Sampling.TopP, TopK: int32(o.Sampling.TopK),
			Answer: tr.AnswerText, FormatOK: tr.FormatOK, Failure: failureOf(tr, tj.finish),
			WallS: tj.wall.Seconds(),
		}
		if tj.overflow {
			r.Answer, r.FormatOK, r.Failure = "", false, "context_overflow"
		}
		if r.Prompt == "" {
			r.Prompt = strings.Join(t.Questions, "; ")
		}
		for i, s := range tr.Steps {
			st := records.Step{
				Index: int32(i), ContextIDs: records.IDs32(s.ContextIDs), OutputIDs: records.IDs32(s.OutputIDs),
				Logprobs: s.Logprobs, SampleLogprobs: tj.sampleLP[i],
				MemStart: int32(s.MemStart), MemEnd: int32(s.MemEnd),
				Action: s.Action, Query: s.Query, DocIDs: s.DocIDs, Finish: tj.finish[i],
				ContextTokens: int32(s.ContextTokens), OutputTokens: int32(s.OutputTokens),
				ObsIDs: records.IDs32(s.ObsIDs), InfoText: s.ObsText,
			}
			if !s.Valid {
				st.Action = "invalid"
			}
			if st.DocIDs == nil {
				st.DocIDs = []string{}
			}
			if tj.mem != nil && tj.mem[i].ok {
				m := tj.mem[i]
				st.PGoldMem, st.PGoldHist, st.RMem = records.Ptr(m.pMem), records.Ptr(m.pHis), records.Ptr(m.pMem-m.pHis)
				st.PGoldMemObj, st.PGoldHistObj = m.pMemObj, m.pHisObj
			}
			r.Steps = append(r.Steps, st)
		}
		r.FinishReward(o.TaskReward)
		out = append(out, r)
	}
	return out
}

// failureOf maps the agent's failure onto the rollouts vocabulary
// (docs/formats.md): a turn budget spent is no_answer; a bad step is
// bad_format, or length when its generation was cut by the step budget.
func failureOf(tr *agent.Trajectory, finish []string) string {
	switch tr.Failure {
	case agent.FailNone:
		return ""
	case agent.FailMaxTurns:
		return "no_answer"
	case agent.FailFormat:
		if n := len(finish); n > 0 && finish[n-1] == "length" {
			return "length"
		}
		return "bad_format"
	}
	return tr.Failure
}
