#!/usr/bin/env python3
"""Collect the strings the tokenizer parity test encodes.

Reads real questions and passages from ../shared/data and adds hand-written edge
cases (whitespace runs, newlines, digits, emoji, CJK, combining marks, special
tokens written in text). Writes testdata/tokenizer/strings.jsonl, one {"text"}
per line. scripts/golden_tokenizer.py then encodes them with HF tokenizers on the
GPU machine. Deterministic: same data in, same file out.
"""
import json, os, random, sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
data = os.path.join(root, "..", "shared", "data")
out = os.path.join(root, "testdata", "tokenizer", "strings.jsonl")
rng = random.Random(20261130)
texts = []

def jsonl(path):
    with open(os.path.join(data, path), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)

for name in ["nq/test-1000.jsonl", "triviaqa/test-1000.jsonl", "popqa/test-1000.jsonl"]:
    rows = list(jsonl(name))
    for r in rng.sample(rows, 250):
        texts.append(r["question"])
        texts.append("; ".join(r["golden_answers"][:3]))
rows = list(jsonl("hotpotqa/dev-with-paragraphs-a.jsonl"))
for r in rng.sample(rows, 150):
    texts.append(r["question"])
    ctx = r["context"]
    i = rng.randrange(len(ctx["title"]))
    texts.append('"%s"\n%s' % (ctx["title"][i], "".join(ctx["sentences"][i])))
for r in list(jsonl("wiki18/wiki18-first-1000.jsonl"))[:200]:
    texts.append(r["contents"])
with open(os.path.join(data, "musique/train-corpus.json"), encoding="utf-8") as f:
    for p in rng.sample(json.load(f), 100):
        texts.append(p["title"] + "\n" + p["text"])

edge = [
    "", " ", "  ", "\n", "\n\n", " \n \n", "\t", "\t\tindented\ttabs", "a  b   c    d", "trailing spaces   ",
    "   leading spaces", "line1\nline2\r\nline3\rline4", "\n\n\nthree newlines then text",
    "12345", "3.14159", "1,000,000", "2026-11-30", "phone: 555-0123", "x1y22z333w4444", "0123456789012345678901",
    "Hello 👋 world 🌍!", "👨‍👩‍👧‍👦 family", "🇫🇷🇯🇵 flags", "emoji at end 😀", "😀😀😀",
    "中文分词测试：北京是中国的首都。", "日本語のテキストです。", "한국어 문장입니다.", "混合 mixed 文本 text 123",
    "Ελληνικά κείμενο", "Русский текст с пунктуацией!", "עברית", "العربية", "हिन्दी पाठ",
    "e\u0301 combining acute", "Cafe\u0301 vs Café", "n\u0303o\u0308", "A\u030a ring", "\u1e9b\u0323 long s dot",
    "ﬁ ligature", "Ⅻ roman numeral", "½ fraction", "x² superscript", "full-width Ｈｅｌｌｏ",
    "it's they're we'll I'd you've she'S HE'LL", "don't\nWON'T", "<mem>remember this</mem>",
    "<think>reasoning</think>\n<search>query text</search>", "<answer>a1; a2</answer>",
    "<information>Doc 1(Title: X) text</information>", "<|im_start|>user\nhi<|im_end|>\n",
    "<|im_start|>assistant\n<think>\n\n</think>\n\nok<|im_end|>", "<|endoftext|>", "text<|endoftext|>more",
    "<|im_start|><|im_end|>", "<tool_call>{\"name\": \"search\"}</tool_call>", "a<|im_end|>b<|im_start|>c",
    "http://example.com/path?q=1&r=2#frag", "user@example.com", "C:\\Windows\\path", "def f(x):\n    return x**2\n",
    "    4 spaces\n        8 spaces", "  \n\t \n", "!!!???...", "“curly quotes” and ‘single’", "em—dash en–dash",
    "\u00a0non-breaking\u00a0space", "zero\u200bwidth", "\ufeffBOM start", "tab\tand\u3000ideographic space",
    "MiXeD CaSe WoRdS", "ALLCAPS SENTENCE HERE", "a" * 300, "ab " * 100, "🙂" * 20, "\u0000nul char",
]
texts.extend(edge)
seen, uniq = set(), []
for t in texts:
    if t not in seen:
        seen.add(t)
        uniq.append(t)
with open(out, "w", encoding="utf-8") as f:
    for t in uniq:
        f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
print("wrote %d strings to %s" % (len(uniq), out), file=sys.stderr)
