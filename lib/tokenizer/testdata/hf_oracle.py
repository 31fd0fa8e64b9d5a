#!/usr/bin/env python3
"""HF `tokenizers` answers for behaviour the golden files do not reach; the expected values in
lib/tokenizer/oracle_test.go were printed by this script (tokenizers 0.23.2, GPU machine).

Run from the repository root: python3 lib/tokenizer/testdata/hf_oracle.py
"""
import json, os
from tokenizers import Tokenizer, AddedToken, pre_tokenizers, normalizers, Regex

root = os.getcwd()
td = os.path.join(root, "testdata", "tokenizer")
out = []

def emit(case, text, value):
    out.append({"case": case, "text": text, "value": value})

# Added-token flags on the small byte-level BPE.
bpe = Tokenizer.from_file(os.path.join(td, "small-bpe.json"))
bpe.add_special_tokens([AddedToken("<L>", lstrip=True, rstrip=True, special=True)])
bpe.add_tokens([AddedToken("cat", single_word=True, normalized=False)])
for s in ["a  <L>  b", "x<L>y", "cat concat cats", "the cat.", "_cat cat_", "<L>", "  <L>"]:
    emit("flags", s, bpe.encode(s, add_special_tokens=False).ids)

# ByteLevel with add_prefix_space, around special tokens.
bpe2 = Tokenizer.from_file(os.path.join(td, "small-bpe.json"))
bpe2.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
for s in ["hello", " hello", "hello<|im_end|>world", "<|im_end|> x", "a\nb"]:
    emit("prefix_space", s, bpe2.encode(s, add_special_tokens=False).ids)

# Normalized added tokens under a Lowercase normalizer.
wl = Tokenizer.from_file(os.path.join(td, "wordlevel.json"))
wl.add_tokens([AddedToken("Zebra", normalized=True), AddedToken("Yak", normalized=False)])
for s in ["ZEBRA", "a zebra!", "Yak", "YAK", "zebrazebra"]:
    emit("normalized", s, wl.encode(s, add_special_tokens=False).ids)
emit("lowercase", "İSTANBUL ΣΑΣ", normalizers.Lowercase().normalize_str("İSTANBUL ΣΑΣ"))

# Split behaviours.
for b in ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]:
    p = pre_tokenizers.Split("-", behavior=b)
    emit("split_" + b, "the-final--countdown", [x[0] for x in p.pre_tokenize_str("the-final--countdown")])
emit("whitespace", "Hey friend!  How are you?!? é_x2", [x[0] for x in pre_tokenizers.Whitespace().pre_tokenize_str("Hey friend!  How are you?!? é_x2")])
emit("whitespace_split", "a\u00a0b\tc  d", [x[0] for x in pre_tokenizers.WhitespaceSplit().pre_tokenize_str("a\u00a0b\tc  d")])

# Decoding bytes that are not valid UTF-8 (from_utf8_lossy).
q = Tokenizer.from_file(os.path.join(root, "testdata", "qwen3", "tokenizer.json"))
ids = q.encode("👋", add_special_tokens=False).ids
emit("lossy", "👋 bytes", [ids, q.decode(ids[:1]), q.decode(ids[:1] + [64])])

for r in out:
    print(json.dumps(r, ensure_ascii=False))
