#!/usr/bin/env bash
# The MemPO demo: a tiny Qwen2 model trained from scratch on the generated
# world (data/world), through the five commands only:
#
#   world (+ VARIANTS−1 fact-shuffled variants) → mempo-index (each)
#         → expert demonstrations (each) → mempo-update init → sft on all
#         → MemPO iterations: mempo-rollout → mempo-update → (next iteration)
#         → baselines: GRPO without the memory reward, ReAct (--keep all)
#         → evaluation rollouts at k = 2, 4, 8 → mempo-score → summary table
#
# Every knob is a variable below; override any of them from the environment
# (SEED=2 ITERS=6 bash scripts/demo/run.sh). docs/DEMO.md walks through what
# each stage reads and writes. The world's stages (its expert, its
# evaluation) are specific to it: the RL loop on a real checkpoint, retriever
# and QA data is scripts/train/run.sh (make train, docs/TRAINING.md).
set -euo pipefail

# On the CPU the numbers depend on OpenBLAS's kernels and thread count (the
# order of its sums), and near the size where the cold start learns to copy
# that order decides whether it does: on an AVX-512 Xeon, OpenBLAS's own choice
# (SkylakeX) gave a cold start of 1.6 F1 at k = 2 where the README's machine got
# 62.5. So on x86-64 with AVX2 the demo pins the kernels and threads the README
# was made with (docs/DEMO.md, "Reproducing the table"); set either variable
# to choose otherwise.
if [ "$(uname -m)" = x86_64 ] && grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo; then
	export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Zen} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2}
fi

BIN=${BIN:-bin}                       # where make build puts the commands
OUT=${OUT:-runs/demo}                 # everything the demo writes
SEED=${SEED:-1}                       # world seed, model init, sampling
WORLD=${WORLD:-}                      # a world directory; default: data/world for seed 1, else generated
DEVICE=${DEVICE:-}                    # cpu or cuda; empty: cuda when usable
MODEL_CONFIG=${MODEL_CONFIG:-}        # the tiny model's config.json; default: the world's model-config.json
SHORT=${SHORT:-0}                     # 1: the few-second smoke version make test runs

# Size. small fits make demo's budget, 15 minutes on two CPU cores; it is near
# the size where the cold start learns to copy (docs/DEMO.md, "Status").
# full is a larger cold start and more RL: about 5 minutes on an H200, about
# 25 on two CPU cores. gpu is the GPU's preset (scripts/gpu/demo.sh; 3 min 39 s
# a seed from scratch alone on one H100, about 50 on two CPU cores), the
# configuration with the most evidence for the memory reward (docs/DEMO.md,
# "Where it stands"): full's RL, a lossy expert with answer rows and SFT on k
# up to 8, RL tasks of k = 2, 4 and 8, PPO's early stop, R^M scored per
# objective by a reader trained on both kinds of answer rows, A^M pooled per
# step index with the answer step's memory (read by no later step) left out
# and weighted half (α = 0.5: better than α = 1 on 17 fresh runs, docs/DEMO.md),
# 512 test tasks per k (128 until 2026-12-07: a k = 8 interval ±0.7 F1 over
# twelve runs), and GRPO's rollouts scored for R^M so that both curves
# are drawn (each knob still overridable; an empty TARGET_KL or MEM_FLAGS
# turns that one off; SCORE_READER=0 SCORE_PER_OBJECTIVE=0 MEM_FLAGS="--mem-pool
# step" is the preset of the tables before 2026-12-07, MEM_FLAGS="--mem-pool step
# --mem-skip-answer" that of 2026-12-07).
# reader is small's sizes in the configuration where the memory reward beat
# GRPO on the CPU (docs/DEMO.md, "Three cold starts"): the lossy expert with
# answer rows, R^M scored by a reader per objective, RL tasks of k = 2 and 4,
# GRPO's rollouts scored for R^M; 17 minutes a seed on two CPU cores.
# make demo-check runs small over three seeds unless told otherwise.
PRESET=${PRESET:-small}
case $PRESET in
small) p_demos=16000 p_batch=8 p_iters=6 p_rl_tasks=16 p_rl_lr=1e-4 ;;
reader) p_demos=16000 p_batch=8 p_iters=6 p_rl_tasks=16 p_rl_lr=1e-4 GRPO_RM=${GRPO_RM:-1}
	EXPERT_DROP=${EXPERT_DROP:-0.35} ANSWER_ROWS=${ANSWER_ROWS:-0.25} SCORE_READER=${SCORE_READER:-2}
	SCORE_PER_OBJECTIVE=${SCORE_PER_OBJECTIVE:-1} RL_K=${RL_K:-2 4} ;;
full) p_demos=28800 p_batch=8 p_iters=12 p_rl_tasks=16 p_rl_lr=3e-4 ;;
gpu) p_demos=24000 p_batch=8 p_iters=12 p_rl_tasks=16 p_rl_lr=3e-4 GRPO_RM=${GRPO_RM:-1}
	EXPERT_DROP=${EXPERT_DROP:-0.35} ANSWER_ROWS=${ANSWER_ROWS:-0.25} SFT_K=${SFT_K:-1 2 3 4 1 2 3 4 8}
	RL_K=${RL_K:-2 4 8} TARGET_KL=${TARGET_KL-0.01} EVAL_TASKS=${EVAL_TASKS:-512}
	SCORE_READER=${SCORE_READER:-1} READER_MEMORY=${READER_MEMORY:-both} SCORE_PER_OBJECTIVE=${SCORE_PER_OBJECTIVE:-1}
	MEM_FLAGS=${MEM_FLAGS---mem-pool step --mem-skip-answer --alpha 0.5} ;;
*) echo "PRESET=$PRESET: want small, reader, full or gpu" >&2; exit 2 ;;
esac
# Cold start.
SFT_DEMOS=${SFT_DEMOS:-$p_demos}      # expert trajectories used for SFT (each seen once: repeated
SFT_EPOCHS=${SFT_EPOCHS:-1}           # demonstrations get memorized instead of teaching to copy)
SFT_K=${SFT_K:-1 2 3 4}               # objective counts of the SFT tasks, in turn (1 2 3 4 is the world's own
                                      # train-sft.jsonl; any other list draws the tasks again for every world;
                                      # docs/DEMO.md, "Ablations", for what k up to 8 gave)
SFT_LR=${SFT_LR:-3e-3}                # peak learning rate
SFT_SCHEDULE=${SFT_SCHEDULE:-cosine}  # cosine: warmup then down to a tenth; constant: warmup then flat
SFT_BATCH=${SFT_BATCH:-$p_batch}      # trajectories per optimizer step
REACT_DEMOS=${REACT_DEMOS:-480}       # the ReAct baseline: SFT's model trained further on REACT_DEMOS
REACT_EPOCHS=${REACT_EPOCHS:-1}       # full-history (--keep all) demonstrations
EXPERT_DROP=${EXPERT_DROP:-0}         # lossy expert: probability that a step of the keep-1 demonstrations leaves the
                                      # fact just found out of <mem> and repeats the lookup (0: perfect; docs/DEMO.md)
ANSWER_ROWS=${ANSWER_ROWS:-0}         # fraction of the keep-1 demonstrations that also give an answer-from-memory row
                                      # (R^M's scoring sequence of one of its steps → the gold; 0: none; docs/DEMO.md)
ANSWER_MEMORY=${ANSWER_MEMORY:-step}  # the memory an answer row answers from: step (the drawn step's) or subset (the
                                      # final memory, each entry kept with probability 1/2; docs/DEMO.md)
MEM_SLOTS=${MEM_SLOTS:-0}             # 1: the expert's memory lists every objective from the first step, "[j] ?" until
                                      # found (mempo-rollout expert --mem-slots; docs/DEMO.md)
FROM_SFT=${FROM_SFT:-}                # a directory holding sft/ and sft-react/ of an earlier run with the
                                      # same world: reuse them and skip stages 3–5 (to try RL settings)
VARIANTS=${VARIANTS:-8}               # demonstrations from the world and VARIANTS−1 fact-shuffled variants
                                      # (same names and tokenizer, facts drawn again): facts cannot be memorized
# RL.
ITERS=${ITERS:-$p_iters}              # MemPO iterations (rollout → update)
RL_TASKS=${RL_TASKS:-$p_rl_tasks}     # training tasks per iteration
RL_K=${RL_K:-2}                       # objective counts of the RL tasks (2: the world's train-rl-k2.jsonl; any other
                                      # k's tasks are drawn for the same world, like SFT_K's; docs/DEMO.md)
RL_ORDER=${RL_ORDER:-mix}             # mix: each iteration's tasks cycle through RL_K task by task; curriculum: the
                                      # iterations go through RL_K in order, ITERS / (number of k) iterations each
GROUP=${GROUP:-8}                     # G, trajectories per task
RL_LR=${RL_LR:-$p_rl_lr}
RL_MINI_BATCH=${RL_MINI_BATCH:-16}    # trajectories per optimizer step (an iteration takes RL_TASKS*GROUP/RL_MINI_BATCH steps)
RL_TEMP=${RL_TEMP:-1}
RL_SEED=${RL_SEED:-$SEED}             # the RL rollouts' sampling seeds and the updates' mini-batch order (another
                                      # value: another RL run from the same world and cold start; docs/DEMO.md)
GRPO_RM=${GRPO_RM:-0}                 # 1: score R^M on GRPO's rollouts too, to plot it beside MemPO's (its updates
                                      # ignore it; make demo-check sets it)
MEM_FLAGS=${MEM_FLAGS:-}              # extra mempo-update flags of MemPO's updates only (--alpha, --mem-pool step)
SCORE_LAYOUT=${SCORE_LAYOUT:-turn}    # where R^M reads the memory (mempo-rollout --score-layout): turn, next-step
SCORE_PER_OBJECTIVE=${SCORE_PER_OBJECTIVE:-0} # 1: P(gold | ·) is the mean over objectives of each one's (mempo-rollout
                                      # --score-per-objective; docs/DEMO.md, "What the scorer copies")
SCORE_READER=${SCORE_READER:-0}       # N > 0: R^M of the RL rollouts scored by a reader (mempo-rollout --score-model):
                                      # the SFT model trained N epochs more on answer rows alone, one per SFT task, from
                                      # the memory READER_MEMORY names (0: the policy scores its own memories, the paper's)
READER_MEMORY=${READER_MEMORY:-subset} # the memory a reader row answers from: subset (of the task's final memory),
                                      # step (a drawn step's, so intermediate entities a two-hop objective needs next too)
                                      # or both (a row of each per SFT task: SCORE_READER=1 takes the steps 2 take on one)
NEW_READER=${NEW_READER:-0}           # 1 with FROM_SFT: train a reader from its sft/ on its SFT tasks (READER_MEMORY's
                                      # rows) instead of copying its reader/, to try another reader on one cold start
READER_LR=${READER_LR:-1e-3}          # the reader's peak learning rate
KL_COEF=${KL_COEF:-0.001}
TARGET_KL=${TARGET_KL:-}              # PPO early stop of every RL update (MemPO's and GRPO's): mempo-update --target-kl;
                                      # empty: not passed (off); docs/DEMO.md
TASK_REWARD=${TASK_REWARD:-f1}        # R^T of the RL rollouts: f1 (mean over objectives, partial credit) or exact
# Evaluation.
EVAL_K=${EVAL_K:-"2 4 8"}
EVAL_TASKS=${EVAL_TASKS:-32}          # test tasks per k (held-out people), greedy (the world holds 32; more are
                                      # drawn for the same world, the first 32 the world's own)
EVAL_MODELS=${EVAL_MODELS:-sft mempo grpo react} # the models evaluated (the expert always is)
EVAL_ONLY=${EVAL_ONLY:-0}             # 1: evaluate the checkpoints already in OUT and score them again (stages 3–6
                                      # skipped; another EVAL_TASKS or EVAL_K on finished runs)
# Protocol (the expert's demonstrations, RL and evaluation alike).
MAX_STEP_TOKENS=${MAX_STEP_TOKENS:-96}
TOPK=${TOPK:-2}                       # passages per search: the fact and one other passage about the same entity
HINT=${HINT:-false}                   # the "[Turns left: N]" line in observations

case $READER_MEMORY in subset|step|both) ;; *) echo "READER_MEMORY=$READER_MEMORY: want subset, step or both" >&2; exit 2 ;; esac
case $NEW_READER in 0|1) ;; *) echo "NEW_READER=$NEW_READER: want 0 or 1" >&2; exit 2 ;; esac
case $EVAL_ONLY in 0|1) ;; *) echo "EVAL_ONLY=$EVAL_ONLY: want 0 or 1" >&2; exit 2 ;; esac
for run in $EVAL_MODELS; do
	case $run in sft|mempo|grpo|react) ;; *) echo "EVAL_MODELS: $run is not sft, mempo, grpo or react" >&2; exit 2 ;; esac
done

if [ "$SHORT" = 1 ]; then
	SFT_DEMOS=${SHORT_SFT_DEMOS:-8}; REACT_DEMOS=$SFT_DEMOS; SFT_EPOCHS=1; REACT_EPOCHS=1; SFT_BATCH=4; RL_MINI_BATCH=2
	ITERS=1; RL_TASKS=2; GROUP=2; EVAL_K=${SHORT_EVAL_K:-2}; EVAL_TASKS=${SHORT_EVAL_TASKS:-2}; MAX_STEP_TOKENS=24; VARIANTS=2
fi

say() { printf '\n== %s\n' "$*" >&2; }
# world_seed WHAT: the seed $WORLD was generated with (WHAT, the knob that
# needs it, names it in the error).
world_seed() {
	local seed
	seed=$(sed -n 's/^ *"Seed": *\([0-9]*\),*$/\1/p' "$WORLD/world.json")
	[ -n "$seed" ] || { echo "$1: no seed in $WORLD/world.json" >&2; return 1; }
	echo "$seed"
}
# redraw WHAT DIR FLAG…: $WORLD's tasks drawn again with other sizes
# (mempo-rollout world with its seed and FLAG…) into DIR, checked to be the
# same world: corpus and tokenizer byte-identical.
redraw() {
	local what=$1 dir=$2 seed
	shift 2
	seed=$(world_seed "$what")
	"$BIN/mempo-rollout" world --seed "$seed" --out "$dir" "$@"
	cmp -s "$WORLD/corpus.jsonl" "$dir/corpus.jsonl" && cmp -s "$WORLD/tokenizer.json" "$dir/tokenizer.json" ||
		{ echo "$what: seed $seed does not regenerate $WORLD's corpus and tokenizer (a world written with other sizes?)" >&2; exit 1; }
}
T0=$(date +%s)
mkdir -p "$OUT"
dev=()
[ -n "$DEVICE" ] && dev=(--device "$DEVICE")
guard=()
[ -n "$TARGET_KL" ] && guard=(--target-kl "$TARGET_KL")
proto=(--topk "$TOPK" --hint="$HINT")
# R^M's teacher-forced sequences (the rollouts score them, the expert's
# answer rows teach them). The expert (and so the policy) ends with
# "<think>all 2 answers are known</think><answer>[1] Oston; [2] bells",
# numbering its answers as its memory does: R^M scores the gold after the
# same thought, numbered the same way, the ids the policy writes.
score=(--score-gold-numbered --score-lead-in "<think>all {k} answers are known</think><answer>" --score-layout "$SCORE_LAYOUT")
[ "$SCORE_PER_OBJECTIVE" = 1 ] && score+=(--score-per-objective)
slots=(); [ "$MEM_SLOTS" = 1 ] && slots=(--mem-slots)   # the expert's memory layout
# sft_copy DIR: the SFT weights in DIR with a fresh optimizer (what the ReAct
# SFT, the reader and each RL run start from).
sft_copy() { rm -rf "$1" && cp -r "$OUT/sft" "$1" && rm -f "$1/optimizer.safetensors"; }

# reader_stage SRC: stage 5', with SCORE_READER=N a reader of memories for
# R^M: $OUT/sft trained N epochs more on answer rows alone, one per SFT task
# of the run in SRC (its sft-tasks*.jsonl, index/ and variants/vV/index) and
# kind of row, each answering from a subset of the task's final memory or a
# drawn step's (READER_MEMORY; docs/DEMO.md, "What the scorer copies": the
# cold start itself reads only the first answers of a memory).
reader_stage() {
	local src=$1 kinds=$READER_MEMORY kind v sfx idx pre n steps rows=() files=()
	[ "$READER_MEMORY" = both ] && kinds="subset step"
	for kind in $kinds; do
		pre=reader; [ "$READER_MEMORY" = both ] && [ "$kind" = step ] && pre=reader-step
		for v in $(seq 0 $(( VARIANTS - 1 ))); do
			sfx=; idx=$src/index; [ "$v" -gt 0 ] && sfx=-v$v idx=$src/variants/v$v/index
			[ -f "$src/sft-tasks$sfx.jsonl" ] || { echo "reader: no $src/sft-tasks$sfx.jsonl (VARIANTS=$VARIANTS)" >&2; exit 1; }
			"$BIN/mempo-rollout" expert --tasks "$src/sft-tasks$sfx.jsonl" --index "$idx" \
				--tokenizer "$WORLD/tokenizer.json" --keep 1 "${proto[@]}" "${score[@]}" "${slots[@]}" \
				--answer-rows "$OUT/$pre-rows$sfx.jsonl" --answer-rate 1 --answer-memory "$kind" --out "$OUT/$pre-demos$sfx.parquet"
			rows+=(--data "$OUT/$pre-rows$sfx.jsonl") files+=("$OUT/$pre-rows$sfx.jsonl")
		done
	done
	n=$(cat "${files[@]}" | wc -l)
	steps=$(( (n + SFT_BATCH - 1) / SFT_BATCH * SCORE_READER ))
	sft_copy "$OUT/reader-init"
	say "reader ← $OUT/sft + $n answer rows ($steps steps)"
	"$BIN/mempo-update" sft --model "$OUT/reader-init" "${rows[@]}" --out "$OUT/reader" \
		--epochs "$SCORE_READER" --lr "$READER_LR" --batch-size "$SFT_BATCH" --seed "$SEED" \
		--schedule cosine --warmup $(( steps / 20 )) --total-steps "$steps" --min-lr-ratio 0.1 \
		--metrics "$OUT/reader-metrics.jsonl" "${dev[@]}"
}

# rollout MODEL TASKS OUT [flags…]: one rollout run with the demo's protocol.
rollout() {
	local model=$1 tasks=$2 out=$3; shift 3
	"$BIN/mempo-rollout" --model "$model" --tasks "$tasks" --index "$OUT/index" --out "$out" \
		--max-step-tokens "$MAX_STEP_TOKENS" "${proto[@]}" "${score[@]}" --batch 128 --overwrite "${dev[@]}" "$@"
}


# evaluate: stage 7, evaluation on held-out people: greedy, one trajectory
# per task, each of EVAL_MODELS and the expert. With more EVAL_TASKS than the
# world's test files hold, the test tasks are drawn again for the same world
# (corpus and tokenizer byte-identical, checked); each k's tasks come from one
# stream, so the first 32 are the world's own and a larger evaluation extends
# the smaller one.
evaluate() {
	local test_dir=$WORLD k tasks run model keep mr name
	mkdir -p "$OUT/eval"
	for k in $EVAL_K; do
		[ -f "$WORLD/test-k$k.jsonl" ] && [ "$(wc -l < "$WORLD/test-k$k.jsonl")" -ge "$EVAL_TASKS" ] && continue
		test_dir=$OUT/test-world
		say "test tasks, $EVAL_TASKS per k in $EVAL_K → $test_dir"
		redraw EVAL_TASKS "$test_dir" --sft-tasks 0 --rl-tasks 0 --test-tasks "$EVAL_TASKS" --test-k "$(echo $EVAL_K | tr ' ' ,)"
		break
	done
	for k in $EVAL_K; do
		tasks=$OUT/eval/test-k$k.jsonl
		head -n "$EVAL_TASKS" "$test_dir/test-k$k.jsonl" > "$tasks"
		for run in $EVAL_MODELS; do
			model=$OUT/$run/final keep=1 mr=()
			case $run in
			sft) model=$OUT/sft ;;
			react) model=$OUT/sft-react keep=all ;;
			esac
			# The memory reward (P(gold | mem)) is scored where the table reads it.
			[ "$k" = 2 ] && { [ "$run" = sft ] || [ "$run" = mempo ] || { [ "$run" = grpo ] && [ "$GRPO_RM" = 1 ]; }; } ||
				mr=(--no-memory-reward)
			say "eval $run k=$k"
			rollout "$model" "$tasks" "$OUT/eval/$run-k$k.parquet" --group 1 --temperature 0 --keep "$keep" "${mr[@]}"
		done
		# The expert on the same tasks, under both contexts: what a policy that
		# follows the protocol perfectly costs in tokens, whatever the models learned.
		for keep in 1 all; do
			name=expert; [ "$keep" = all ] && name=expert-react
			"$BIN/mempo-rollout" expert --tasks "$tasks" --index "$OUT/index" --tokenizer "$WORLD/tokenizer.json" \
				--keep "$keep" "${proto[@]}" --out "$OUT/eval/$name-k$k.parquet"
		done
	done
}

# report: stage 8, scores, report and plots of the models evaluated. The
# training side (reward, memory reward and peak tokens over the updates)
# first, in report/train/, so that the evaluation report's index.html,
# written next, links to it.
report() {
	local args=() v i run k
	say "score → $OUT/scores.jsonl, $OUT/report/ (index.html lists every table and figure)"
	mkdir -p "$OUT/report"
	for v in mempo grpo; do
		for i in $(seq 1 "$ITERS"); do args+=(--rollouts "$OUT/$v/rollouts-$i.parquet" --label "$v-train"); done
	done
	"$BIN/mempo-score" "${args[@]}" --metrics "$OUT/mempo/mempo-train.jsonl" --metrics "$OUT/grpo/grpo-train.jsonl" \
		--out "$OUT/train-scores.jsonl" --report "$OUT/report/train" > "$OUT/report/train-scores.md"
	args=()
	for run in $EVAL_MODELS expert expert-react; do
		for k in $EVAL_K; do args+=(--rollouts "$OUT/eval/$run-k$k.parquet" --label "$run"); done
	done
	"$BIN/mempo-score" "${args[@]}" --out "$OUT/scores.jsonl" --report "$OUT/report" > "$OUT/report/scores.md"

	bash "$(dirname "$0")/summary.sh" "$OUT" "$EVAL_K" | tee "$OUT/summary.md"
	echo "demo finished in $(( $(date +%s) - T0 ))s; report in $OUT/report/" >&2
}

# 1. The world: corpus, tasks, tokenizer, model config.
if [ -z "$WORLD" ]; then
	if [ "$SEED" = 1 ] && [ -f data/world/world.json ]; then
		WORLD=data/world
	else
		WORLD=$OUT/world
		say "world (seed $SEED) → $WORLD"
		"$BIN/mempo-rollout" world --seed "$SEED" --out "$WORLD"
	fi
fi

# 2. The retrieval index (BM25) over the world's corpus.
say "index → $OUT/index"
"$BIN/mempo-index" --corpus "$WORLD/corpus.jsonl" --out "$OUT/index"

# EVAL_ONLY=1: the run's checkpoints are there; stages 7 and 8 only.
if [ "$EVAL_ONLY" = 1 ]; then
	for ckpt in sft sft-react mempo/final grpo/final; do
		[ -f "$OUT/$ckpt/config.json" ] || { echo "EVAL_ONLY=1: no $OUT/$ckpt checkpoint" >&2; exit 1; }
	done
	evaluate
	report
	exit 0
fi

# 3. Expert demonstrations, MemPO's context (keep 1) and ReAct's (keep all),
#    drawn from the world and VARIANTS−1 fact-shuffled variants of it (the
#    same names, tokenizer and model config; every fact drawn again, each
#    variant with its own corpus and index): a person's city changes from one
#    variant to the next, so the demonstrations cannot be learned by
#    remembering facts, only by copying them from the passages. RL and
#    evaluation use the world itself.
variant_dirs=("$WORLD") variant_index=("$OUT/index")
sft_world=$WORLD
if [ "$SFT_K" != "1 2 3 4" ] && [ -z "$FROM_SFT" ]; then
	# The world's own SFT tasks cycle k = 1 … 4; SFT_K draws them again.
	sft_world=$OUT/sft-world
	say "SFT tasks, k in $SFT_K → $sft_world"
	redraw SFT_K "$sft_world" --sft-k "${SFT_K// /,}" \
		--sft-tasks "$(( (SFT_DEMOS > REACT_DEMOS ? SFT_DEMOS : REACT_DEMOS) / VARIANTS + 1 ))" --rl-tasks 0 --test-tasks 0
fi
if [ "$VARIANTS" -gt 1 ] && [ -z "$FROM_SFT" ]; then
	seed=$(world_seed VARIANTS)
	for v in $(seq 1 $(( VARIANTS - 1 ))); do
		say "variant $v (facts $v) → $OUT/variants/v$v, its index"
		"$BIN/mempo-rollout" world --seed "$seed" --fact-seed "$v" --out "$OUT/variants/v$v" \
			--sft-tasks "$(( (SFT_DEMOS > REACT_DEMOS ? SFT_DEMOS : REACT_DEMOS) / VARIANTS + 1 ))" --sft-k "${SFT_K// /,}" --rl-tasks 0 --test-tasks 0
		cmp -s "$WORLD/tokenizer.json" "$OUT/variants/v$v/tokenizer.json" ||
			{ echo "variant $v: its tokenizer differs from $WORLD's (a world written with other sizes?)" >&2; exit 1; }
		"$BIN/mempo-index" --corpus "$OUT/variants/v$v/corpus.jsonl" --out "$OUT/variants/v$v/index"
		variant_dirs+=("$OUT/variants/v$v") variant_index+=("$OUT/variants/v$v/index")
	done
fi
if [ -n "$FROM_SFT" ]; then
	say "sft, sft-react ← $FROM_SFT (stages 3–5 skipped)"
	names=(sft sft-react); [ "$SCORE_READER" != 0 ] && [ "$NEW_READER" != 1 ] && names+=(reader)
	for name in "${names[@]}"; do
		[ -f "$FROM_SFT/$name/config.json" ] || { echo "FROM_SFT=$FROM_SFT: no $name/ checkpoint there" >&2; exit 1; }
		[ "$(cd "$FROM_SFT" && pwd)" = "$(cd "$OUT" && pwd)" ] || { rm -rf "${OUT:?}/$name"; cp -r "$FROM_SFT/$name" "$OUT/$name"; }
	done
	if [ "$SCORE_READER" != 0 ] && [ "$NEW_READER" = 1 ]; then reader_stage "$FROM_SFT"; fi
else
	say "expert demonstrations → $OUT/demos*.parquet ($VARIANTS world(s))"
	demos=() demos_react=()
	for v in "${!variant_dirs[@]}"; do
		# n demonstrations split as evenly as the variants allow.
		n=$(( SFT_DEMOS / VARIANTS + (v < SFT_DEMOS % VARIANTS ? 1 : 0) ))
		nr=$(( REACT_DEMOS / VARIANTS + (v < REACT_DEMOS % VARIANTS ? 1 : 0) ))
		sfx=; [ "$v" -gt 0 ] && sfx=-v$v
		src=${variant_dirs[$v]}/train-sft.jsonl; [ "$v" = 0 ] && src=$sft_world/train-sft.jsonl
		head -n "$n" "$src" > "$OUT/sft-tasks$sfx.jsonl"
		head -n "$nr" "$src" > "$OUT/sft-react-tasks$sfx.jsonl"
		for keep in 1 all; do
			name=demos$sfx tasks=$OUT/sft-tasks$sfx.jsonl; [ "$keep" = all ] && name=demos-react$sfx tasks=$OUT/sft-react-tasks$sfx.jsonl
			# The lossy memory is MemPO's context's flaw: the full-history
			# demonstrations keep every fact in their context anyway.
			drop=(); [ "$keep" = 1 ] && drop=(--drop-rate "$EXPERT_DROP" --drop-seed $(( SEED * 100 + v )))
			# Answer-from-memory rows (JSONL, so that they can be counted)
			# come with MemPO's context's demonstrations.
			ans=(); [ "$keep" = 1 ] && [ "$ANSWER_ROWS" != 0 ] && ans=(--answer-rows "$OUT/answers$sfx.jsonl" --answer-rate "$ANSWER_ROWS" --answer-memory "$ANSWER_MEMORY")
			"$BIN/mempo-rollout" expert --tasks "$tasks" --index "${variant_index[$v]}" \
				--tokenizer "$WORLD/tokenizer.json" --keep "$keep" "${proto[@]}" "${score[@]}" "${drop[@]}" "${slots[@]}" "${ans[@]}" --out "$OUT/$name.parquet"
		done
		demos+=(--data "$OUT/demos$sfx.parquet") demos_react+=(--data "$OUT/demos-react$sfx.parquet")
		if [ "$ANSWER_ROWS" != 0 ]; then demos+=(--data "$OUT/answers$sfx.jsonl"); fi
	done
	# The demonstrations there are: a world has only so many SFT tasks (2400
	# in data/world), fewer than full's share of 3600.
	n_sft=$(cat "$OUT"/sft-tasks*.jsonl | wc -l) n_react=$(cat "$OUT"/sft-react-tasks*.jsonl | wc -l)
	if [ "$ANSWER_ROWS" != 0 ]; then n_sft=$(( n_sft + $(cat "$OUT"/answers*.jsonl | wc -l) )); fi

	# 4. A randomly initialised tiny Qwen2 (a Hugging Face directory).
	say "init → $OUT/init"
	"$BIN/mempo-update" init --config "${MODEL_CONFIG:-$WORLD/model-config.json}" --tokenizer "$WORLD/tokenizer.json" \
		--out "$OUT/init" --seed "$SEED" --force

	# 5. SFT cold start on the demonstrations, warmup then cosine decay over all
	#    its optimizer steps; then the ReAct baseline: the SFT model trained
	#    further on full-history demonstrations (it starts from the same skills;
	#    only the context it works in differs).
	for name in sft sft-react; do
		data=("${demos[@]}") epochs=$SFT_EPOCHS n=$n_sft from=$OUT/init
		if [ "$name" = sft-react ]; then
			data=("${demos_react[@]}") epochs=$REACT_EPOCHS n=$n_react from=$OUT/sft-react-init
			# The SFT weights with a fresh optimizer and schedule.
			sft_copy "$from"
		fi
		steps=$(( (n + SFT_BATCH - 1) / SFT_BATCH * epochs ))
		say "$name ← $from + $n demonstrations ($steps steps)"
		"$BIN/mempo-update" sft --model "$from" "${data[@]}" --out "$OUT/$name" \
			--epochs "$epochs" --lr "$SFT_LR" --batch-size "$SFT_BATCH" --seed "$SEED" \
			--schedule "$SFT_SCHEDULE" --warmup $(( steps / 20 )) --total-steps "$steps" --min-lr-ratio 0.1 \
			--metrics "$OUT/$name-metrics.jsonl" "${dev[@]}"
	done

	# 5'. The reader (SCORE_READER; reader_stage).
	if [ "$SCORE_READER" != 0 ]; then reader_stage "$OUT"; fi
fi

# 6. RL: ITERS iterations of rollout → update from the SFT checkpoint, for
#    MemPO (memory reward on <mem> tokens) and plain GRPO (no memory reward).
#    The RL tasks: the world's train-rl-k2.jsonl, or with RL_K another list
#    of k, ITERS × RL_TASKS tasks in the order the iterations take them (the
#    tasks of a k the world has no file for are drawn for the same world:
#    corpus and tokenizer byte-identical, checked).
rl_tasks=$WORLD/train-rl-k2.jsonl
if [ "$RL_K" != 2 ]; then
	read -r -a rl_ks <<< "$RL_K"
	case $RL_ORDER in mix|curriculum) ;; *) echo "RL_ORDER=$RL_ORDER: want mix or curriculum" >&2; exit 2 ;; esac
	n_rl=$(( ITERS * RL_TASKS ))
	rl_files=()
	for k in "${rl_ks[@]}"; do
		f=$WORLD/train-rl-k$k.jsonl
		if [ ! -f "$f" ] || [ "$(wc -l < "$f")" -lt "$n_rl" ]; then
			say "RL tasks, k = $k → $OUT/rl-world-k$k"
			redraw RL_K "$OUT/rl-world-k$k" --rl-k "$k" --rl-tasks "$n_rl" --sft-tasks 0 --test-tasks 0
			f=$OUT/rl-world-k$k/train-rl-k$k.jsonl
		fi
		rl_files+=("$f")
	done
	# order: for each task slot, in turn, the position of its k in RL_K
	# (1-based); each k's tasks are taken from its file in order.
	order=()
	for i in $(seq 1 "$ITERS"); do
		for j in $(seq 0 $(( RL_TASKS - 1 ))); do
			if [ "$RL_ORDER" = mix ]; then
				order+=($(( ((i - 1) * RL_TASKS + j) % ${#rl_ks[@]} + 1 )))
			else
				order+=($(( (i - 1) * ${#rl_ks[@]} / ITERS + 1 )))
			fi
		done
	done
	rl_tasks=$OUT/rl-tasks.jsonl
	awk -v order="${order[*]}" 'FNR == 1 { f++ } { line[f, FNR] = $0 }
		END { n = split(order, o, " "); for (i = 1; i <= n; i++) print line[o[i], ++c[o[i]]] }' "${rl_files[@]}" > "$rl_tasks"
	say "RL tasks: $n_rl, k in $RL_K ($RL_ORDER) → $rl_tasks"
fi
rl() {
	local variant=$1; shift
	local dir=$OUT/$variant ckpt
	mkdir -p "$dir"
	# RL starts from the SFT weights with a fresh optimizer.
	sft_copy "$dir/iter0"
	ckpt=$dir/iter0
	: > "$dir/$variant-train.jsonl"
	for i in $(seq 1 "$ITERS"); do
		# Iteration i takes the next RL_TASKS tasks of the training set.
		sed -n "$(( (i - 1) * RL_TASKS + 1 )),$(( i * RL_TASKS ))p" "$rl_tasks" > "$dir/tasks-$i.jsonl"
		say "$variant iteration $i/$ITERS: rollout ($RL_TASKS tasks × $GROUP)"
		# GRPO's rollouts score R^M too when GRPO_RM=1, only to be plotted
		# beside MemPO's: its updates never read it (--no-mem-adv).
		local mr=(); [ "$variant" = grpo ] && [ "$GRPO_RM" != 1 ] && mr=(--no-memory-reward)
		[ ${#mr[@]} = 0 ] && [ "$SCORE_READER" != 0 ] && mr=(--score-model "$OUT/reader")
		rollout "$ckpt" "$dir/tasks-$i.jsonl" "$dir/rollouts-$i.parquet" \
			--group "$GROUP" --temperature "$RL_TEMP" --task-reward "$TASK_REWARD" --seed $(( RL_SEED * 1000 + i )) "${mr[@]}"
		say "$variant iteration $i/$ITERS: update"
		local adv=(); [ "$variant" = grpo ] && adv=(--no-mem-adv)
		# shellcheck disable=SC2206 # MEM_FLAGS is a list of flags
		[ "$variant" = mempo ] && adv=($MEM_FLAGS)
		"$BIN/mempo-update" --model "$ckpt" --ref "$OUT/sft" --rollouts "$dir/rollouts-$i.parquet" \
			--out "$dir/iter$i" --lr "$RL_LR" --kl-coef "$KL_COEF" --mini-batch "$RL_MINI_BATCH" --seed "$RL_SEED" "${adv[@]}" \
			"${guard[@]}" --metrics "$dir/metrics-$i.jsonl" "${dev[@]}"
		cat "$dir/metrics-$i.jsonl" >> "$dir/$variant-train.jsonl"
		ckpt=$dir/iter$i
	done
	ln -sfn "iter$ITERS" "$dir/final"
}
rl mempo
rl grpo

# 7. Evaluation (evaluate), 8. scores and the report (report).
evaluate
report
