# Drop/filed pairs (memscore pairs' definition) split by whether the next
# memory gains a gold answer ("[j] value" equal to the gold's), and how often
# the next memory scores higher there, joint (geometric mean over the whole
# gold, the engine's default) and per objective (mean over objectives of each
# one's geometric mean: --score-per-objective). Input: memscore seqs rows
# scored by mempo-score logprobs (with "ends"), the "turn" layout.
#   python3 gold_gain_pairs.py lp.jsonl
import json, math, sys
from collections import defaultdict
MARK = {1078 + 2 * i: i + 1 for i in range(16)}  # [1] … [16] in the world tokenizer
MEM, EMEM, SEP = 1065, 1066, 59                 # <mem>, </mem>, ";"

def spans(ids):
    out, cur = {}, None
    for t, i in enumerate(ids):
        if i in MARK:
            cur = MARK[i]; out[cur] = [t + 1, t + 1]; continue
        if i == SEP:
            cur = None; continue
        if cur is not None:
            out[cur][1] = t + 1
    return out

rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r['ctx'] != 'turn' or not r.get('ends'):
        continue
    ids, lp, n = r['ids'], r['logprobs'], r['n']
    ctx, gold, glp = ids[:-n], ids[-n:], lp[-n:]
    s = max(i for i, x in enumerate(ctx) if x == MEM); mem = ctx[s + 1:s + ctx[s:].index(EMEM)]
    msp, held, pobj, frm = spans(mem), 0, [], 0
    for end in r['ends']:
        pobj.append(math.exp(sum(glp[frm:end]) / (end - frm))); frm = end
    for j, (a, b) in spans(gold).items():
        held += j in msp and mem[msp[j][0]:msp[j][1]] == gold[a:b]
    rows[(r['traj'], r['step'])] = dict(kind=r['kind'], k=r['k'], held=held,
                                        joint=math.exp(sum(glp) / n), obj=sum(pobj) / len(pobj))
st = defaultdict(lambda: defaultdict(int))
for (t, s), r in rows.items():
    nx = rows.get((t, s + 1))
    if r['kind'] != 'drop' or not nx or nx['kind'] == 'drop':
        continue
    d = st[r['k']]; d['pairs'] += 1
    if nx['held'] > r['held']:
        d['gain'] += 1; d['joint'] += nx['joint'] > r['joint']; d['obj'] += nx['obj'] > r['obj']
print('| k | pairs | next memory gains a gold answer | of those, scores higher: joint | per objective |')
print('|---:|---:|---:|---:|---:|')
for k in sorted(st):
    d = st[k]; g = max(d['gain'], 1)
    print(f"| {k} | {d['pairs']} | {d['gain']} | {d['joint']} ({100*d['joint']/g:.0f}%) | {d['obj']} ({100*d['obj']/g:.0f}%) |")
