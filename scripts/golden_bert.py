#!/usr/bin/env python3
"""Parity fixtures for the BERT-family passage/query encoder (e5, bge, contriever are BertModel), made on the GPU
machine with transformers 5.17, tokenizers 0.23 and PyTorch 2.11, everything float32 on the CPU.

Writes testdata/encoder/:
  tokenizer.json        a WordPiece tokenizer trained on testdata/tokenizer/strings.jsonl (BertNormalizer with
                        lowercasing and accent stripping, BertPreTokenizer, WordPiece "##", [CLS]/[SEP] template)
  tokenizer-golden.jsonl {"text", "ids", "ids_trunc16"}: encode(text) with special tokens, and with truncation to 16
  model/                a random-weight BertModel (hidden 64, 2 layers, 4 heads, GELU, absolute positions,
                        token types) saved with save_pretrained, plus the tokenizer
  golden.safetensors    for 8 texts with "query: "/"passage: " prefixes, padded to the longest:
                          input_ids, attention_mask (int64 [8, T]), last_hidden (f32 [8, T, 64]),
                          mean (mean over the mask, L2-normalized, [8, 64]), cls (CLS row, L2-normalized)
                        and a search case: passages.emb [200, 64] and queries.emb [20, 64] (mean pooled, normalized,
                        from the model) with top10 (int64 [20, 10]), the inner-product top 10 by numpy
  texts.json            the texts behind every tensor above
"""
import json, os, sys
import numpy as np
import torch
from tokenizers import BertWordPieceTokenizer, processors
from transformers import BertConfig, BertModel
from safetensors.torch import save_file

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out = os.path.join(root, "testdata", "encoder")
os.makedirs(os.path.join(out, "model"), exist_ok=True)
texts = [json.loads(l)["text"] for l in open(os.path.join(root, "testdata", "tokenizer", "strings.jsonl"), encoding="utf-8")]

wp = BertWordPieceTokenizer(lowercase=True, strip_accents=True, clean_text=True, handle_chinese_chars=True)
wp.train_from_iterator(texts, vocab_size=1200, min_frequency=2, show_progress=False)
tok = wp._tokenizer
# A trained-from-scratch BertWordPieceTokenizer has no post-processor; real BERT checkpoints (e5, bge) add
# [CLS] ... [SEP], so the fixture does too.
tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")), ("[CLS]", tok.token_to_id("[CLS]")))
tok.save(os.path.join(out, "tokenizer.json"))
tok.save(os.path.join(out, "model", "tokenizer.json"))
rows = []
for t in texts[::5]:
    ids = tok.encode(t).ids
    tok.enable_truncation(16)
    ids16 = tok.encode(t).ids
    tok.no_truncation()
    rows.append({"text": t, "ids": ids, "ids_trunc16": ids16})
with open(os.path.join(out, "tokenizer-golden.jsonl"), "w", encoding="utf-8") as f:
    for r in rows:
        f.write(json.dumps(r, ensure_ascii=False) + "\n")

torch.manual_seed(7)
cfg = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, max_position_embeddings=128, type_vocab_size=2, hidden_act="gelu",
                 layer_norm_eps=1e-12, attn_implementation="eager")
model = BertModel(cfg, add_pooling_layer=False).float().eval()
with torch.no_grad():
    for name, p in model.named_parameters():
        if "LayerNorm.weight" in name:
            p.copy_(1 + 0.1 * torch.randn_like(p))
        elif name.endswith("bias"):
            p.copy_(0.1 * torch.randn_like(p))
        else:
            p.copy_(0.2 * torch.randn_like(p))
model.save_pretrained(os.path.join(out, "model"), safe_serialization=True)

def embed(batch, max_len=64):
    tok.enable_truncation(max_len)
    tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")
    enc = tok.encode_batch(batch)
    tok.no_truncation(); tok.no_padding()
    ids = torch.tensor([e.ids for e in enc]); mask = torch.tensor([e.attention_mask for e in enc])
    with torch.no_grad():
        h = model(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).last_hidden_state
    mean = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    return ids, mask, h, torch.nn.functional.normalize(mean, dim=-1), torch.nn.functional.normalize(h[:, 0], dim=-1)

q = ["query: " + t for t in texts[:4]] + ["passage: " + t for t in texts[1000:1004]]
ids, mask, h, mean, cls = embed(q)
passages = ["passage: " + t for t in texts[200:400]]
queries = ["query: " + t for t in texts[:20]]
pe = torch.cat([embed(passages[i:i + 50])[3] for i in range(0, 200, 50)])
qe = embed(queries)[3]
scores = qe.numpy() @ pe.numpy().T
top10 = np.argsort(-scores, axis=1, kind="stable")[:, :10]
save_file({"input_ids": ids, "attention_mask": mask, "last_hidden": h.contiguous(), "mean": mean.contiguous(),
           "cls": cls.contiguous(), "passages.emb": pe.contiguous(), "queries.emb": qe.contiguous(),
           "top10": torch.from_numpy(top10.astype(np.int64))}, os.path.join(out, "golden.safetensors"))
json.dump({"batch": q, "passages": passages, "queries": queries, "max_len": 64},
          open(os.path.join(out, "texts.json"), "w"), ensure_ascii=False, indent=0)
print("encoder fixtures: vocab", tok.get_vocab_size(), "tokenizer strings", len(rows), file=sys.stderr)
