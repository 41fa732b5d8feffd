#!/usr/bin/env python3
"""Write a random LoRA adapter in GGUF for a base model, in the layout llama.cpp's
convert_lora_to_gguf.py writes: general.type = adapter, adapter.type = lora,
adapter.lora.alpha, and for each adapted weight W [n_in, n_out] (ggml order) the pair
W.lora_a [n_in, rank] and W.lora_b [rank, n_out]; for token_embd the flipped pair
lora_a [rank, n_vocab], lora_b [rank, n_embd].

    make-lora-adapter.py BASE.gguf OUT.gguf [--rank 8] [--alpha 16] [--seed 1]
        [--targets attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down,token_embd,output]
        [--type f32|f16] [--std 0.02]

Values are drawn from a seeded normal distribution, so the same arguments give the same file.
"""
import argparse
import sys

import numpy as np
import gguf


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base")
    ap.add_argument("out")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--std", type=float, default=0.02)
    ap.add_argument("--type", choices=["f32", "f16"], default="f32")
    ap.add_argument(
        "--targets",
        default="attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down",
    )
    a = ap.parse_args()

    r = gguf.GGUFReader(a.base)
    arch_field = r.fields["general.architecture"]
    arch = bytes(arch_field.parts[arch_field.data[0]]).decode()
    targets = set(a.targets.split(","))
    rng = np.random.default_rng(a.seed)
    dt = np.float32 if a.type == "f32" else np.float16

    w = gguf.GGUFWriter(a.out, arch)
    w.add_string("general.type", "adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", a.alpha)
    n = 0
    for t in r.tensors:
        parts = t.name.split(".")
        kind = parts[2] if parts[0] == "blk" else parts[0]
        if kind not in targets or not t.name.endswith(".weight") or len(t.shape) != 2:
            continue
        n_in, n_out = int(t.shape[0]), int(t.shape[1])  # ggml order
        if kind == "token_embd":
            # numpy shapes are the reverse of ggml's
            la = rng.normal(0, a.std, (n_out, a.rank))  # ggml [rank, n_vocab]
            lb = rng.normal(0, a.std, (n_in, a.rank))  # ggml [rank, n_embd]
        else:
            la = rng.normal(0, a.std, (a.rank, n_in))  # ggml [n_in, rank]
            lb = rng.normal(0, a.std, (n_out, a.rank))  # ggml [rank, n_out]
        w.add_tensor(t.name + ".lora_a", la.astype(dt))
        w.add_tensor(t.name + ".lora_b", lb.astype(dt))
        n += 1
    if n == 0:
        sys.exit(f"make-lora-adapter: no tensor of {a.base} matches --targets {a.targets}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
