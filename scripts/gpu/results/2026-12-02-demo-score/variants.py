# Other placements of the memory, built from scripts/memscore's rows of one
# rollouts file (argv[1], `memscore seqs` output; the world tokenizer's ids of
# the chat pieces below), written as rows for `mempo-score logprobs`:
#   python3 variants.py seqs.jsonl > var.jsonl
#   mempo-score logprobs --model runs/base/sft --in var.jsonl --out var-lp.jsonl; memscore summary var-lp.jsonl
import json, sys
A, C, U, INFO, END_INFO, END_MEM = [1063, 863, 10], [1064, 10], [1063, 892, 10], 1073, 1074, 1066
def find(seq, sub):
    return next((i for i in range(len(seq) - len(sub) + 1) if seq[i:i + len(sub)] == sub), -1)
rows = [json.loads(l) for l in open(sys.argv[1])]
for i in range(0, len(rows), 4):  # per step: turn, next-step, history, stepctx
    t, _, _, sc = rows[i:i + 4]
    if t["kind"] == "drop":
        continue
    ids, n = t["ids"], t["n"]
    p = find(ids, A)
    prompt, tail = ids[:p], ids[p + 3:]
    me = tail.index(END_MEM) + 1
    mem, leadgold = tail[:me], tail[me:]
    s = sc["ids"]
    prev = s[:len(s) - len(tail)][len(prompt):-3]
    v = {"V1 prompt, [mem], asst, mem, lead": prompt + A + mem + C + A + mem + leadgold,
         "V2 prompt, [mem], [user: empty information], asst, mem, lead": prompt + A + mem + C + U + [INFO, END_INFO] + C + A + mem + leadgold}
    if prev:
        ui = find(prev, U)
        turn = prev[:ui] if ui >= 0 else prev
        v["V3 step context without its observation turn"] = prompt + turn + A + mem + leadgold
        if ui >= 0:
            v["V4 step context, observation emptied"] = prompt + turn + U + [INFO, END_INFO] + C + A + mem + leadgold
    for k, x in v.items():
        print(json.dumps({"ids": x, "n": n, "kind": t["kind"], "ctx": k}))
