# Teacher-forced P(answer j) on answer rows (mempo-score logprobs output of
# rows {"ids": context + output, "n": len(output), "k": k}), by k, j and
# whether the row's memory holds answer j.
import json, math, sys
from collections import defaultdict
MARK = {1078 + 2 * i: i + 1 for i in range(16)}  # [1] … [16] in the world tokenizer
MEM, EMEM = 1065, 1066
agg = defaultdict(lambda: [0, 0.0])
for line in open(sys.argv[1]):
    r = json.loads(line); ids, n, lp = r['ids'], r['n'], r['logprobs']
    ctx, out, olp = ids[:-n], ids[-n:], lp[-n:]
    s = max(i for i, x in enumerate(ctx) if x == MEM); e = s + ctx[s:].index(EMEM); mem = ctx[s + 1:e]
    for t, x in enumerate(out[:-1]):
        if x in MARK:
            inm = x in mem and mem[mem.index(x) + 1] == out[t + 1]
            a = agg[(r['k'], MARK[x], inm)]; a[0] += 1; a[1] += math.exp(olp[t + 1])
print('| k | j | P(answer j), memory holds it | rows | memory does not | rows |')
print('|---:|---:|---:|---:|---:|---:|')
for k, j in sorted({(k, j) for k, j, _ in agg}):
    i, o = agg[(k, j, True)], agg[(k, j, False)]
    print(f'| {k} | {j} | {i[1]/max(i[0],1):.3f} | {i[0]} | {o[1]/max(o[0],1):.3f} | {o[0]} |')
