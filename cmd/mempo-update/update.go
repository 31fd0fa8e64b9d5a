package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	ucli "github.com/urfave/cli/v2"

	"github.com/mempo/mempo/cmd/internal/flags"
	"github.com/mempo/mempo/lib/checkpoint"
	"github.com/mempo/mempo/lib/cli"
	"github.com/mempo/mempo/lib/dist"
	"github.com/mempo/mempo/lib/envconfig"
	"github.com/mempo/mempo/lib/fileio"
	"github.com/mempo/mempo/lib/model"
	"github.com/mempo/mempo/lib/optim"
	"github.com/mempo/mempo/lib/records"
	"github.com/mempo/mempo/lib/rl"
	"github.com/mempo/mempo/lib/tbevent"
	"github.com/mempo/mempo/lib/update"
)

// The root command: one MemPO/GRPO update over a rollout batch.

// miniBatchFlag is the RL commands' step size; sft calls the same knob
// --batch-size, as SFT trainers do.
var miniBatchFlag = &ucli.IntFlag{Name: "mini-batch", Usage: "trajectories per optimizer step (0 = all)"}

func planFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.IntFlag{Name: "epochs", Value: 1, Usage: "passes over the rollouts"},
		&ucli.Int64Flag{Name: "seed", Usage: "seed of the mini-batch shuffle"},
		&ucli.IntFlag{Name: "micro-tokens", Value: 8192, Usage: "most tokens per forward/backward call (memory bound)"},
		&ucli.BoolFlag{Name: "recompute", Usage: "recompute layer activations in the backward (less memory, more compute)"},
		&ucli.StringFlag{Name: "tb", Usage: "also write every step's metrics as TensorBoard scalars (update/<column>) into `DIR`"},
		flags.Device("bit-identical resume and shards are tested on the cpu"),
	}
}

var updateFlags = concatFlags([]ucli.Flag{
	&ucli.StringFlag{Name: "model", Usage: "policy checkpoint directory (its optimizer.safetensors, when present, is resumed)"},
	&ucli.StringFlag{Name: "ref", Usage: "frozen reference checkpoint for the KL term"},
	&ucli.StringSliceFlag{Name: "rollouts", Usage: "rollouts file(s), Parquet or JSONL"},
	&ucli.StringFlag{Name: "out", Usage: "checkpoint directory to write (HF files, optimizer.safetensors, update_metrics.jsonl)"},
	&ucli.StringFlag{Name: "metrics", Usage: "also write the metrics rows here (.parquet or .jsonl)"},
	&ucli.StringFlag{Name: "optimizer", Usage: "optimizer state to resume (default: --model's optimizer.safetensors when present)"},
	&ucli.IntFlag{Name: "grad-shards", Value: 1, Usage: "accumulate each step's gradient as this many shards, summed in order exactly as apply sums the files of grad --shard i/n"},
	&ucli.StringFlag{Name: "golden", Usage: "write logits of the written checkpoint on a few rollout sequences here (for scripts/check_update_hf.py)"},
	&ucli.IntFlag{Name: "stop-after", Usage: "stop after this many optimizer steps and write a resumable checkpoint; rerunning the same command continues it"},
	checkpointEveryFlag, forceFlag, nprocFlag,
}, flags.RL(), flags.Optim(update.DefaultConfig().Schedule.PeakLR), []ucli.Flag{miniBatchFlag}, planFlags(), flags.LoRA(), flags.LeanState())

func concatFlags(fs ...[]ucli.Flag) []ucli.Flag {
	var out []ucli.Flag
	for _, f := range fs {
		out = append(out, f...)
	}
	return out
}

func required(c *ucli.Context, names ...string) error { return cli.Require(c, names...) }

// knobs reads the loss, optimizer and advantage flags, and the plan's
// micro-batch bound where the command has one.
func knobs(c *ucli.Context, withRL bool) (update.Config, rl.AdvConfig, error) {
	cfg, acfg, err := flags.Train(c, withRL)
	if err != nil {
		return cfg, acfg, err
	}
	if c.IsSet("micro-tokens") || c.Int("micro-tokens") > 0 {
		cfg.MicroTokens = c.Int("micro-tokens")
	}
	return cfg, acfg, cfg.Validate()
}

// loadRollouts reads every file and remembers where each row came from, so
// Prepare's errors can name file and row.
type origin struct {
	file string
	row  int
}

func loadRollouts(files []string) ([]records.Rollout, []origin, error) {
	var rolls []records.Rollout
	var where []origin
	for _, f := range files {
		n := 0
		err := records.Each(f, func(row int, r *records.Rollout) error {
			rolls = append(rolls, *r)
			where = append(where, origin{f, row})
			n++
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		if n == 0 {
			return nil, nil, fmt.Errorf("%s: no rollouts in the file", f)
		}
	}
	return rolls, where, nil
}

func prepare(rolls []records.Rollout, where []origin, opt update.PrepareOptions) (*update.Batch, error) {
	b, err := update.Prepare(rolls, opt)
	var ie *update.InputError
	if errors.As(err, &ie) {
		o := where[ie.Traj]
		return nil, fileio.BadInput(o.file, o.row, ie.Field, "%v", ie.Err)
	}
	return b, err
}

// loadModel loads a checkpoint on the --device backend (model.NewBackend:
// cpu, cuda, or "" for CUDA when usable).
func loadModel(dir, flag string, recompute bool, device string) (*model.Model, error) {
	if dir == "" {
		return nil, cli.MissingFlags("--" + flag)
	}
	be, err := model.NewBackend(device)
	if err != nil {
		return nil, fmt.Errorf("--device: %w", err)
	}
	m, err := model.Load(dir, be)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	m.Recompute = recompute
	return m, nil
}

// sameShapes checks that a model has the policy's parameters (a reference
// must score the same vocabulary as the policy).
func sameShapes(policy *checkpoint.Config, b *model.Model, what string) error {
	var an []string
	shapes := map[string][]int{}
	for _, t := range policy.Tensors() {
		an = append(an, t.Name)
		shapes[t.Name] = t.Shape
	}
	bn := b.ParamNames()
	if len(an) != len(bn) || policy.VocabSize != b.VocabSize() {
		return fmt.Errorf("%s: checkpoint does not match the policy (%d parameters, vocab %d; policy %d, vocab %d)", what, len(bn), b.VocabSize(), len(an), policy.VocabSize)
	}
	for _, name := range bn {
		if fmt.Sprint(shapes[name]) != fmt.Sprint(b.ParamShape(name)) {
			return fmt.Errorf("%s: checkpoint does not match the policy at %s", what, name)
		}
	}
	return nil
}

// startState finds the optimizer state to start from: --optimizer, else
// DIR/optimizer.safetensors when present, else fresh.
func startState(explicit, dir string, m *model.Model) (*optim.State, *update.RunState, error) {
	path := explicit
	if path == "" {
		p := filepath.Join(dir, update.OptimizerFile)
		if _, err := os.Stat(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil, nil
			}
			return nil, nil, err
		}
		path = p
	}
	st, rs, err := update.ReadOptimizer(path)
	if err != nil {
		return nil, nil, err
	}
	if err := update.CheckState(path, st, m); err != nil {
		return nil, nil, err
	}
	return &st, &rs, nil
}

func fingerprint(parts ...any) string {
	h := fnv.New64a()
	for _, p := range parts {
		fmt.Fprintf(h, "%+v|", p)
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// job is one training run (update or sft) after flag parsing.
type job struct {
	c       *ucli.Context
	sft     bool
	cfg     update.Config
	plan    update.Plan
	shards  int
	modelD  string
	out     string
	batch   *update.Batch
	rolls   []records.Rollout
	prepRef func(*update.Batch) error // loads the reference and fills its log-probs (nil: no KL)
	lora    *loraRun                  // a LoRA update (lora.go), or nil
	comm    dist.Comm                 // the ranks of a data-parallel update (dp.go), or nil
	times   *phases                   // how long each stage took, printed at the end
}

// stateDir is where the optimizer state to resume is looked for by default:
// the policy's directory (the adapter's, for LoRA; none for a fresh adapter).
func (j *job) stateDir() string {
	if j.lora != nil {
		return j.lora.adapter
	}
	return j.modelD
}

// reload returns the policy saved in a partial --out: the checkpoint there,
// or for LoRA m with the adapter factors read from it (m nil: base and
// adapter loaded afresh).
func (j *job) reload(m *model.Model, recompute bool) (*model.Model, error) {
	if j.lora == nil {
		return loadModel(j.out, "out", recompute, j.c.String("device"))
	}
	if m == nil {
		return loadAdapted(j.modelD, j.out, j.c.String("device"))
	}
	return m, j.lora.reload(j.out, m)
}

func runUpdate(c *ucli.Context) error {
	if err := required(c, "model", "rollouts", "out"); err != nil {
		return err
	}
	cfg, acfg, err := knobs(c, true)
	if err != nil {
		return err
	}
	if cfg.Lean, err = leanKnob(c); err != nil {
		return err
	}
	if c.Int("grad-shards") < 1 {
		return fmt.Errorf("--grad-shards must be ≥ 1")
	}
	comm, err := joinRun(c)
	if err != nil {
		return err
	}
	if comm == nil && c.Int("nproc") > 1 {
		return launch(c, c.Int("nproc"))
	}
	if comm != nil {
		defer comm.Close()
	}
	j := &job{comm: comm, c: c, cfg: cfg, shards: c.Int("grad-shards"), modelD: c.String("model"), out: c.String("out")}
	if j.lora, err = loraSetup(c); err != nil {
		return err
	}
	if comm != nil && (cfg.Lean || j.lora != nil) {
		return fmt.Errorf("--nproc/WORLD_SIZE: a data-parallel update takes the full-parameter fp32 AdamW state (no --optim-state 8bit, no LoRA) for now")
	}
	if cfg.Lean && j.lora != nil {
		return fmt.Errorf("--optim-state 8bit is for full-parameter updates (a LoRA adapter's AdamW state is small); drop one of the two")
	}
	switch {
	case cfg.Loss.KLCoef != 0 && j.lora != nil && c.IsSet("ref"):
		return fmt.Errorf("--ref: with a LoRA adapter the KL reference is the frozen base --model itself (adapter off); drop --ref")
	case cfg.Loss.KLCoef != 0 && j.lora == nil && !c.IsSet("ref"):
		return fmt.Errorf("%w (needed when --kl-coef is not 0)", cli.MissingFlags("--ref"))
	}
	if j.lora == nil {
		if err := checkMemory(c, j.modelD, cfg, c.String("device")); err != nil {
			return err
		}
	}
	pcfg, err := checkpoint.LoadConfig(j.modelD)
	if err != nil {
		return fmt.Errorf("--model: %w", err)
	}
	rolls, where, err := loadRollouts(c.StringSlice("rollouts"))
	if err != nil {
		return err
	}
	if j.batch, err = prepare(rolls, where, update.PrepareOptions{Vocab: pcfg.VocabSize, RL: true, Adv: acfg}); err != nil {
		return err
	}
	j.rolls = rolls
	if cfg.Loss.KLCoef != 0 && j.lora == nil {
		// The reference scores the batch before the policy is loaded, and
		// its memory is given back at once: on a GPU the two never share it.
		ref, err := loadModel(c.String("ref"), "ref", false, c.String("device"))
		if err != nil {
			return err
		}
		if err := sameShapes(pcfg, ref, "--ref "+c.String("ref")); err != nil {
			return err
		}
		if err := update.RefLogProbs(ref, j.batch, nil, cfg.MicroTokens); err != nil {
			return err
		}
		ref.Release()
	}
	var m *model.Model
	j.times = newPhases()
	if j.lora != nil {
		m, err = j.lora.model(j.modelD, c.Bool("recompute"), c.Int64("seed"))
	} else {
		m, err = loadModel(j.modelD, "model", c.Bool("recompute"), c.String("device"))
	}
	if err != nil {
		return err
	}
	j.times.mark("load")
	if cfg.Loss.KLCoef != 0 && j.lora != nil {
		j.prepRef = func(b *update.Batch) error { return update.BaseRefLogProbs(m, b, nil, cfg.MicroTokens) }
	}
	j.plan = update.Plan{NTraj: len(j.batch.Trajs), MiniBatch: c.Int("mini-batch"), Epochs: c.Int("epochs"), Seed: c.Int64("seed")}
	knobs := fmt.Sprint(acfg)
	if j.lora != nil {
		knobs += fmt.Sprintf("|lora %+v from %q", j.lora.cfg, j.lora.adapter)
	}
	return j.run(m, knobs)
}

// run trains from the policy m (or resumes a partial --out), writes --out,
// --metrics and --golden.
func (j *job) run(m *model.Model, extraKnobs string) error {
	c := j.c
	if err := j.plan.Validate(); err != nil {
		return err
	}
	if err := fileio.CheckReplaceable("out", j.out, c.Bool("force"), "config.json", "adapter_config.json"); err != nil {
		return err
	}
	var st *optim.State
	var st8 *optim.State8
	var rs *update.RunState
	var err error
	if c.String("optimizer") != "" || j.stateDir() != "" {
		if st, st8, rs, err = startLean(c.String("optimizer"), j.stateDir(), m, j.cfg.Lean); err != nil {
			return err
		}
	}
	var startGlobal, iteration int64
	if rs != nil {
		startGlobal, iteration = rs.GlobalStep, rs.Iteration
	}
	shardsKey := j.shards
	if j.comm != nil {
		shardsKey = -1 // any number of ranks continues a partial data-parallel run
	}
	fp := fingerprint(j.sft, j.batch.Hash, j.cfg, extraKnobs, j.plan, shardsKey, startGlobal)

	from := 0
	var rows []records.Update
	// A partial --out of this very run (--stop-after, or a killed run that
	// had written one) is continued rather than redone.
	if _, ors, err := update.ReadOptimizerMeta(filepath.Join(j.out, update.OptimizerFile)); err == nil && ors.Fingerprint == fp {
		if ors.Done() {
			fmt.Fprintf(c.App.Writer, "%s: already holds the result of this run (%d steps); nothing to do\n", j.out, ors.PlanStep)
			return j.finish(nil, nil)
		}
		pm, err := j.reload(m, m.Recompute)
		if err != nil {
			return err
		}
		if st, st8, rs, err = startLean("", j.out, pm, j.cfg.Lean); err != nil {
			return err
		}
		if rows, err = records.ReadFile[records.Update](filepath.Join(j.out, update.MetricsFile)); err != nil {
			return err
		}
		m, from = pm, rs.PlanStep
		fmt.Fprintf(c.App.Writer, "%s: resuming at step %d of %d\n", j.out, from, rs.PlanSteps)
	}

	t, err := update.NewTrainer(m, j.batch, j.cfg)
	if err != nil {
		return err
	}
	t.SFT = j.sft
	var dp *update.DataParallel
	if j.comm != nil {
		comm, done, err := collectives(j.comm, m)
		if err != nil {
			return err
		}
		defer done()
		if dp, err = update.NewDataParallel(t, comm); err != nil {
			return err
		}
		if st != nil {
			*st = dp.OwnedState(*st)
		}
	}
	if st != nil {
		if err := t.Opt.LoadState(*st); err != nil {
			return err
		}
	}
	if st8 != nil {
		if err := t.LoadLeanState(*st8); err != nil {
			return err
		}
	}
	// On a GPU, one process: the optimizer runs there too (weights,
	// gradients and moments stay on the device between steps).
	if _, gpu := m.Backend().(*model.CUDA); gpu && j.shards <= 1 && j.comm == nil && !envconfig.HostOptimizer.On() {
		if err := t.UseDeviceOptimizer(); err != nil {
			return err
		}
	}
	j.times.mark("optimizer state")
	if j.prepRef != nil {
		if err := j.prepRef(j.batch); err != nil {
			return err
		}
		j.times.mark("reference log-probs")
	}
	total := j.plan.Steps()
	stop := total
	if n := c.Int("stop-after"); n > 0 && from+n < total {
		stop = from + n
	}
	var tb *tbevent.Writer
	if dir := c.String("tb"); dir != "" && (j.comm == nil || j.comm.Rank() == 0) {
		if tb, err = tbevent.Create(dir); err != nil {
			return err
		}
		defer tb.Close()
	}
	prog := cli.NewProgress()
	if j.comm != nil && j.comm.Rank() != 0 {
		prog = cli.NewProgressTo(io.Discard, false, cli.LogInterval) // rank 0 reports for all
	}
	base := filepath.Base(filepath.Clean(j.out))
	cur := from
	// Per micro-batch: a step's forward (log-probs) is about a third of its
	// work, the backward the rest; the ETA counts both.
	t.OnMicro = func(phase string, done, n int) {
		part := float64(done) / float64(n) / 3
		if phase == "backward" {
			part = 1.0/3 + 2*float64(done)/float64(n)/3
		}
		frac := (float64(cur-from) + part) / float64(stop-from)
		prog.Printf("step %d/%d: %s micro-batch %d/%d, %s", cur+1, total, phase, done+1, n, cli.ETA(prog.Elapsed(), frac))
	}
	// save writes the run state after done steps: at the end, at
	// --stop-after, and every --checkpoint-every in between; stopped: the
	// end came early (--target-kl), and the run is finished.
	save := func(done int, stopped bool) error {
		nrs := update.RunState{GlobalStep: t.StepCount(), Seed: j.plan.Seed, PlanStep: done, PlanSteps: total,
			Fingerprint: fp, Schedule: j.cfg.Schedule, AdamW: j.cfg.AdamW, Iteration: iteration, Stopped: stopped}
		if nrs.Done() {
			nrs.Iteration++
		}
		switch {
		case j.lora != nil:
			return update.SaveAdapterCheckpoint(j.out, t.Model, j.modelD, t.OptimizerState(), nrs, rows)
		case j.cfg.Lean:
			return j.saveLean(t, nrs, rows, nrs.Done())
		case dp != nil:
			return dp.SaveCheckpoint(j.out, j.modelD, nrs, rows)
		}
		return update.SaveCheckpoint(j.out, t.Model, j.modelD, t.OptimizerState(), nrs, rows)
	}
	ck := newCheckpointer(c.Duration("checkpoint-every"))
	done, stopped := stop, false
	for k := from; k < stop; k++ {
		cur = k
		var res *update.StepResult
		if dp != nil {
			res, err = dp.Step(j.plan, k)
		} else {
			res, err = t.Step(j.plan, k, j.shards)
		}
		if err != nil {
			return fmt.Errorf("step %d: %w", k, err)
		}
		if res.Stopped {
			done, stopped = k, true
			if err := j.recordStop(res.ApproxKL, k, total, rows, tb, t.StepCount()); err != nil {
				return err
			}
			break
		}
		res.Row.Policy = fmt.Sprintf("%s@%d", base, res.Row.Step)
		rows = append(rows, res.Row)
		if err := tb.Add(res.Row.Step, tbevent.Fields("update", res.Row, "step")...); err != nil {
			return err
		}
		prog.Printf("step %d/%d loss %.4g clipfrac %.3f kl %s grad-norm %.3g", k+1, total, res.Row.Loss, res.Row.PGClipfrac, optG(res.Row.KL), res.GradNorm)
		if k+1 < stop && ck.due() {
			if err := ck.save(c.App.ErrWriter, j.out, k+1, total, func(done int) error { return save(done, false) }); err != nil {
				return err
			}
		}
	}
	prog.Done("%d steps", done-from)
	j.times.mark("steps")
	printPeak(c, t.Model)
	if err := save(done, stopped); err != nil {
		return err
	}
	j.times.mark("write")
	if j.times != nil {
		fmt.Fprintf(c.App.ErrWriter, "mempo-update: %s\n", j.times)
	}
	switch {
	case stopped:
		fmt.Fprintf(c.App.Writer, "wrote %s: %d of %d steps (stopped by --target-kl), global step %d\n", j.out, done, total, t.StepCount())
	case stop < total:
		fmt.Fprintf(c.App.Writer, "wrote %s after step %d of %d; rerun the same command to continue\n", j.out, stop, total)
		return nil
	default:
		fmt.Fprintf(c.App.Writer, "wrote %s: %d steps, global step %d\n", j.out, total, t.StepCount())
	}
	return j.finish(t.Model, rows)
}

// recordStop reports an update that --target-kl stopped before plan step k
// (0-based) of total: one stderr line, the KL on the last row taken
// (StopApproxKL; with no step taken there is no row, and the line and the
// checkpoint's run state tell it), and TensorBoard scalars at the global
// step reached.
func (j *job) recordStop(kl float64, k, total int, rows []records.Update, tb *tbevent.Writer, global int64) error {
	bound := update.KLStopFactor * j.cfg.TargetKL
	fmt.Fprintf(j.c.App.ErrWriter, "mempo-update: step %d/%d: approx KL to the rollout policy %.4g > %g × --target-kl %g = %.4g; stopped after %d of %d steps\n",
		k+1, total, kl, update.KLStopFactor, j.cfg.TargetKL, bound, k, total)
	if n := len(rows); n > 0 && k > 0 {
		rows[n-1].StopApproxKL = &kl
	}
	return tb.Add(global, tbevent.Scalar{Tag: "update/stop_approx_kl", Value: kl}, tbevent.Scalar{Tag: "update/steps_taken", Value: float64(k)})
}

// finish writes --metrics and --golden from the finished --out.
func (j *job) finish(m *model.Model, rows []records.Update) error {
	c := j.c
	if j.comm != nil && j.comm.Rank() != 0 {
		return nil // --metrics and --golden are rank 0's
	}
	var err error
	if rows == nil {
		if rows, err = records.ReadFile[records.Update](filepath.Join(j.out, update.MetricsFile)); err != nil {
			return err
		}
	}
	if p := c.String("metrics"); p != "" {
		if err := records.WriteFile(p, rows); err != nil {
			return err
		}
	}
	if p := c.String("golden"); p != "" {
		if m == nil {
			if m, err = j.reload(nil, false); err != nil {
				return err
			}
		}
		if err := writeGolden(p, m, j.batch); err != nil {
			return err
		}
	}
	return nil
}

// optG formats a metric that may not have been computed.
func optG(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.3g", *p)
}
