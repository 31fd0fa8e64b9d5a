# Sourced by the scripts that train a MemPO variant from a cold start an
# earlier run.sh run made (scripts/gpu/results/2026-12-07-demo-*: noknob.sh,
# the α commands). mempo_only S R runs MemPO alone from $E/seedS (its sft/,
# sft-react/, reader/ and eval/test-k*.jsonl) with RL seed R into $N/seedS-R:
# run.sh (whatever PRESET, MEM_FLAGS, DEVICE … the environment sets) is
# stopped when GRPO starts — GRPO would repeat the earlier run's — then MemPO
# is evaluated greedily at k = 2, 4, 8 on the earlier run's own test tasks
# (waiting for them where that run has not written them yet),
# memdrops reads its training rollouts, and $N/done.txt gets the run's wall.
# Run from the repository root, with BIN the commands' folder.
mempo_only() {
	local s=$1 r=$2 t k pid O
	t=$(date +%s) O=$N/seed$s-$r
	env SEED=$s RL_SEED=$r FROM_SFT=$E/seed$s OUT=$O bash scripts/demo/run.sh > $O.log 2>&1 &
	pid=$!
	until grep -q "== grpo iteration 1/" $O.log 2>/dev/null || ! kill -0 $pid 2>/dev/null; do sleep 3; done
	pkill -P $pid; kill $pid; sleep 2; pkill -f "$O/grpo"
	# The test tasks are the earlier run's, written at its evaluation stage:
	# wait (up to an hour) until it has written k = 8's or finished (its
	# report), then say where one is missing instead of evaluating nothing
	# in silence.
	for _ in $(seq 720); do
		[ -f $E/seed$s/eval/test-k8.jsonl ] || [ -f $E/seed$s/report/table.md ] && break
		sleep 5
	done
	for k in 2 4 8; do
		[ -f $E/seed$s/eval/test-k$k.jsonl ] || echo "seed $s RL seed $r: no $E/seed$s/eval/test-k$k.jsonl, k = $k not evaluated" | tee -a $N/done.txt >&2
	done
	for k in 2 4 8; do
		$BIN/mempo-rollout --model $O/mempo/final --tasks $E/seed$s/eval/test-k$k.jsonl --index $O/index --out $O/eval-mempo-k$k.parquet \
			--max-step-tokens 96 --topk 2 --hint=false --score-gold-numbered --score-lead-in "<think>all {k} answers are known</think><answer>" \
			--score-layout turn --score-per-objective --batch 128 --overwrite --group 1 --temperature 0 --keep 1 --no-memory-reward > /dev/null 2>&1
	done
	$BIN/memdrops $(ls $O/mempo/rollouts-*.parquet | sort -V) > $O-memdrops.txt 2>&1
	echo "seed $s RL seed $r wall $(( $(date +%s) - t ))s" >> $N/done.txt
}

# run_dir ROOT S R prints the folder of seed S's run with RL seed R under
# ROOT, in scripts/demo/check.sh's layout: seedS for RL seed S, seedS-rlN for
# RL seed 100·S + N.
run_dir() { if [ "$3" = "$2" ]; then echo "$1/seed$2"; else echo "$1/seed$2-rl${3: -1}"; fi; }

# pool_fresh LABEL DIR OUT S:R …: mempo-score over the given runs of the
# fresh CPU cold starts (seeds 4, 5 under $E4, default /tmp/fresh; 6, 7 under
# $E6, /tmp/fresh67): DIR/seedS-R's MemPO as LABEL, the same cold start and
# RL seed's MemPO at α = 0.5 ($A05, default /tmp/alpha05) as alpha05 and that
# run's GRPO as grpo, each at k = 2, 4, 8, into OUT.
pool_fresh() {
	local label=$1 dir=$2 out=$3 sr s r e d k a=()
	shift 3
	for sr in "$@"; do
		s=${sr%:*} r=${sr#*:} e=${E4:-/tmp/fresh}
		[ "$s" -ge 6 ] && e=${E6:-/tmp/fresh67}
		d=$(run_dir "$e" "$s" "$r")
		for k in 2 4 8; do a+=(--rollouts $dir/seed$s-$r/eval-mempo-k$k.parquet --label $label
			--rollouts ${A05:-/tmp/alpha05}/seed$s-$r/eval-mempo-k$k.parquet --label alpha05 --rollouts $d/eval/grpo-k$k.parquet --label grpo); done
	done
	$BIN/mempo-score "${a[@]}" --out "$out"
}
