"""Peak memory of `varcheck audit` on a 1.1B-parameter Llama-shaped checkpoint, and on SmolLM2.

Usage::

    .venv/bin/python bench/audit_memory.py                  # build (once) and measure
    .venv/bin/python bench/audit_memory.py --dir /tmp/x     # where the checkpoint goes
    .venv/bin/python bench/audit_memory.py --json out.json

The checkpoint has TinyLlama-1.1B's shape (22 layers, hidden 2048, MLP 5632, 32 query heads, 4
key/value heads, vocabulary 32000, untied output: 1.10 billion parameters) with random float16
weights (N(0, 0.02²), norm gains 1), about 2.2 GB on disk, written tensor by tensor in the
safetensors layout to a temporary folder, never to the repository; a word-level tokenizer.json
covers the built-in text. It is built once and reused while it is there.

Each audit is a fresh child process (its peak RSS read with ``os.wait4``): `varcheck audit DIR
--format json` over layers 0-1 and over all 22, then `varcheck audit smollm2-135m` (the 135M
target: under 10 s and under 1 GB). Beside each the memory plan's figure (``hf_audit.plan``:
one layer's float32 weights, the embedding rows in use, the activations) and the baseline of a
process that has imported varcheck and opened the checkpoint. Nothing asserts; the report says
met or missed, with the load average (CPU seconds are the comparable figure on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import PYTHON, REPO, VARCHECK, machine_info, markdown_table

CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_hidden_layers": 22,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
}
SPECIALS = ["<unk>", "<s>", "</s>"]


def shapes(cfg: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every tensor of a Llama checkpoint with its shape, in the file's order."""
    d, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = d // cfg["num_attention_heads"] * cfg["num_key_value_heads"]
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (v, d)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out |= {
            p + "input_layernorm.weight": (d,),
            p + "self_attn.q_proj.weight": (d, d),
            p + "self_attn.k_proj.weight": (kv, d),
            p + "self_attn.v_proj.weight": (kv, d),
            p + "self_attn.o_proj.weight": (d, d),
            p + "post_attention_layernorm.weight": (d,),
            p + "mlp.gate_proj.weight": (f, d),
            p + "mlp.up_proj.weight": (f, d),
            p + "mlp.down_proj.weight": (d, f),
        }
    return out | {"model.norm.weight": (d,), "lm_head.weight": (v, d)}


def _tokenizer(folder: Path, vocab_size: int) -> None:
    """A word-level tokenizer over the built-in text's words (BOS first), padded to the
    vocabulary with unused entries."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    from varcheck.audit.encoder import default_sentences

    words = sorted({w for line in default_sentences() for w in _split(line)})
    names = SPECIALS + words
    names += [f"<unused{i}>" for i in range(vocab_size - len(names))]
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(names)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tok.save(str(folder / "tokenizer.json"))


def _split(line: str) -> list[str]:
    from tokenizers import pre_tokenizers

    return [w for w, _ in pre_tokenizers.Whitespace().pre_tokenize_str(line)]


def build(folder: Path, seed: int = 0) -> float:
    """Write the checkpoint (config, tokenizer, float16 safetensors); seconds taken."""
    t0 = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    table = shapes(CONFIG)
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in table.items():
        size = 2 * int(np.prod(shape))
        header[name] = {
            "dtype": "F16",
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(len(table))]
    part = folder / "model.safetensors.part"
    with open(part, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text)
        for rng, shape in zip(rngs, table.values(), strict=True):
            if len(shape) == 1:
                out.write(np.ones(shape, np.float16).tobytes())
                continue
            for row in range(0, shape[0], 4096):  # a few tens of MB at a time
                rows = min(4096, shape[0] - row)
                block = rng.standard_normal((rows, *shape[1:]), dtype=np.float32) * 0.02
                out.write(block.astype(np.float16).tobytes())
    part.rename(folder / "model.safetensors")
    (folder / "config.json").write_text(json.dumps(CONFIG, indent=1))
    _tokenizer(folder, CONFIG["vocab_size"])
    return time.perf_counter() - t0


def measured(args: list[str]) -> dict[str, Any]:
    """One child's wall and CPU seconds and peak RSS (MB), read with ``os.wait4``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    out = proc.stdout.read() if proc.stdout else b""
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    return {
        "wall": time.perf_counter() - t0,
        "cpu": usage.ru_utime + usage.ru_stime,
        "peak_mb": usage.ru_maxrss / 1024.0,
        "code": os.waitstatus_to_exitcode(status),
        "stdout": out.decode(errors="replace"),
        "stderr": err.decode(errors="replace")[-300:],
    }


_PLAN = """
import json, sys
from varcheck.audit import hf_audit
from varcheck.audit.encoder import default_sentences
ckpt = hf_audit.open_model(sys.argv[1])
ids = hf_audit.encode(ckpt, default_sentences(), 128)
out = {"layer_bytes": ckpt.layer_bytes(), "tokens": sum(map(len, ids)), "sequences": len(ids)}
for name, layers in (("0-1", [0, 1]), ("all", list(range(ckpt.spec.layers)))):
    out[name] = hf_audit.plan(ckpt, ids, layers).memory_bytes
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "varcheck-1b")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    folder = args.dir
    built = None
    if not (folder / "model.safetensors").is_file():
        built = build(folder)
    baseline = measured([PYTHON, "-c", _PLAN, str(folder)])
    plan = json.loads(baseline["stdout"].splitlines()[-1])
    runs = {
        "1.1B, layers 0-1": measured(
            [VARCHECK, "audit", str(folder), "--layers", "0-1", "--format", "json"]
        ),
        "1.1B, all 22 layers": measured([VARCHECK, "audit", str(folder), "--format", "json"]),
        "SmolLM2-135M, all 30 layers": measured(
            [VARCHECK, "audit", "smollm2-135m", "--format", "json"]
        ),
    }
    mb = 1 << 20
    rows = [
        ["open + plan only (baseline)", f"{baseline['cpu']:.1f}", f"{baseline['peak_mb']:.0f}", ""],
        *(
            [name, f"{r['cpu']:.1f}", f"{r['peak_mb']:.0f}", f"exit {r['code']}"]
            for name, r in runs.items()
        ),
    ]
    report = {
        "machine": machine_info(),
        "load": os.getloadavg(),
        "built_seconds": built,
        "plan_mb": {
            k: (v / mb if k in ("0-1", "all", "layer_bytes") else v) for k, v in plan.items()
        },
        "baseline": {k: baseline[k] for k in ("cpu", "peak_mb")},
        "runs": {k: {m: r[m] for m in ("wall", "cpu", "peak_mb", "code")} for k, r in runs.items()},
    }
    print(markdown_table(["audit", "CPU s", "peak RSS MB", ""], rows))
    print(json.dumps({k: report[k] for k in ("load", "built_seconds", "plan_mb")}, indent=1))
    for name, r in runs.items():
        if r["code"] != 0:
            print(f"{name}: {r['stderr']}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
