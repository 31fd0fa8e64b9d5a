#!/usr/bin/env python3
"""Writes normalize.jsonl: Search-R1's normalize_answer (verl/utils/reward_score/qa_em.py,
SQuAD's normalization) and SQuAD v2's bag-of-words F1 applied by Python itself to real gold
answers from ../shared/data and to hand-picked edge cases. lib/qa tests compare against it.

Run from the repo root:  python3 lib/qa/testdata/make_norm_fixture.py
"""
import collections, json, os, random, re, string

def normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)
    def white_space_fix(text):
        return " ".join(text.split())
    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)
    def lower(text):
        return text.lower()
    return white_space_fix(remove_articles(remove_punc(lower(s))))

def f1(pred, gold):
    p, g = normalize_answer(pred).split(), normalize_answer(gold).split()
    if not p or not g:
        return float(p == g)
    common = collections.Counter(p) & collections.Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    pr, rc = same / len(p), same / len(g)
    return 2 * pr * rc / (pr + rc)

data = "../shared/data"
strings_ = []
for name in ["nq/test-1000.jsonl", "triviaqa/test-1000.jsonl", "popqa/test-1000.jsonl"]:
    with open(os.path.join(data, name)) as f:
        for line in f:
            strings_.extend(json.loads(line)["golden_answers"])
with open(os.path.join(data, "hotpotqa/dev-questions-full.jsonl")) as f:
    for line in f:
        gt = json.loads(line)["reward_model"]["ground_truth"]
        strings_.extend(gt if isinstance(gt, list) else [gt])
rng = random.Random(7)
# Every non-ASCII gold is kept (they are the hard cases), plus a sample of the rest.
nonascii = sorted({s for s in strings_ if not s.isascii()})
ascii_ = sorted({s for s in strings_ if s.isascii()})
picked = nonascii[:400] + rng.sample(ascii_, 400)
edge = ["", "   ", "The", "the the", "A", "an apple a day", "theater", "The–End", "İstanbul",
        "ÉCOLE Normale", "rock ’n’ roll", "l'été", "a\u00a0b\u2003the c", "x\x1cy", "e\u0301a",
        "U.S.A.", "$1,000,000", "foo_bar", "the_the", "Ⅻ the", "٣ the", "ß Straße",
        "Hello, World!", "\tThe  Beatles\n", "a.k.a. the boss", "an-an", "(the) answer"]
rows = []
for s in edge + picked:
    rows.append({"s": s, "norm": normalize_answer(s)})
# F1 pairs: each picked gold against a neighbour and against itself with noise.
pairs = []
for i in range(0, len(picked) - 1, 2):
    a, b = picked[i], picked[i + 1]
    pairs.append((a, b))
    pairs.append((a + " " + b, b))
    pairs.append(("the " + a + " and " + a, a))
for p, g in pairs:
    rows.append({"pred": p, "gold": g, "f1": f1(p, g)})
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "normalize.jsonl"), "w") as f:
    for r in rows:
        f.write(json.dumps(r, ensure_ascii=False) + "\n")
print(len(rows), "rows")
