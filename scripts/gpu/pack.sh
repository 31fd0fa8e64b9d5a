#!/usr/bin/env bash
# Packs a small bundle for one GPU call: .work/NAME.tar.xz holding NAME/bin
# (the binaries asked for) and NAME/lib (the shared libraries they link that
# the GPU machine's image may lack, as bundle.sh copies them). A call carries
# one bundle (the device's carry limit, 64 MiB, counts the tracked files
# too, so bin/gpu/ whole does not fit beside them) and unpacks it with
# `tar -xJf .work/NAME.tar.xz -C /tmp`, its binaries then in /tmp/NAME/bin.
#   usage: scripts/gpu/pack.sh NAME ITEM...
#   ITEM: cmds        the five commands and scripts/memdrops
#         mempo-X     one command (mempo-rollout, …) at the working tree
#         mempo-X@REV the same at commit REV, as mempo-X.old
#         PKG.test    lib/PKG's test binary at the working tree (model.test, cuda.test, update.test)
#         PKG.test@REV  the same at commit REV, as PKG.test.old (for A/B runs in one call)
#         rolloutdata the Qwen3 tokenizer and HotpotQA dev-a in NAME/data, for
#                     scripts/bench_rollout.sh (DATA, QWEN_TOKENIZER)
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/gpu/libs.sh
[ $# -ge 2 ] || { echo "usage: scripts/gpu/pack.sh NAME ITEM..." >&2; exit 2; }
name=$1; shift
tmp=$(mktemp -d); trap 'git worktree remove --force "$tmp/old" 2>/dev/null || true; rm -rf "$tmp"' EXIT
B=$tmp/$name
mkdir -p "$B/bin" "$B/lib" .work
export CGO_ENABLED=1
FLAGS=(-trimpath -ldflags "-s -w")
for item in "$@"; do
	case "$item" in
	cmds)
		for c in mempo-index mempo-serve mempo-rollout mempo-update mempo-score; do
			go build "${FLAGS[@]}" -o "$B/bin/$c" "./cmd/$c"
		done
		go build "${FLAGS[@]}" -o "$B/bin/memdrops" ./scripts/memdrops ;;
	*.test@*)
		pkg=${item%%.test@*} rev=${item#*@}
		git worktree add -q --detach "$tmp/old" "$rev"
		(cd "$tmp/old" && go test -c "${FLAGS[@]}" -o "$B/bin/$pkg.test.old" "./lib/$pkg")
		git worktree remove --force "$tmp/old" ;;
	mempo-*@*)
		cmd=${item%%@*} rev=${item#*@}
		git worktree add -q --detach "$tmp/old" "$rev"
		(cd "$tmp/old" && go build "${FLAGS[@]}" -o "$B/bin/$cmd.old" "./cmd/$cmd")
		git worktree remove --force "$tmp/old" ;;
	mempo-*)
		go build "${FLAGS[@]}" -o "$B/bin/$item" "./cmd/$item" ;;
	rolloutdata)
		mkdir -p "$B/data"
		cp testdata/qwen3/tokenizer.json ../shared/data/hotpotqa/dev-with-paragraphs-a.jsonl "$B/data/" ;;
	*.test)
		go test -c "${FLAGS[@]}" -o "$B/bin/$item" "./lib/${item%.test}" ;;
	*)
		echo "pack.sh: unknown item $item (cmds, mempo-X[@REV], PKG.test[@REV] or rolloutdata)" >&2; exit 2 ;;
	esac
done
copy_libs "$B/bin" "$B/lib"
tar -cJf ".work/$name.tar.xz.tmp" -C "$tmp" "$name"
mv ".work/$name.tar.xz.tmp" ".work/$name.tar.xz"
ls -l ".work/$name.tar.xz"
