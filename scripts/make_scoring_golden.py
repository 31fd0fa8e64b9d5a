#!/usr/bin/env python3
"""Writes lib/qa/testdata/scoring_golden.jsonl: EM, sub-EM and F1 as the reference scripts themselves
compute them, on predictions built from the real golds in ../shared/data. lib/qa's TestScoringGolden
compares every row against mempo's scoring under both --metric-style values.

The reference scripts are imported, not copied (fetch them first; they are not part of this repository):
  qa_em.py               PeterGriffinJin/Search-R1 verl/utils/reward_score/qa_em.py   (em_check, subem_check)
  hotpot_evaluate_v1.py  hotpotqa/hotpot hotpot_evaluate_v1.py                          (exact_match_score, f1_score)
  evaluate-v1.1.py       SQuAD v1.1's official evaluation script                        (f1_score)

Usage (from the repository root):
  python3 scripts/make_scoring_golden.py REFDIR [--data ../shared/data] [--out lib/qa/testdata/scoring_golden.jsonl]

Each output row is {"pred", "golds", "norm", "em", "subem", "f1", "em_hotpot", "f1_hotpot"}: norm is
normalize_answer(pred); em/subem are Search-R1's em_check/subem_check over the aliases; f1 is SQuAD v1.1's
f1_score maximized over the aliases (SQuAD's metric_max_over_ground_truths); em_hotpot/f1_hotpot are HotpotQA's
exact_match_score/f1_score maximized the same way. Rows {"lower_in", "lower"} record Python's str.lower on
every code point that has a lower-case mapping, in runs, with and without Greek final-sigma context.
"""
import argparse
import importlib.util
import json
import os
import random
import sys
import types


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("refdir")
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--out", default="lib/qa/testdata/scoring_golden.jsonl")
    ap.add_argument("--n", type=int, default=3000, help="perturbed-prediction rows from real golds")
    args = ap.parse_args()

    # hotpot_evaluate_v1 imports ujson for its file reading only; the scoring functions do not use it.
    if "ujson" not in sys.modules:
        try:
            import ujson  # noqa: F401
        except ImportError:
            sys.modules["ujson"] = types.ModuleType("ujson")
    sr1 = load(os.path.join(args.refdir, "qa_em.py"), "qa_em")
    hot = load(os.path.join(args.refdir, "hotpot_evaluate_v1.py"), "hotpot_evaluate_v1")
    squad = load(os.path.join(args.refdir, "evaluate-v1.1.py"), "squad_v11")

    golds = []  # alias lists
    for name in ["nq/test-1000.jsonl", "triviaqa/test-1000.jsonl", "popqa/test-1000.jsonl"]:
        with open(os.path.join(args.data, name)) as f:
            for line in f:
                golds.append(json.loads(line)["golden_answers"])
    with open(os.path.join(args.data, "hotpotqa/dev-questions-full.jsonl")) as f:
        for line in f:
            gt = json.loads(line)["reward_model"]["ground_truth"]
            golds.append(gt if isinstance(gt, list) else [gt])
    with open(os.path.join(args.data, "musique/train-with-paragraphs.json")) as f:
        for q in json.load(f):
            golds.append([q["answer"]] + list(q.get("answer_aliases", [])))
    # Long alias lists (TriviaQA has up to 182) add size, not cases: keep the first 6.
    golds = [g[:6] for g in golds]
    golds = [g for g in golds if g]

    rng = random.Random(20)
    tricky = ["ΣΑΣ", "σας", "ΟΔΥΣΣΕΥΣ", "Σ", "ΑΣ.", "ΑΣ'Β", "İstanbul", "ISTANBUL", "ıi", "Straße", "STRASSE", "ẞ",
              "ﬁnal", "Ǆemal", "ǅ", "Ⅻ", "ⓐⒶ", "Ａｂｃ", "e\u0301", "É", "ÉCOLE", "Ꭰ", "ᏸ", "Ა", "𐐀", "\u00a0", "\u2003the\u2003",
              "x\x1cy", "the\u200bend", "rock ’n’ roll", "l'été", "٣", "Ǉ", "ΆΈΉ", "ΰ", "ŉ", "K", "Å", "Ω"]
    specials = ["", " ", "The", "a an the", "...", "yes", "no", "noanswer", "Yes.", "NO!", "yes it is", "no way",
                "No answer", "noanswer please", "the yes", "unknown"]

    def perturb(s):
        w = s.split()
        r = rng.random()
        if r < 0.08:
            return s.upper()
        if r < 0.16:
            return s.lower() + "."
        if r < 0.24:
            return "The " + s
        if r < 0.32 and len(w) > 1:
            return " ".join(w[:-1])
        if r < 0.40:
            return s + " " + s.split()[0] if w else s
        if r < 0.48:
            return "it is " + s
        if r < 0.56:
            return rng.choice(golds)[0]
        if r < 0.64:
            return s.replace(" ", "  ,")
        if r < 0.72:
            return rng.choice(tricky) + " " + s
        if r < 0.80:
            return rng.choice(specials)
        if r < 0.88 and w:
            i = rng.randrange(len(w))
            return " ".join(w[:i] + [rng.choice(tricky)] + w[i + 1:])
        return s

    cases = []
    for _ in range(args.n):
        g = rng.choice(golds)
        cases.append((perturb(rng.choice(g)), g))
    # Every special and tricky string against yes/no golds, themselves and a few real golds.
    pool = specials + tricky
    for p in pool:
        for g in [["yes"], ["no"], ["noanswer"], [""], ["The"], [p], [p.lower()], rng.choice(golds)]:
            cases.append((p, g))
    # Python lower-cases Σ to ς at the end of a word: words with a sigma in every position.
    for w in ["ΣΑΣ", "ΟΔΥΣΣΕΥΣ", "ΣΑΣ ΣΑΣ", "Σ.Σ", "ΑΣ1", "ΑΣ-Β", "ΑΣ\u0301", "ΑΣ\u0301Β"]:
        cases.append((w, [w.lower()]))
        cases.append((w.lower(), [w]))

    out = []
    for pred, g in cases:
        out.append({
            "pred": pred, "golds": g,
            "norm": sr1.normalize_answer(pred),
            "em": int(sr1.em_check(pred, g)),
            "subem": int(sr1.subem_check(pred, g)),
            "f1": float(squad.metric_max_over_ground_truths(squad.f1_score, pred, g)),
            "em_hotpot": float(max(float(hot.exact_match_score(pred, x)) for x in g)),
            "f1_hotpot": float(max(hot.f1_score(pred, x)[0] for x in g)),
        })
    # str.lower on every code point with a lower-case mapping, in runs of 40 (each run in word context and,
    # for the sigma rule, also followed by a letter).
    cps = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000 and chr(c).lower() != chr(c)]
    for i in range(0, len(cps), 40):
        s = "".join(chr(c) for c in cps[i:i + 40])
        out.append({"lower_in": s, "lower": s.lower()})
        out.append({"lower_in": "A" + " ".join(s) + "Σ", "lower": ("A" + " ".join(s) + "Σ").lower()})

    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in out:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, args.out)
    n = sum(1 for r in out if "pred" in r)
    print(f"{args.out}: {n} scoring rows, {len(out) - n} lower rows (Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
