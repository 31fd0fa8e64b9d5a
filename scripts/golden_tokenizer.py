#!/usr/bin/env python3
"""Golden token ids from Hugging Face `tokenizers` (run on the GPU machine, which has tokenizers 0.23).

Inputs : testdata/tokenizer/strings.jsonl (made by scripts/tokenizer_strings.py)
         testdata/qwen3/tokenizer.json     (make fixtures-tokenizer)
Outputs: testdata/tokenizer/qwen3-golden.jsonl  {"text", "ids", "decoded"}  (no special tokens added;
                                                 special tokens written in the text are matched)
         testdata/tokenizer/chat-golden.jsonl   {"messages", "add_generation_prompt", "prefill", "ids"}
         testdata/tokenizer/wordlevel.json + wordlevel-golden.jsonl
         testdata/tokenizer/small-bpe.json + small-bpe-golden.jsonl
"""
import json, os, sys
import tokenizers
from tokenizers import Tokenizer, models, pre_tokenizers, normalizers, decoders, trainers

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
td = os.path.join(root, "testdata", "tokenizer")
texts = [json.loads(l)["text"] for l in open(os.path.join(td, "strings.jsonl"), encoding="utf-8")]

def dump(name, rows):
    with open(os.path.join(td, name), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")

qwen = Tokenizer.from_file(os.path.join(root, "testdata", "qwen3", "tokenizer.json"))
rows = []
for t in texts:
    ids = qwen.encode(t, add_special_tokens=False).ids
    rows.append({"text": t, "ids": ids, "decoded": qwen.decode(ids, skip_special_tokens=False)})
dump("qwen3-golden.jsonl", rows)

# ChatML as Qwen2.5 renders it: <|im_start|>role\ncontent<|im_end|>\n per turn, then an optional
# generation prompt and an assistant prefill. Encoding the rendered text is the oracle.
chats = [
    ([{"role": "user", "content": "Who wrote Hamlet?"}], True, ""),
    ([{"role": "system", "content": "You are a search agent."}, {"role": "user", "content": "Q: capital of France?"}], True, ""),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
      {"role": "assistant", "content": "<mem>none</mem><think>greet</think><answer>hello</answer>"}], False, ""),
    ([{"role": "user", "content": "Find: 中文 and emoji 👋\nsecond line"}], True, "<mem>"),
    ([{"role": "user", "content": "multi\n\nparagraph  spaces"}, {"role": "assistant", "content": "ok"},
      {"role": "user", "content": "<information>Doc 1(Title: X) y</information>"}], True, "<mem>\n"),
]
rows = []
for msgs, gen, prefill in chats:
    text = "".join("<|im_start|>%s\n%s<|im_end|>\n" % (m["role"], m["content"]) for m in msgs)
    if gen:
        text += "<|im_start|>assistant\n" + prefill
    rows.append({"messages": msgs, "add_generation_prompt": gen, "prefill": prefill,
                 "ids": qwen.encode(text, add_special_tokens=False).ids})
dump("chat-golden.jsonl", rows)

# A WordLevel tokenizer (lowercase, whitespace split) such as a tiny demo model may use.
words = sorted({w for t in texts[:400] for w in t.lower().split() if w.isalpha()})[:500]
vocab = {"[UNK]": 0, "[PAD]": 1}
for w in words:
    vocab.setdefault(w, len(vocab))
wl = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
wl.normalizer = normalizers.Lowercase()
wl.pre_tokenizer = pre_tokenizers.Whitespace()
wl.add_special_tokens(["<|im_start|>", "<|im_end|>"])
wl.save(os.path.join(td, "wordlevel.json"))
dump("wordlevel-golden.jsonl", [{"text": t, "ids": wl.encode(t, add_special_tokens=False).ids} for t in texts[:300]])

# A small byte-level BPE trained on real text (512 tokens), the Qwen layout at toy size.
bpe = Tokenizer(models.BPE())
bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
bpe.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=512, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], show_progress=False)
bpe.train_from_iterator(texts[:1500], trainer=trainer)
bpe.save(os.path.join(td, "small-bpe.json"))
dump("small-bpe-golden.jsonl", [{"text": t, "ids": bpe.encode(t, add_special_tokens=False).ids} for t in texts[::4]])
print("tokenizers", tokenizers.__version__, "goldens written:", len(texts), "strings", file=sys.stderr)
