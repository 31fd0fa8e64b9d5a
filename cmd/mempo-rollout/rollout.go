package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/cmd/internal/flags"
	"github.com/mempo/mempo/lib/agent"
	"github.com/mempo/mempo/lib/cli"
	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/retrieval"
	"github.com/mempo/mempo/lib/rollout"
	"github.com/mempo/mempo/lib/tasks"
	"github.com/mempo/mempo/lib/tbevent"
	"github.com/mempo/mempo/lib/tokenizer"
)

// rolloutFlags are the root command's flags.
var rolloutFlags = slices.Concat([]ucli.Flag{
	&ucli.StringFlag{Name: "model", Usage: "Hugging Face model directory of the policy (required)"},
	&ucli.StringFlag{Name: "tokenizer", Usage: "tokenizer.json or its directory (default: the model directory)"},
	&ucli.StringFlag{Name: "tasks", Usage: "tasks file (from mempo-rollout tasks, or Search-R1 rows) (required)"},
	&ucli.StringFlag{Name: "retriever", Usage: "URL of a mempo-serve (or Search-R1) retrieval server"},
	&ucli.StringFlag{Name: "index", Usage: "index directory searched in process (BM25)"},
	&ucli.IntFlag{Name: "group", Value: 16, Usage: "group size G: trajectories per task"},
	&ucli.StringFlag{Name: "out", Usage: "rollouts file, .parquet or .jsonl (required); resumable through OUT.partial/"},
	&ucli.StringFlag{Name: "jsonl", Usage: "also write a readable JSONL copy with the decoded text of every step"},
	&ucli.StringFlag{Name: "tb", Usage: "also write throughput and reward scalars (rollout/*, one event per engine turn) as TensorBoard event files into `DIR`"},
}, flags.Agent(), []ucli.Flag{
	&ucli.StringFlag{Name: "on-invalid", Value: "end", Usage: "after a badly formatted step: end (MEM1) or correct (Search-R1's corrective message)"},
}, flags.Sampling(flags.StepTokens, "run seed; each (task, sample, turn) draws from its own stream"), []ucli.Flag{
	&ucli.IntFlag{Name: "batch", Value: 64, Usage: "trajectories in flight at once (whole tasks; at least the group size)"},
	&ucli.IntFlag{Name: "max-batch-tokens", Usage: "bound on the KV-cache positions of one generation call (each distinct context once, which the samples drawn from it share, and the tokens each sample has written, in room that grows as it writes); a sample that finds no room is preempted and resumed later (what it wrote run again in a prefill), and a turn over it is split into several calls, packed as if each sample wrote 1.5 times the run's mean step so far (at first --max-step-tokens) (0: one call per turn, --max-step-tokens reserved for each sample); sampling does not change, but for float rounding where a sample is preempted"},
	&ucli.Float64Flag{Name: "kv-gib", Usage: "most GiB the KV cache of one generation call may take; samples take room as they write tokens, one that finds none is preempted and resumed later (what it wrote run again in a prefill), and a turn over it is split into several calls, packed as if each sample wrote 1.5 times the run's mean step so far (at first --max-step-tokens), the tasks queueing (a task's samples stay in one call), so a large --batch does not run out of memory; sampling does not change, but for float rounding where a sample is preempted (0: half of the memory free when the run starts, unless --max-batch-tokens is given; the smaller bound wins)"},
	&ucli.IntFlag{Name: "force-search-turns", Usage: "benchmarks: force the first n steps of every trajectory to be searches, n drawn per task from 1..N (the sampled text becomes the memory; the query is the question and its first words), so that a policy that does not search by itself (random weights) drives retrieval and R^M; such rows are not samples of the policy"},
	&ucli.BoolFlag{Name: "no-shared-prefixes", Usage: "run every memory-reward sequence from its first id (default: the beginning a step's history shares with the trajectory's longer ones is run once; the rewards differ by float rounding only)"},
	&ucli.StringFlag{Name: "score-model", Usage: "a Hugging Face model directory that teacher-forces the memory reward's sequences instead of the policy (a separate reader of memories; it must have the policy's tokenizer.json); default: the policy scores its own memories, as in the paper"},
	&ucli.IntFlag{Name: "mem-tokens-per-call", Usage: "most ids one forward of the memory-reward passes runs (0: what a quarter of the memory free at the time holds, at most 262144)"},
	&ucli.BoolFlag{Name: "no-shared-prefill", Usage: "prefill every prompt of a turn from its first id (default: a prompt that begins like another, as a task's trajectories begin with its prompt, runs only its own ids and continues the other's keys and values; the tokens are the same, the log-probs differ by float rounding only)"},
	&ucli.BoolFlag{Name: "sync-retrieval", Usage: "wait for a turn's searches before the memory rewards of the tasks that ended in it (default: they run while the searcher works)"},
	&ucli.StringFlag{Name: "policy", Usage: "policy checkpoint id stored in every row (default: the model directory's name @ a hash of its files' sizes and times)"},
	&ucli.BoolFlag{Name: "no-memory-reward", Usage: "skip the teacher-forced P(gold | …) passes of R^M"},
}, scoreFlags, []ucli.Flag{
	&ucli.StringFlag{Name: "task-reward", Value: "exact", Usage: "R^T: exact (1 when all k answers exact-match), or em / f1 (mean over objectives: partial credit)"},
	flags.Device(""),
	flags.Adapter(""),
	&ucli.IntFlag{Name: "limit", Usage: "run only the first N tasks (0: all)"},
	&ucli.BoolFlag{Name: "overwrite", Usage: "run again even when --out already holds a finished run"},
})

// policyInfo is an opened policy with what the run needs to know of it.
type policyInfo struct {
	rollout.Policy
	EOS          []int
	Vocab        int
	MaxPositions int // 0: unknown

	// KVBytesPerToken is one position's keys and values in the policy's KV
	// cache, all layers (0: unknown); Available the memory its generation
	// may allocate (nil: unknown). kvBudget reads them.
	KVBytesPerToken float64
	Available       func() (bytes int64, where string, ok bool)
	// StopKernelTimes, when set, ends the kernel timing MEMPO_CUDA_KERNEL_TIMES
	// started at load and returns its totals (model.StopKernelTimes).
	StopKernelTimes func() (ms map[string]float64, calls map[string]int)
}

// loadPolicy opens the policy. Tests replace it with a scripted policy.
var loadPolicy = func(dir, adapter, device string, tok agent.Tokenizer) (policyInfo, error) {
	be, err := model.NewBackend(device)
	if err != nil {
		return policyInfo{}, fmt.Errorf("--device: %w", err)
	}
	m, err := model.LoadAdapted(dir, adapter, be)
	if err != nil {
		return policyInfo{}, err
	}
	info := policyInfo{Policy: m, EOS: m.EOS(), Vocab: m.VocabSize(), MaxPositions: m.Config().MaxPositions,
		KVBytesPerToken: m.KVCacheBytes(1), Available: m.AvailableMemory}
	if envconfig.CUDAKernelTimes.On() && m.StartKernelTimes() {
		info.StopKernelTimes = m.StopKernelTimes
	}
	return info, nil
}

// sameTokenizer checks that model directory dir's tokenizer.json is the
// policy's (tokPath: a tokenizer.json or a directory holding one), byte for
// byte: a scorer reading other ids would score nonsense.
func sameTokenizer(tokPath, dir string) error {
	tokPath = tokenizer.File(tokPath)
	want, err := os.ReadFile(tokPath)
	if err != nil {
		return err
	}
	got, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s has another tokenizer.json than the policy's %s", dir, tokPath)
	}
	return nil
}

// runRollout is the root command: parse the flags, open what the run needs,
// run it.
func runRollout(c *ucli.Context) error {
	a, err := parseRollout(c)
	if err != nil || a == nil {
		return err // a == nil: the output already holds a finished run
	}
	r, err := openRollout(c, a)
	if err != nil {
		return err
	}
	defer r.close()
	return r.execute(c, a)
}

// rolloutArgs are the checked flags of a run.
type rolloutArgs struct {
	out, jsonl, journal string
	groupSize           int // G
	sampling            model.SampleParams
	agent               agent.Config
	shard, shards       int // --shard i/n (shard.go); shards 1 when unset
}

// parseRollout checks the flags; it returns nil args (and no error) when
// --out already holds a finished run and there is nothing to do.
func parseRollout(c *ucli.Context) (*rolloutArgs, error) {
	if c.NArg() > 0 {
		var names []string
		for _, sc := range c.App.Commands {
			if !sc.Hidden && sc.Name != "help" {
				names = append(names, sc.Name)
			}
		}
		return nil, fmt.Errorf("unexpected argument %q (subcommands: %s)", c.Args().First(), strings.Join(names, ", "))
	}
	if err := cli.Require(c, "model", "tasks", "out"); err != nil {
		return nil, err
	}
	out, jsonl := c.String("out"), c.String("jsonl")
	if out == "-" {
		return nil, fmt.Errorf("--out: a file is needed (the run is journaled beside it)")
	}
	if _, err := fileio.Format(out); err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	if jsonl != "" {
		if f, err := fileio.Format(jsonl); err != nil || f != "jsonl" {
			return nil, fmt.Errorf("--jsonl %s: want a .jsonl file", jsonl)
		}
	}
	if (c.String("retriever") == "") == (c.String("index") == "") {
		return nil, fmt.Errorf("give exactly one of --retriever URL and --index DIR")
	}
	groupSize := c.Int("group")
	if groupSize < 1 {
		return nil, fmt.Errorf("--group: must be at least 1, got %d", groupSize)
	}
	stepTokens, sampling, err := flags.ParseSampling(c, flags.StepTokens)
	if err != nil {
		return nil, err
	}
	switch {
	case c.Int("limit") < 0:
		return nil, fmt.Errorf("--limit: must not be negative")
	case c.Int("max-batch-tokens") < 0:
		return nil, fmt.Errorf("--max-batch-tokens: must not be negative")
	case c.Float64("kv-gib") < 0 || math.IsNaN(c.Float64("kv-gib")) || math.IsInf(c.Float64("kv-gib"), 0):
		return nil, fmt.Errorf("--kv-gib: %v, want a number of GiB ≥ 0", c.Float64("kv-gib"))
	case c.Int("force-search-turns") < 0:
		return nil, fmt.Errorf("--force-search-turns: must not be negative")
	case c.Int("mem-tokens-per-call") < 0:
		return nil, fmt.Errorf("--mem-tokens-per-call: must not be negative")
	case c.String("score-model") != "" && c.Bool("no-memory-reward"):
		return nil, fmt.Errorf("--score-model: the memory reward is off (--no-memory-reward): there is nothing to score")
	case !slices.Contains(records.TaskRewards, c.String("task-reward")):
		return nil, fmt.Errorf("--task-reward: %q, want one of %s", c.String("task-reward"), strings.Join(records.TaskRewards, ", "))
	}
	cfg, err := flags.ParseAgent(c)
	if err != nil {
		return nil, err
	}
	onInvalid, err := agent.ParseInvalidPolicy(c.String("on-invalid"))
	if err != nil {
		return nil, fmt.Errorf("--on-invalid: %w", err)
	}
	cfg.MaxStepTokens, cfg.OnInvalid = stepTokens, onInvalid
	if err := parseScore(c, &cfg); err != nil {
		return nil, err
	}
	a := &rolloutArgs{out: out, jsonl: jsonl, journal: out + ".partial", groupSize: groupSize, sampling: sampling, agent: cfg}
	if a.shard, a.shards, err = parseShard(c); err != nil {
		return nil, err
	}
	if _, err := os.Stat(out); err == nil && !c.Bool("overwrite") {
		if _, err := os.Stat(a.journal); errors.Is(err, os.ErrNotExist) {
			n, err := finishedRows(out)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(os.Stderr, "mempo-rollout: %s already holds a finished run (%d trajectories); nothing to do (--overwrite runs again)\n", out, n)
			return nil, nil
		}
	}
	return a, nil
}

// rolloutRun is an opened run: tasks, tokenizer, policy, agent, searcher and
// journal, with the tasks still to do.
type rolloutRun struct {
	run      []tasks.Task
	jobs     []rollout.Job
	resumed  int
	cfg      agent.Config
	tok      rollout.Tok
	pol      policyInfo
	ag       *agent.Agent
	searcher retrieval.Searcher
	scorer   rollout.Scorer // --score-model's, or nil
	jr       *rollout.Journal
	policyID string
	closers  []func() error
	groups   []int64 // the task groups of this run (all, or --shard's)
}

func (r *rolloutRun) close() {
	for _, f := range r.closers {
		f()
	}
}

// openRollout reads the tasks, loads the tokenizer and the policy, builds
// the agent, reaches the searcher and opens the journal.
func openRollout(c *ucli.Context, a *rolloutArgs) (_ *rolloutRun, err error) {
	cfg := a.agent
	r := &rolloutRun{}
	defer func() {
		if err != nil {
			r.close() // what was opened before the error
		}
	}()
	// Tasks.
	tasksPath := c.String("tasks")
	all, err := tasks.ReadTasks(tasksPath)
	if err != nil {
		return nil, err
	}
	for i := range all {
		// ReadTasks reads and checks every row itself and names the row;
		// this is a second guard, naming the task (ReadTasks may reorder).
		if err := all[i].Check(); err != nil {
			return nil, fmt.Errorf("%s: task %q: %v", tasksPath, all[i].TaskID, err)
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%s: no tasks", tasksPath)
	}
	taskHash := fnv.New64a()
	for _, t := range all {
		fmt.Fprintf(taskHash, "%s\x00", t.TaskID)
	}
	run := all
	if n := c.Int("limit"); n > 0 && n < len(run) {
		run = run[:n]
	}

	// Tokenizer, policy, agent.
	dir := c.String("model")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("--model %s: not a model directory", dir)
	}
	tokPath := c.String("tokenizer")
	if tokPath == "" {
		tokPath = dir
	}
	tk, err := tokenizer.Load(tokPath)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	tok := rollout.Tok{T: tk}
	pol, err := loadPolicy(dir, c.String("adapter"), c.String("device"), tok)
	if err != nil {
		return nil, err
	}
	eos := pol.EOS
	if tk.VocabSize() > pol.Vocab {
		return nil, fmt.Errorf("tokenizer %s has %d ids but the model only %d", tokPath, tk.VocabSize(), pol.Vocab)
	}
	if cfg.Chat {
		// A chat model ends its turn with <|im_end|>, whatever the
		// generation config says.
		if id, ok := tk.TokenID("<|im_end|>"); ok && !containsID(eos, id) {
			eos = append(eos, id)
		}
	}
	cfg.EOSIDs = eos
	var scorer rollout.Scorer
	if sdir := c.String("score-model"); sdir != "" {
		if err := sameTokenizer(tokPath, sdir); err != nil {
			return nil, fmt.Errorf("--score-model: %w", err)
		}
		sc, err := loadPolicy(sdir, "", c.String("device"), tok)
		if err != nil {
			return nil, fmt.Errorf("--score-model: %w", err)
		}
		if tk.VocabSize() > sc.Vocab {
			return nil, fmt.Errorf("--score-model: tokenizer %s has %d ids but the scorer only %d", tokPath, tk.VocabSize(), sc.Vocab)
		}
		scorer = sc.Policy
	}
	ag, err := agent.New(cfg, tok)
	if err != nil {
		return nil, err
	}
	policyID := c.String("policy")
	if policyID == "" {
		policyID = defaultPolicyID(dir)
		if a := c.String("adapter"); a != "" {
			policyID = defaultPolicyID(a)
		}
	}

	searcher, closeSearcher, err := openSearcher(c)
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, closeSearcher)

	set := rollout.Settings{
		"tasks": fmt.Sprintf("%x", taskHash.Sum64()), "policy": policyID, "group": strconv.Itoa(a.groupSize),
		"seed": strconv.FormatUint(c.Uint64("seed"), 10), "keep": cfg.Keep.String(), "max_turns": strconv.Itoa(cfg.MaxTurns),
		"max_step_tokens": strconv.Itoa(cfg.MaxStepTokens), "obs_tokens": strconv.Itoa(cfg.ObsMaxTokens),
		"topk": strconv.Itoa(cfg.TopK), "tool_tag": cfg.ToolTag, "hint": strconv.FormatBool(cfg.TurnsHint),
		"on_invalid": c.String("on-invalid"), "chat": strconv.FormatBool(cfg.Chat),
		"temperature": strconv.FormatFloat(c.Float64("temperature"), 'g', -1, 64),
		"top_p":       strconv.FormatFloat(c.Float64("top-p"), 'g', -1, 64), "top_k": strconv.Itoa(c.Int("top-k")),
		"memory_reward": strconv.FormatBool(!c.Bool("no-memory-reward")),
	}
	if a := c.String("adapter"); a != "" {
		set["adapter"] = a // only when set: earlier journals resume
	}
	if d := c.String("score-model"); d != "" {
		set["score_model"] = d // only when set: earlier journals resume
	}
	scoreSettings(c, cfg, set)
	if n := c.Int("force-search-turns"); n > 0 {
		set["force_search_turns"] = strconv.Itoa(n) // only when set: earlier journals resume
	}
	if tr := c.String("task-reward"); tr != "exact" {
		// Only a non-default reward enters the settings, so journals of
		// earlier runs still resume.
		set["task_reward"] = tr
	}
	if a.shards > 1 {
		set["shard"] = fmt.Sprintf("%d/%d", a.shard, a.shards)
	}
	jr, done, err := rollout.OpenJournal(a.journal, set, a.groupSize, all)
	if err != nil {
		return nil, err
	}
	var jobs []rollout.Job
	var mine []tasks.Task
	for i, t := range run {
		if !a.inShard(i) {
			continue
		}
		mine = append(mine, t)
		r.groups = append(r.groups, int64(i))
		if !done[int64(i)] {
			jobs = append(jobs, rollout.Job{Group: int64(i), Task: t})
		}
	}
	if len(mine) == 0 {
		return nil, fmt.Errorf("--shard %d/%d: no task falls in this shard (%d tasks)", a.shard, a.shards, len(run))
	}
	run = mine

	r.run, r.jobs, r.resumed = run, jobs, len(run)-len(jobs)
	r.cfg = cfg
	r.tok, r.pol, r.ag, r.searcher, r.jr, r.policyID, r.scorer = tok, pol, ag, searcher, jr, policyID, scorer
	return r, nil
}

// execute runs the engine over the tasks not yet journaled, then merges the
// journal into the output.
func (r *rolloutRun) execute(c *ucli.Context, a *rolloutArgs) error {
	genTokens, genFrom := kvBudget(c.Float64("kv-gib"), c.Int("max-batch-tokens"), r.pol)
	eng := &rollout.Engine{Agent: r.ag, Policy: r.pol.Policy, Scorer: r.scorer, Searcher: r.searcher, Opts: rollout.Options{
		GroupSize: a.groupSize, Batch: c.Int("batch"), MaxContext: r.pol.MaxPositions,
		GenTokensPerCall: genTokens,
		ForceSearchTurns: c.Int("force-search-turns"), Encode: r.tok.Encode, SyncRetrieval: c.Bool("sync-retrieval"),
		NoSharedPrefixes: c.Bool("no-shared-prefixes"),
		NoSharedPrefill:  c.Bool("no-shared-prefill"),
		MemTokensPerCall: c.Int("mem-tokens-per-call"),
		Sampling:         a.sampling,
		Decode:           r.tok.Decode, Seed: c.Uint64("seed"), PolicyID: r.policyID,
		MemoryReward: !c.Bool("no-memory-reward"), TaskReward: c.String("task-reward"),
	}}
	prog := cli.NewProgress()
	tb, err := openTB(c.String("tb"))
	if err != nil {
		return err
	}
	defer tb.Close()
	lastTurn := -1
	eng.Progress = func(st rollout.Stats) {
		prog.Printf("%s", progressLine(st, r.resumed, len(r.run), r.cfg.MaxTurns))
		if st.Turns != lastTurn && st.PendingTokens == 0 { // once per finished turn
			lastTurn = st.Turns
			tb.Add(int64(st.Turns), rolloutScalars(st)...)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := eng.Run(ctx, r.jobs, func(j rollout.Job, rows []records.Rollout) error { return r.jr.Put(j.Group, rows) })
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted after %d of %d tasks; they are kept in %s, rerun the same command to resume", r.resumed+st.TasksDone, len(r.run), a.journal)
		} else {
			err = fmt.Errorf("%v (%d of %d tasks are kept in %s; rerun to resume)", err, r.resumed+st.TasksDone, len(r.run), a.journal)
		}
		prog.Done("")
		return err
	}
	n, rt, err := r.jr.MergeGroups(a.out, a.jsonl, r.groups, r.tok)
	if err != nil {
		return err
	}
	summary := fmt.Sprintf("mempo-rollout: %d tasks (%d resumed), %d trajectories, mean R^T %.3f; %s; %s; %s; wall %.1fs → %s",
		len(r.run), r.resumed, n, rt, rates(st), shares(st), kvPart(st, r.pol.KVBytesPerToken, genTokens, genFrom), st.Wall.Seconds(), a.out)
	if prog.Terminal() {
		prog.Done("%s", summary)
	} else {
		prog.Done("") // nothing in a log: the summary is the final line
		fmt.Fprintln(os.Stderr, summary)
	}
	if r.pol.StopKernelTimes != nil {
		fmt.Fprint(os.Stderr, kernelTimes(r.pol.StopKernelTimes()))
	}
	return tb.Add(int64(st.Turns), tbevent.Scalar{Tag: "rollout/final_reward_task_mean", Value: rt})
}

// openSearcher reaches --index in process or probes --retriever, so an
// unreachable or wrong server is one clear line before any model time is
// spent; the second result closes it.
func openSearcher(c *ucli.Context) (retrieval.Searcher, func() error, error) {
	if ix := c.String("index"); ix != "" {
		l, err := retrieval.NewLocal(ix)
		if err != nil {
			return nil, nil, fmt.Errorf("--index %s: %w", ix, err)
		}
		return l, l.Close, nil
	}
	url := c.String("retriever")
	cl := retrieval.NewClient(url)
	pctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	probe := *cl
	probe.Retries = 1
	_, err := probe.Search(pctx, []string{"probe"}, 1)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("--retriever %s: %v", url, err)
	}
	return cl, func() error { return nil }, nil
}

// rates is the throughput part of the progress and summary lines.
func rates(st rollout.Stats) string {
	sec := max(st.Wall.Seconds(), 1e-9)
	turns := 0.0
	if st.Trajectories > 0 {
		turns = float64(st.TrajectoryTurns) / float64(st.Trajectories)
	}
	return fmt.Sprintf("%.2f traj/s, %.0f gen tok/s, %.1f turns/traj, retrieval wait %.1f%% of wall",
		float64(st.Trajectories)/sec, float64(st.GeneratedTokens)/sec, turns, 100*st.SearchShare())
}

// shares is where the wall time went, for the summary line.
func shares(st rollout.Stats) string {
	g, s, m, h := st.Shares()
	return fmt.Sprintf("wall in generation %.1f%% (prefill %.1f%%: %d of the prompts' %d ids run), retrieval wait %.1f%% (searches %.1fs in %d calls, %d queries), memory-reward passes %.1f%% (%d of their %d ids run), host %.1f%%; %d steps, %d generated and %d context tokens",
		100*g, 100*st.Prefill.Seconds()/max(st.Wall.Seconds(), 1e-9), st.PromptIDsRun, st.PromptIDs, 100*s, st.Search.Seconds(), st.SearchCalls, st.SearchesRun, 100*m, st.MemIDsRun, st.MemIDs, 100*h, st.Steps, st.GeneratedTokens, st.ContextTokens)
}

// kvPart is the summary line's KV-cache part: the generation calls, the
// largest call's cache and the most positions a call had in use at once
// (positions, and bytes at the policy's KV bytes a position when it has
// them), all calls' positions, the rows preempted to stay within the
// bound, and the bound (kvBudget's tokens and where they came from; 0:
// none).
func kvPart(st rollout.Stats, bytesPerPos float64, bound int, from string) string {
	size := func(pos int64) string {
		if bytesPerPos <= 0 {
			return fmt.Sprintf("%d positions", pos)
		}
		return fmt.Sprintf("%d positions (%s)", pos, model.FormatBytes(bytesPerPos*float64(pos)))
	}
	b := "no bound"
	if bound > 0 {
		b = fmt.Sprintf("a call's bound %d positions from %s", bound, from)
	}
	return fmt.Sprintf("KV cache: %d generation calls, the largest %s, at most %s in use, %d positions in all, samples preempted %d, %s",
		st.GenerateCalls, size(int64(st.CacheRowsMax)), size(int64(st.CacheRowsPeak)), st.CacheRows, st.Preempted, b)
}

func containsID(ids []int, id int) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// defaultPolicyID names a checkpoint by its directory and a hash of the
// names, sizes and modification times of its config and weight files: a
// new checkpoint saved in the same place gets a new id.
func defaultPolicyID(dir string) string {
	h := fnv.New32a()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		n := e.Name()
		if n != "config.json" && !strings.HasSuffix(n, ".safetensors") && !strings.HasSuffix(n, ".safetensors.index.json") {
			continue
		}
		if info, err := e.Info(); err == nil {
			fmt.Fprintf(h, "%s\x00%d\x00%d\x00", n, info.Size(), info.ModTime().UnixNano())
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return fmt.Sprintf("%s@%08x", filepath.Base(abs), h.Sum32())
}

// finishedRows checks that an existing --out without a journal is what a
// finished run writes, a readable rollouts file with at least one
// trajectory, before it is taken for one (an unrelated or damaged file used
// to count as a finished run).
func finishedRows(out string) (int, error) {
	n := 0
	err := records.Each(out, func(int, *records.Rollout) error { n++; return nil })
	if err != nil {
		return 0, fmt.Errorf("--out %s exists but is not a finished rollouts file (%v); move it away or pass --overwrite", out, err)
	}
	if n == 0 {
		return 0, fmt.Errorf("--out %s exists but holds no trajectories, not a finished run; move it away or pass --overwrite", out)
	}
	return n, nil
}

// scoreFlags are how R^M's teacher-forced sequences are written
// (agent.MemorySequences): the rollout run scores with them, and the expert's
// --answer-rows demonstrations teach the same sequences.
var scoreFlags = []ucli.Flag{
	&ucli.BoolFlag{Name: "score-gold-numbered", Usage: `R^M scores each objective's gold after its position's marker, "[1] Paris; [2] Berlin", to match a policy that numbers its answers that way`},
	&ucli.StringFlag{Name: "score-lead-in", Usage: "the text R^M's teacher-forced passes put between the memory and the gold answer, ending in <answer>; {k} is replaced by the number of questions (default: a final-answer thought, see docs/formats.md)"},
	&ucli.StringFlag{Name: "score-gold-prefix", Usage: `text put before the gold answer in R^M's teacher-forced passes, to match how the policy writes answers (" " when it writes "<answer> Paris")`},
	&ucli.StringFlag{Name: "score-layout", Value: "turn", Usage: "where P(gold | q, mem) reads the memory: turn (the memory opens the answering assistant turn after the prompt, mempo-paper §2.2) or next-step (the memory as the previous assistant turn of a keep-1 context, its observation left out; the history term has the same template)"},
	&ucli.BoolFlag{Name: "score-per-objective", Usage: "P(gold | ·) of a k-objective task is the mean over objectives of each one's geometric-mean probability in the same pass, instead of the geometric mean over the joint gold (the paper's): one answer filed among eight then moves it by its own probability over k (docs/DEMO.md, \"What the scorer copies\")"},
}

// parseScore sets cfg's R^M fields from scoreFlags.
func parseScore(c *ucli.Context, cfg *agent.Config) error {
	cfg.ScoreGoldPrefix = c.String("score-gold-prefix")
	cfg.ScoreGoldNumbered = c.Bool("score-gold-numbered")
	if c.IsSet("score-lead-in") {
		cfg.ScoreLeadIn = c.String("score-lead-in")
	}
	l, err := agent.ParseScoreLayout(c.String("score-layout"))
	if err != nil {
		return fmt.Errorf("--score-layout: %w", err)
	}
	cfg.ScoreLayout = l
	cfg.ScorePerObjective = c.Bool("score-per-objective")
	return nil
}

// scoreSettings records cfg's R^M fields in a run's settings, each only when
// it differs from the default, so that journals of earlier runs resume.
func scoreSettings(c *ucli.Context, cfg agent.Config, set rollout.Settings) {
	if p := cfg.ScoreGoldPrefix; p != "" {
		set["score_gold_prefix"] = strconv.Quote(p)
	}
	if cfg.ScoreGoldNumbered {
		set["score_gold_numbered"] = "true"
	}
	if c.IsSet("score-lead-in") {
		set["score_lead_in"] = strconv.Quote(cfg.ScoreLeadIn)
	}
	if cfg.ScoreLayout != agent.ScoreInTurn {
		set["score_layout"] = cfg.ScoreLayout.String()
	}
	if cfg.ScorePerObjective {
		set["score_per_objective"] = "true"
	}
}
