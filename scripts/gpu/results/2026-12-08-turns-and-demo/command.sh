#!/usr/bin/env bash
# Not run: the device time of 2026-12-08 ran out first (the prefix-turns
# tests ran in 2026-12-08-dw-turns instead; the demo alone is
# 2026-12-07-demo-fresh-gpu/command.sh). Two pieces of work in two calls on one warm machine, carrying one bundle
# (the device's carry limit does not take two):
#   call 1: starts the demo's fresh seeds (2026-12-07-demo-fresh-gpu, in the
#           background), runs 2026-12-07-prefix-turns' GPU tests beside it,
#           then waits on the demo until the call's ten minutes are nearly up;
#   call 2: waits on the demo until it is done, then runs prefix-turns'
#           decode benchmark on the idle GPU.
#   carry: .work/both.tar.xz (scripts/gpu/pack.sh both cmds model.test model.test@d706580)
#   usage: command.sh 1|2
set -uo pipefail
T0=$(date +%s)
here=scripts/gpu/results
[ -x /tmp/both/bin/model.test ] || tar -xJf .work/both.tar.xz -C /tmp
ln -sfn /tmp/both /tmp/pt; ln -sfn /tmp/both /tmp/dm
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
case ${1:?usage: command.sh 1|2} in
1)	LIMIT=5 bash $here/2026-12-07-demo-fresh-gpu/command.sh start > $OUT/demo-start.txt 2>&1
	bash $here/2026-12-07-prefix-turns/command.sh tests
	LIMIT=$(left 570) bash $here/2026-12-07-demo-fresh-gpu/command.sh wait ;;
2)	LIMIT=$(left 420) bash $here/2026-12-07-demo-fresh-gpu/command.sh wait
	if [ -f /tmp/rr/all-done ]; then bash $here/2026-12-07-prefix-turns/command.sh bench
	else echo "demo still running: no benchmark"; fi ;;
esac
