#!/usr/bin/env bash
# The MemPO training loop (the paper's RL stage) on a checkpoint, retriever and
# QA data of your own, through the five commands only:
#
#   tasks (mempo-rollout tasks over TRAIN, shuffled once)
#     → ITERS × [ mempo-rollout (G samples of TASKS_PER_ITER tasks)
#                → mempo-update (GRPO advantage + memory advantage on <mem>, KL to REF) ]
#     → greedy evaluation rollouts over EVAL (every EVAL_EVERY iterations and at the end)
#     → mempo-score: EM, F1, turns, peak and total tokens with 95% intervals, and
#       the training curves (reward, memory reward, peak tokens) as PNGs
#
# Every knob is a variable below; set any of them in the environment
# (MODEL=/ckpt/mempo-sft RETRIEVER=http://host:8000 TRAIN=train.parquet bash
# scripts/train/run.sh). docs/TRAINING.md is the recipe from a fresh machine.
#
# Two presets. PRESET=paper (the default when MODEL is given) uses the paper's
# settings: G = 16 samples a task, 128 tasks an iteration, learning rate 1e-6,
# KL 0.001, one kept step (MemPO's memory context), 16 turns. PRESET=small (the
# default without MODEL, what `make train` runs) makes everything itself from
# ../shared/data: a BM25 index over the HotpotQA dev paragraphs, 2-objective
# training tasks from HotpotQA train and NQ, evaluation sets of six benchmarks
# (scripts/train/eval_data.sh), and a tiny random Qwen2-shaped model with the
# real Qwen tokenizer; it runs in about 10 minutes on two CPU cores. The
# small run proves that the loop, its files, its resume and its report work
# end to end on real data and a real tokenizer; it cannot show learning: a
# random two-layer model with a 64-wide hidden state writes unformatted text,
# so its rewards are zero and its scores are zero.
#
# Files, all under OUT (docs/TRAINING.md, "What each iteration writes"):
#   data/            train-tasks.jsonl (the shuffled training tasks), the index and
#                    evaluation sets when made here
#   iter-0/ckpt      the starting checkpoint (MODEL's files linked, or the random init)
#   iter-N/          tasks.jsonl, rollouts.parquet, metrics.jsonl, ckpt/ (a Hugging
#                    Face directory with optimizer state), eval/*.parquet, *.log,
#                    and the stage markers .rollout.done, .update.done, .eval.done
#   final            a link to the last iteration's ckpt
#   timings.tsv      wall seconds of every stage of every iteration
#   report/          scores.md (the evaluation table), scores.jsonl, F1 and peak tokens
#                    against k as PNGs; report/train/: reward.png, peak_tokens_updates.png,
#                    memory_reward.png (when some step wrote a <mem> block)
#
# Killed at any point, the same command resumes at the stage it was in: a stage
# whose marker is written is skipped, a rollout continues from its journal, an
# update from its last saved step (SAVE_EVERY), and the index, data and
# evaluation files already written are kept.
set -euo pipefail

BIN=${BIN:-bin}                        # where make build puts the commands
OUT=${OUT:-runs/train}                 # everything the run writes
MODEL=${MODEL:-}                       # the starting checkpoint (a Hugging Face directory, e.g. the MemPO SFT model)
PRESET=${PRESET:-}                     # paper or small; default: paper with MODEL, small without
SHARED=${SHARED:-../shared/data}       # the shared QA files the small preset and eval_data.sh read
SEED=${SEED:-1}                        # task shuffle, sampling, mini-batches, the small model's init

[ -n "$PRESET" ] || { [ -n "$MODEL" ] && PRESET=paper || PRESET=small; }
case $PRESET in
# G tasks/iter iters lr max-turns step-tokens eval-tasks eval-every
paper) p_G=16 p_T=128 p_iters=0 p_lr=1e-6 p_turns=16 p_steptok=1024 p_evaltasks=0 p_evalevery=0 ;;
small) p_G=4 p_T=8 p_iters=3 p_lr=1e-4 p_turns=4 p_steptok=24 p_evaltasks=4 p_evalevery=3 ;;
*) echo "PRESET=$PRESET: want paper or small" >&2; exit 2 ;;
esac

# The policy and the reference.
REF=${REF:-}                           # the KL reference (default: MODEL, i.e. iter-0/ckpt)
MODEL_CONFIG=${MODEL_CONFIG:-tiny}     # without MODEL: the random model's config (a preset of mempo-update init, or a config.json)
TOKENIZER=${TOKENIZER:-testdata/qwen3/tokenizer.json} # without MODEL: its tokenizer (the real Qwen2.5/Qwen3 one)
# Retrieval: one of RETRIEVER and INDEX; neither: a BM25 index built here over the HotpotQA paragraphs.
RETRIEVER=${RETRIEVER:-}               # URL of a server speaking the /retrieve contract (mempo-serve, Search-R1's)
INDEX=${INDEX:-}                       # a mempo-index directory, searched in process
TOPK=${TOPK:-3}                        # passages per search
# Training data.
TRAIN=${TRAIN:-}                       # QA or tasks files (Search-R1 / MemPO parquet, FlashRAG JSONL, HotpotQA, MuSiQue,
                                       # mempo tasks), space-separated; default: HotpotQA train + NQ (see below)
K=${K:-2}                              # objectives per training task (the paper's 2-objective mix)
# The RL loop.
G=${G:-$p_G}                           # trajectories per task
TASKS_PER_ITER=${TASKS_PER_ITER:-$p_T} # tasks per iteration (the paper's batch of 128 prompts)
ITERS=${ITERS:-$p_iters}               # iterations; 0: one pass over the training tasks
LR=${LR:-$p_lr}                        # learning rate (constant)
KL=${KL:-0.001}                        # β of the KL term to REF
KEEP=${KEEP:-1}                        # previous steps kept in the context: 1 (MemPO), K, or all (ReAct)
MAX_TURNS=${MAX_TURNS:-$p_turns}       # steps a trajectory may take
MAX_STEP_TOKENS=${MAX_STEP_TOKENS:-$p_steptok} # generation budget of one step
OBS_TOKENS=${OBS_TOKENS:-1000}         # cap on one observation's ids
TEMPERATURE=${TEMPERATURE:-1}          # rollout sampling temperature
TASK_REWARD=${TASK_REWARD:-exact}      # R^T: exact (1 when every answer exact-matches: the paper's), em or f1 (partial credit)
MINI_BATCH=${MINI_BATCH:-}             # trajectories per optimizer step; default: half an iteration's (MEM1's 64 of 128 prompts)
MEMORY_REWARD=${MEMORY_REWARD:-1}      # 0: plain GRPO (no R^M passes, no A^M)
TARGET_KL=${TARGET_KL:-}               # PPO's early stop: an update ends at the first mini-batch whose approximate KL to the rollout policy passes 1.5 × this (mempo-update --target-kl); empty: off
SAVE_EVERY=${SAVE_EVERY:-0}            # write a resumable update checkpoint every N optimizer steps (0: only at the end)
# Memory and disk of the update (docs/TRAINING.md, "A 7B model on one GPU").
LORA_RANK=${LORA_RANK:-0}              # > 0: train a LoRA adapter of this rank on the frozen MODEL (iter-N/ckpt is the adapter)
LORA_ALPHA=${LORA_ALPHA:-}             # the adapter's alpha (default: mempo-update's, 2 × rank)
OPTIM_STATE=${OPTIM_STATE:-fp32}       # full-parameter AdamW state: fp32, or 8bit (bf16 weights + 8-bit moments: 7B on one GPU)
OPTIMIZER_DIR=${OPTIMIZER_DIR:-}       # with 8bit: keep the optimizer state here instead of in the checkpoint (e.g. /dev/shm/run; only the last iteration's)
OPTIMIZER_EVERY=${OPTIMIZER_EVERY:-1}  # with 8bit: keep the optimizer state only every N iterations (the others start it fresh)
RECOMPUTE=${RECOMPUTE:-0}              # 1: recompute activations in the backward (long contexts, large models)
MICRO_TOKENS=${MICRO_TOKENS:-}         # ids per forward/backward micro-batch (default: mempo-update's)
ROLLOUT_BATCH=${ROLLOUT_BATCH:-256}    # trajectories in flight in a rollout (at least G)
DEVICE=${DEVICE:-}                     # cpu, cuda or cuda-bf16; empty: cuda when usable
GPUS=${GPUS:-1}                        # GPUs of this machine: N > 1 runs N rollout shards in parallel (one a GPU, then merged) and the update on N ranks (--nproc N)
KEEP_CHECKPOINTS=${KEEP_CHECKPOINTS:-0} # keep only the last N iterations' checkpoints (0: all); iter-0 is kept
# Evaluation.
EVAL=${EVAL:-}                         # evaluation tasks files, space-separated; default: eval_data.sh's sets
EVAL_EVERY=${EVAL_EVERY:-$p_evalevery} # also evaluate every N iterations, iteration 0 included (0: only the last)
EVAL_TASKS=${EVAL_TASKS:-$p_evaltasks} # tasks of each evaluation file (0: all)
EVAL_K=${EVAL_K:-"1 2 4 8"}            # the default evaluation sets: benchmarks at k = 1, NQ and HotpotQA at 2, HotpotQA at 4 and 8

say() { printf '\n== %s\n' "$*" >&2; }
die() { echo "train: $*" >&2; exit 1; }
# mark FILE: a stage marker, written under a temporary name and renamed.
mark() { printf '%s\n' "$(date -u +%FT%TZ)" > "$1.tmp" && mv -f "$1.tmp" "$1"; }
# timed ITER STAGE CMD…: run CMD, append its wall seconds to timings.tsv.
timed() {
	local it=$1 stage=$2 t0; shift 2
	t0=$(date +%s.%N)
	"$@"
	awk -v a="$t0" -v b="$(date +%s.%N)" -v i="$it" -v s="$stage" 'BEGIN { printf "%s\t%s\t%.1f\n", i, s, b - a }' >> "$OUT/timings.tsv"
}

[ -x "$BIN/mempo-rollout" ] || die "BIN=$BIN: no mempo-rollout there (run make build, or set BIN)"
[ -z "$RETRIEVER" ] || [ -z "$INDEX" ] || die "give one of RETRIEVER and INDEX, not both"
[ "$G" -ge 1 ] && [ "$TASKS_PER_ITER" -ge 1 ] || die "G and TASKS_PER_ITER must be at least 1"
[ -n "$MINI_BATCH" ] || MINI_BATCH=$(( TASKS_PER_ITER * G / 2 > 0 ? TASKS_PER_ITER * G / 2 : 1 ))
mkdir -p "$OUT/data"
T0=$(date +%s)
dev=(); [ -n "$DEVICE" ] && dev=(--device "$DEVICE")
proto=(--keep "$KEEP" --max-turns "$MAX_TURNS" --max-step-tokens "$MAX_STEP_TOKENS" --obs-tokens "$OBS_TOKENS" --topk "$TOPK")
[ "$GPUS" -ge 1 ] 2>/dev/null || die "GPUS=$GPUS: want a whole number ≥ 1"
nproc=(); [ "$GPUS" -gt 1 ] && nproc=(--nproc "$GPUS")
case $OPTIM_STATE in fp32|8bit) ;; *) die "OPTIM_STATE=$OPTIM_STATE: want fp32 or 8bit" ;; esac
[ "$LORA_RANK" -ge 0 ] 2>/dev/null || die "LORA_RANK=$LORA_RANK: want a whole number (0: no adapter)"
[ "$LORA_RANK" = 0 ] || [ "$OPTIM_STATE" = fp32 ] || die "LORA_RANK and OPTIM_STATE=8bit: the 8-bit state is for full-parameter updates; pick one"
[ "$LORA_RANK" = 0 ] || [ -z "$REF" ] || die "REF: with LORA_RANK the KL reference is the frozen MODEL itself; leave REF unset"
# The update's memory and disk knobs, the same every iteration.
lean=()
[ "$OPTIM_STATE" = 8bit ] && lean=(--optim-state 8bit --optimizer-every "$OPTIMIZER_EVERY")
[ -z "$OPTIMIZER_DIR" ] || [ "$OPTIM_STATE" = 8bit ] || die "OPTIMIZER_DIR is for OPTIM_STATE=8bit"
[ "$RECOMPUTE" = 1 ] && lean+=(--recompute)
[ -n "$MICRO_TOKENS" ] && lean+=(--micro-tokens "$MICRO_TOKENS")
# policy I: sets pol to the flags naming iteration I's policy: its
# checkpoint, or with LORA_RANK the frozen start and the iteration's adapter.
policy() {
	pol=(--model "$OUT/iter-$1/ckpt")
	if [ "$LORA_RANK" != 0 ] && [ "$1" != 0 ]; then
		pol=(--model "$OUT/iter-0/ckpt" --adapter "$OUT/iter-$1/ckpt")
	fi
}
# rollout OUT ARGS…: one mempo-rollout, or with GPUS > 1 one shard a GPU in
# parallel (--shard s/GPUS, MEMPO_CUDA_DEVICE=s), merged into OUT. Each shard
# resumes from its own journal when the iteration is rerun.
rollout() {
	local out=$1 s p rc=0 pids=() parts=()
	shift
	if [ "$GPUS" -le 1 ]; then "$BIN/mempo-rollout" "$@" --out "$out"; return; fi
	for s in $(seq 0 $(( GPUS - 1 ))); do
		parts+=("${out%.parquet}.shard$s.parquet")
		MEMPO_CUDA_DEVICE=$s "$BIN/mempo-rollout" "$@" --shard "$s/$GPUS" --out "${parts[$s]}" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	[ "$rc" = 0 ] || return 1
	"$BIN/mempo-rollout" merge --out "$out" "${parts[@]}" >&2 && rm -f "${parts[@]}"
}
[ -f "$OUT/timings.tsv" ] || printf 'iter\tstage\tseconds\n' > "$OUT/timings.tsv"

# 1. Retrieval.
if [ -n "$RETRIEVER" ]; then
	search=(--retriever "$RETRIEVER")
else
	if [ -z "$INDEX" ]; then
		INDEX=$OUT/data/index
		if [ ! -f "$OUT/data/.index.done" ]; then
			say "index: BM25 over the HotpotQA dev paragraphs → $INDEX"
			"$BIN/mempo-index" corpus --from hotpotqa --out "$OUT/data/corpus.jsonl" \
				"$SHARED"/hotpotqa/dev-with-paragraphs-{a,b,c}.jsonl
			rm -rf "$INDEX"
			timed 0 index "$BIN/mempo-index" --corpus "$OUT/data/corpus.jsonl" --out "$INDEX"
			mark "$OUT/data/.index.done"
		fi
	fi
	[ -d "$INDEX" ] || die "INDEX=$INDEX: not a directory"
	search=(--index "$INDEX")
fi

# 2. Training tasks: K-objective tasks of one source each, shuffled once (the
#    order is kept in data/train-tasks.jsonl, so a resumed run sees the same).
#    The default stand-in for the paper's NQ + HotpotQA train mix: HotpotQA's
#    500 train questions and NQ test questions 501–1000 (no NQ train split is
#    in ../shared/data; eval_data.sh's NQ sets use questions 1–500 only).
if [ ! -f "$OUT/data/.train.done" ]; then
	if [ -z "$TRAIN" ]; then
		mkdir -p "$OUT/data/nq"   # the directory names the data source
		tail -n 500 "$SHARED/nq/test-1000.jsonl" > "$OUT/data/nq/questions-501-1000.jsonl"
		TRAIN="$OUT/data/nq/questions-501-1000.jsonl $SHARED/hotpotqa/train-with-paragraphs.jsonl"
	fi
	say "training tasks (k = $K) ← $TRAIN"
	# shellcheck disable=SC2086 # TRAIN is a list of files
	"$BIN/mempo-rollout" tasks --k "$K" --out "$OUT/data/train-tasks-ordered.jsonl" $TRAIN
	awk -v seed="$SEED" 'BEGIN { srand(seed) } { printf "%.15f\t%s\n", rand(), $0 }' "$OUT/data/train-tasks-ordered.jsonl" |
		sort -t "$(printf '\t')" -k1,1 | cut -f2- > "$OUT/data/train-tasks.jsonl.tmp"
	mv -f "$OUT/data/train-tasks.jsonl.tmp" "$OUT/data/train-tasks.jsonl"
	mark "$OUT/data/.train.done"
fi
n_train=$(wc -l < "$OUT/data/train-tasks.jsonl")
[ "$n_train" -gt 0 ] || die "no training tasks in $OUT/data/train-tasks.jsonl"
[ "$ITERS" -gt 0 ] || ITERS=$(( (n_train + TASKS_PER_ITER - 1) / TASKS_PER_ITER ))

# 3. Evaluation sets.
if [ -z "$EVAL" ]; then
	if [ ! -f "$OUT/data/eval/.done" ]; then
		say "evaluation sets → $OUT/data/eval"
		BIN=$BIN SHARED=$SHARED EVAL_K=$EVAL_K bash "$(dirname "$0")/eval_data.sh" "$OUT/data/eval"
	fi
	EVAL=$(ls "$OUT"/data/eval/*.parquet | tr '\n' ' ')
fi
for f in $EVAL; do [ -f "$f" ] || die "EVAL: $f does not exist"; done

# 4. The starting checkpoint, iter-0/ckpt: MODEL's files linked (without an
#    optimizer state: RL starts with a fresh one), or a random tiny model.
mkdir -p "$OUT/iter-0"
if [ ! -f "$OUT/iter-0/.ckpt.done" ]; then
	rm -rf "$OUT/iter-0/ckpt"
	if [ -n "$MODEL" ]; then
		[ -f "$MODEL/config.json" ] || die "MODEL=$MODEL: no config.json there (want a Hugging Face model directory)"
		say "start ← $MODEL (linked)"
		mkdir -p "$OUT/iter-0/ckpt"
		abs=$(cd "$MODEL" && pwd)
		for f in "$abs"/*; do
			[ "$(basename "$f")" = optimizer.safetensors ] || ln -s "$f" "$OUT/iter-0/ckpt/"
		done
	else
		say "start: a random $MODEL_CONFIG Qwen2 with $TOKENIZER → iter-0/ckpt"
		timed 0 init "$BIN/mempo-update" init --config "$MODEL_CONFIG" --tokenizer "$TOKENIZER" --out "$OUT/iter-0/ckpt" --seed "$SEED" --force
	fi
	mark "$OUT/iter-0/.ckpt.done"
fi
[ -n "$REF" ] || REF=$OUT/iter-0/ckpt

# evaluate I: greedy rollouts of iteration I's checkpoint over every EVAL file.
evaluate() {
	local i=$1 dir=$OUT/iter-$1 f name lim=()
	[ -f "$dir/.eval.done" ] && return
	mkdir -p "$dir/eval"
	[ "$EVAL_TASKS" -gt 0 ] && lim=(--limit "$EVAL_TASKS")
	for f in $EVAL; do
		name=$(basename "${f%.*}")
		say "iteration $i: eval $name"
		policy "$i"
		timed "$i" "eval" "$BIN/mempo-rollout" "${pol[@]}" --tasks "$f" "${search[@]}" "${proto[@]}" \
			--group 1 --temperature 0 --no-memory-reward --batch "$ROLLOUT_BATCH" "${lim[@]}" "${dev[@]}" \
			--out "$dir/eval/$name.parquet" 2>> "$dir/eval.log"
	done
	mark "$dir/.eval.done"
}
due() { [ "$1" = "$ITERS" ] || { [ "$EVAL_EVERY" -gt 0 ] && [ $(( $1 % EVAL_EVERY )) = 0 ]; }; }

due 0 && evaluate 0
mr=(); adv=()
[ "$MEMORY_REWARD" = 1 ] || { mr=(--no-memory-reward); adv=(--no-mem-adv); }
guard=(); [ -z "$TARGET_KL" ] || guard=(--target-kl "$TARGET_KL")
for i in $(seq 1 "$ITERS"); do
	dir=$OUT/iter-$i prev=$OUT/iter-$(( i - 1 ))/ckpt
	mkdir -p "$dir"
	if [ ! -f "$dir/.update.done" ]; then
		[ -f "$prev/config.json" ] || [ -f "$prev/adapter_config.json" ] ||
			die "$prev: the checkpoint iteration $i starts from is gone (KEEP_CHECKPOINTS removed it?)"
	fi
	# The previous iteration's policy samples and is updated: with the KL
	# reference, or with LORA_RANK against the frozen start itself (a fresh
	# adapter at iteration 1).
	policy $(( i - 1 ))
	from=("${pol[@]}")
	if [ "$LORA_RANK" = 0 ]; then
		from+=(--ref "$REF")
	elif [ "$i" = 1 ]; then
		from+=(--lora-rank "$LORA_RANK")
		[ -n "$LORA_ALPHA" ] && from+=(--lora-alpha "$LORA_ALPHA")
	fi
	# Iteration i takes the next TASKS_PER_ITER tasks, wrapping around.
	if [ ! -f "$dir/tasks.jsonl" ]; then
		awk -v n="$n_train" -v a=$(( (i - 1) * TASKS_PER_ITER )) -v T="$TASKS_PER_ITER" \
			'{ line[NR - 1] = $0 } END { for (j = 0; j < T; j++) print line[(a + j) % n] }' \
			"$OUT/data/train-tasks.jsonl" > "$dir/tasks.jsonl.tmp"
		mv -f "$dir/tasks.jsonl.tmp" "$dir/tasks.jsonl"
	fi
	if [ ! -f "$dir/.rollout.done" ]; then
		say "iteration $i/$ITERS: rollout ($TASKS_PER_ITER tasks × $G)"
		timed "$i" rollout rollout "$dir/rollouts.parquet" "${pol[@]}" --tasks "$dir/tasks.jsonl" "${search[@]}" "${proto[@]}" \
			--group "$G" --temperature "$TEMPERATURE" --task-reward "$TASK_REWARD" --seed $(( SEED * 100000 + i )) \
			--batch "$ROLLOUT_BATCH" "${mr[@]}" "${dev[@]}" 2>> "$dir/rollout.log"
		mark "$dir/.rollout.done"
	fi
	if [ ! -f "$dir/.update.done" ]; then
		say "iteration $i/$ITERS: update (mini-batch $MINI_BATCH)"
		stop=(); [ "$SAVE_EVERY" -gt 0 ] && stop=(--stop-after "$SAVE_EVERY")
		# Each iteration's state in its own folder, so the one before can go once this one is done.
		odir=(); [ -n "$OPTIMIZER_DIR" ] && { mkdir -p "$OPTIMIZER_DIR/iter-$i"; odir=(--optimizer-dir "$OPTIMIZER_DIR/iter-$i"); }
		while :; do
			timed "$i" update "$BIN/mempo-update" "${from[@]}" --rollouts "$dir/rollouts.parquet" \
				--out "$dir/ckpt" --lr "$LR" --kl-coef "$KL" --mini-batch "$MINI_BATCH" --seed "$SEED" "${adv[@]}" "${guard[@]}" \
				--metrics "$dir/metrics.jsonl" "${lean[@]}" "${odir[@]}" "${stop[@]}" "${dev[@]}" "${nproc[@]}" > "$dir/update.out" 2>> "$dir/update.log"
			cat "$dir/update.out" >> "$dir/update.log"
			grep -q "rerun the same command to continue" "$dir/update.out" || break
		done
		rm -f "$dir/update.out"
		mark "$dir/.update.done"
		[ -z "$OPTIMIZER_DIR" ] || rm -rf "$OPTIMIZER_DIR/iter-$(( i - 1 ))"
	fi
	due "$i" && evaluate "$i"
	# Only the last KEEP_CHECKPOINTS checkpoints (iter-0, the start, stays).
	if [ "$KEEP_CHECKPOINTS" -gt 0 ]; then
		for j in $(seq 1 $(( i - KEEP_CHECKPOINTS ))); do
			[ -d "$OUT/iter-$j/ckpt" ] && { say "removing iter-$j/ckpt (KEEP_CHECKPOINTS=$KEEP_CHECKPOINTS)"; rm -rf "$OUT/iter-$j/ckpt"; }
		done
	fi
done
ln -sfn "iter-$ITERS/ckpt" "$OUT/final"

# 5. The report: evaluation scores of every evaluated iteration, and the
#    training curves over all iterations.
say "score → $OUT/report/ (index.html lists every table and figure)"
mkdir -p "$OUT/report/train"
# The training curves first, so the evaluation report's index links to them.
args=()
: > "$OUT/report/train/train.jsonl"
for i in $(seq 1 "$ITERS"); do
	args+=(--rollouts "$OUT/iter-$i/rollouts.parquet" --label train)
	cat "$OUT/iter-$i/metrics.jsonl" >> "$OUT/report/train/train.jsonl"
done
"$BIN/mempo-score" "${args[@]}" --metrics "$OUT/report/train/train.jsonl" \
	--out "$OUT/report/train/scores.jsonl" --report "$OUT/report/train" > "$OUT/report/train/scores.md"
args=()
for i in $(seq 0 "$ITERS"); do
	[ -f "$OUT/iter-$i/.eval.done" ] || continue
	for f in "$OUT/iter-$i"/eval/*.parquet; do args+=(--rollouts "$f" --label "iter-$i"); done
done
"$BIN/mempo-score" "${args[@]}" --out "$OUT/report/scores.jsonl" --report "$OUT/report" > "$OUT/report/scores.md"
cat "$OUT/report/scores.md"
echo "train: $ITERS iterations finished in $(( $(date +%s) - T0 ))s (this run); report in $OUT/report/, stage times in $OUT/timings.tsv" >&2
