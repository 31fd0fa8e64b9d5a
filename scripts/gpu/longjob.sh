# Sourced by a GPU command whose work outlives one device call (a call ends
# after ten minutes; the machine stays warm a little while after it). The
# caller defines job() (the work, writing everything it keeps under $R) and
# then runs `longjob "$0" "${1:-start}"`:
#   start  clears $R, starts `bash SCRIPT job` detached (setsid, so the call's
#          end does not stop it) and waits;
#   wait   (the next call, on the still-warm machine) waits again;
#   job    runs job() and marks $R/all-done when it returns.
# A wait returns after $LIMIT seconds from the script's start or when the job
# is done, and packs $R into $OUT/results.tgz every 30 s on the way (a call cut
# off early still brings something back) and once at the end, leaving out
# what PACK_EXCLUDE names (checkpoints and rollouts by default). It returns 0
# when the job is done and 3 while it still runs.
#   settings: R (the job's folder), LIMIT (default 570), PACK_EXCLUDE (array)
LIMIT=${LIMIT:-570}
LONGJOB_T0=$(date +%s)
if ! declare -p PACK_EXCLUDE > /dev/null 2>&1; then
	PACK_EXCLUDE=('*.parquet' '*.safetensors')
fi

# longjob_elapsed prints the seconds since the script started.
longjob_elapsed() { echo $(( $(date +%s) - LONGJOB_T0 )); }

longjob_pack() {
	local ex=() p
	for p in "${PACK_EXCLUDE[@]}"; do ex+=(--exclude="$p"); done
	(cd "$R/.." && tar czf "$OUT/.results.tgz" "${ex[@]}" "$(basename "$R")" 2>/dev/null)
	mv "$OUT/.results.tgz" "$OUT/results.tgz"
}

longjob() {
	local script=$1 mode=$2 n=0
	: "${R:?longjob: set R, the folder of the job}"
	case $mode in
	job) mkdir -p "$R"; job; touch "$R/all-done"; exit 0 ;;
	start) rm -rf "$R"; mkdir -p "$R"
		setsid nohup bash "$script" job > "$R.log" 2>&1 < /dev/null & ;;
	wait) ;;
	*) echo "longjob: mode $mode is not start, wait or job" >&2; exit 2 ;;
	esac
	while [ ! -f "$R/all-done" ] && [ "$(longjob_elapsed)" -lt "$LIMIT" ]; do
		sleep 5; n=$((n + 1))
		[ $((n % 6)) = 0 ] && longjob_pack
	done
	longjob_pack
	tail -3 "$R.log"
	[ -f "$R/all-done" ] || { echo "longjob: still running after $(longjob_elapsed)s; run '$script wait' next" >&2; return 3; }
}
