#!/usr/bin/env python3
"""Check that model directories written by mempo (mempo-update init, checkpoint.Save) load in Hugging Face
transformers exactly: run on the GPU machine (transformers 5.17, PyTorch 2.11), everything float32 on the CPU.

    python3 scripts/check_hf_load.py DIR [DIR...]

For each DIR it
  1. loads AutoModelForCausalLM in float32 with eager attention and output_loading_info, and fails if any key is
     missing, unexpected or mismatched (transformers would otherwise random-initialize missing weights silently);
  2. compares every parameter of the loaded model with the tensor in the safetensors file(s) (same name, exact
     values after widening the stored dtype to float32), tied lm_head against embed_tokens;
  3. runs a fixed input (golden.safetensors' ids.0 when the directory has one, else ids (7919*i + 13) % V for
     i < 16) and prints the logits' sum, sum of |x|, argmax of the last position and the first values;
  4. with golden.safetensors, compares the logits with logits.0 (max abs difference, fails above 1e-4 relative
     to the largest |logit|; for a bf16 directory whose golden was made with bf16-rounded RoPE inv_freq, as
     golden_qwen2.py's qwen2-bf16 case was, it says so and passes when that explains the difference);
  5. loads the tokenizer when tokenizer.json is present and prints its length.
Exit status 1 when any directory fails; one line per check.
"""
import json
import os
import sys

import torch
import transformers
from safetensors import safe_open
from transformers import AutoModelForCausalLM


def stored_tensors(d):
    """name -> float32 tensor, from model.safetensors or the shards of model.safetensors.index.json."""
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    out = {}
    for f in files:
        with safe_open(os.path.join(d, f), framework="pt") as sf:
            for k in sf.keys():
                out[k] = sf.get_tensor(k).float()
    return out


def check(d):
    ok = True
    model, info = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                                       output_loading_info=True)
    model.eval()
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        keys = info.get(kind) or []
        if keys:
            print(f"{d}: FAIL {kind}: {sorted(map(str, keys))[:10]}")
            ok = False
    stored = stored_tensors(d)
    worst = 0.0
    for name, p in model.state_dict().items():
        src = name
        if src not in stored and name == "lm_head.weight" and model.config.tie_word_embeddings:
            src = "model.embed_tokens.weight"
        if src not in stored:
            if "rotary_emb" in name:
                continue
            print(f"{d}: FAIL parameter {name} not in the safetensors files")
            ok = False
            continue
        if tuple(stored[src].shape) != tuple(p.shape):
            print(f"{d}: FAIL {name} shape {tuple(p.shape)} vs stored {tuple(stored[src].shape)}")
            ok = False
            continue
        worst = max(worst, (stored[src] - p.float()).abs().max().item() if p.numel() else 0.0)
    if worst != 0.0:
        print(f"{d}: FAIL loaded parameters differ from the files by up to {worst:g}")
        ok = False
    else:
        print(f"{d}: {len(stored)} stored tensors, all {len(model.state_dict())} parameters equal the files")

    golden_path = os.path.join(d, "golden.safetensors")
    golden = None
    V = model.config.vocab_size
    if os.path.exists(golden_path):
        with safe_open(golden_path, framework="pt") as g:
            golden = {k: g.get_tensor(k) for k in ("ids.0", "logits.0") if k in g.keys()}
        ids = golden["ids.0"]
    else:
        ids = torch.tensor([(7919 * i + 13) % V for i in range(16)], dtype=torch.int64)
    with torch.no_grad():
        logits = model(input_ids=ids[None]).logits[0].float()
    first = ", ".join(f"{x:.6f}" for x in logits[0, :4].tolist())
    print(f"{d}: {model.config.architectures} params {sum(p.numel() for p in model.parameters())} "
          f"ids {ids.tolist()[:8]}... logits {tuple(logits.shape)} sum {logits.sum().item():.6f} "
          f"abs {logits.abs().sum().item():.6f} argmax[-1] {int(logits[-1].argmax())} first [{first}]")
    if golden is not None and "logits.0" in golden:
        ref = golden["logits.0"].float()
        diff = (logits - ref).abs().max().item()
        scale = max(ref.abs().max().item(), 1.0)
        status = "ok" if diff <= 1e-4 * scale else "FAIL"
        note = ""
        raw_cfg = json.load(open(os.path.join(d, "config.json")))
        if status == "FAIL" and "bfloat16" in (raw_cfg.get("dtype"), raw_cfg.get("torch_dtype")):
            # golden_qwen2.py made its bf16 references after model.to(bfloat16).float(), which also rounds the
            # non-persistent RoPE inv_freq buffer to bf16. Check whether that explains the difference.
            with torch.no_grad():
                for name, buf in model.named_buffers():
                    if name.endswith("inv_freq"):
                        buf.copy_(buf.to(torch.bfloat16).float())
                diff2 = (model(input_ids=ids[None]).logits[0].float() - ref).abs().max().item()
            if diff2 <= 1e-4 * scale:
                status = "ok"
                note = (f"; {diff2:.3g} with RoPE inv_freq rounded to bf16, as golden_qwen2.py's bf16 case "
                        f"computed its references")
        print(f"{d}: {status} logits vs golden logits.0: max |diff| {diff:.3g} (scale {scale:.3g}){note}")
        ok = ok and status == "ok"

    if os.path.exists(os.path.join(d, "tokenizer.json")):
        from transformers import AutoTokenizer
        try:
            tok = AutoTokenizer.from_pretrained(d)
            print(f"{d}: tokenizer loads, {len(tok)} tokens, eos {tok.eos_token!r}")
            if len(tok) > V:
                print(f"{d}: FAIL tokenizer has {len(tok)} tokens but vocab_size is {V}")
                ok = False
        except Exception as e:  # report, do not hide
            print(f"{d}: FAIL tokenizer: {e}")
            ok = False
    return ok


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    torch.manual_seed(0)
    failed = []
    for d in sys.argv[1:]:
        try:
            if not check(d):
                failed.append(d)
        except Exception as e:
            print(f"{d}: FAIL {type(e).__name__}: {e}")
            failed.append(d)
    print("all ok" if not failed else f"FAILED: {' '.join(failed)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
