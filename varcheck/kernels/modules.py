"""A torch attention module as a probe target: :func:`module_kernel`.

A whole attention module takes hidden states and projects them to q, k and v itself, so a
probe cannot give it q, k and v directly. :func:`module_kernel` makes a copy in which the
projections return the q, k and v of the probe's call (the input projections are fed, the
output projection is the identity) and rotary embeddings are switched off (cos = 1, sin = 0),
so that the copy computes exactly the module's attention on the probe's inputs. torch is
imported only when it is called. See docs/probe.md, "A whole module".
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import VarcheckError

__all__ = ["ModuleKernel", "module_kernel", "TOKENS"]

#: Tokens of a module's self-attention (queries = keys): no power of two, and not 64 (a kernel
#: dividing by √n in place of √d_k cannot pass at d_k = 64 by coincidence).
TOKENS = 48
#: The input and output projections of the module layouts known: (inputs, output) attribute
#: names and how the inputs are packed.
_LAYOUTS = (
    ("separate", ("q_proj", "k_proj", "v_proj"), "o_proj"),  # Llama, Mistral, Gemma, Qwen
    ("fused", ("c_attn",), "c_proj"),  # GPT-2: q, k, v concatenated
    ("fused", ("qkv",), "proj"),  # timm's Attention: q, k, v concatenated
    ("per-head", ("query_key_value",), "dense"),  # BLOOM, GPT-NeoX: (heads, 3, d) per token
)
_ROTARY_CHILDREN = ("rotary_emb", "rotary", "rope", "rotary_embedding")
_NORMS = ("q_norm", "k_norm", "norm", "gate")


@dataclass(frozen=True)
class ModuleKernel:
    """A copy of an attention module called as a probe kernel ``fn(q, k, v)`` (layout bnhd).

    Attributes
    ----------
    name : str
        The module's class name.
    dk, heads, kv_heads, tokens : int
        Its head dimension, query heads and key/value heads, and the tokens of each call.
    dtype : str
        The format of its parameters (the inputs are given in it).
    changes : tuple of str
        What was changed in the copy, in words (for the record).
    """

    name: str
    dk: int
    heads: int
    kv_heads: int
    tokens: int
    dtype: str
    changes: tuple[str, ...]
    call: Any = field(repr=False, compare=False)

    def __post_init__(self) -> None:
        # the kernel's name in varcheck's output: varcheck:module_kernel(LlamaAttention)
        object.__setattr__(self, "__qualname__", f"module_kernel({self.name})")
        object.__setattr__(self, "__module__", "varcheck")

    def __call__(self, q: Any, k: Any, v: Any) -> Any:
        return self.call(q, k, v)

    @property
    def options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`varcheck.probe` that match the module's shapes."""
        return {
            "layout": "bnhd",
            "heads": self.heads,
            "kv_heads": self.kv_heads,
            "queries": self.tokens,
            "keys": self.tokens,
            "dv": self.dk,
            "dtype": self.dtype,
        }


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise VarcheckError(
            "module_kernel needs torch (pip install torch); varcheck itself never does"
        ) from None
    return torch


def _layout(module: Any) -> tuple[str, tuple[str, ...], str]:
    for kind, inputs, output in _LAYOUTS:
        if all(hasattr(module, n) for n in (*inputs, output)):
            return kind, inputs, output
    raise VarcheckError(
        f"module_kernel: {type(module).__name__} has none of the projections it knows "
        "(q_proj/k_proj/v_proj/o_proj, c_attn/c_proj, qkv/proj, query_key_value/dense, or "
        "torch.nn.MultiheadAttention); wrap its attention function as a kernel instead"
    )


def _refuse_inner_rotary(module: Any) -> None:
    for name, _ in module.named_children():
        if name in _ROTARY_CHILDREN:
            raise VarcheckError(
                f"module_kernel: {type(module).__name__} applies rotary embeddings (RoPE) "
                f"itself ({name}): its logits are then no function of q·k; switch them off "
                "(cos = 1, sin = 0, or a rotary base so large that every angle is 0) or probe "
                "its attention function"
            )


def _refuse_norms(torch: Any, module: Any) -> None:
    for name in _NORMS:
        part = getattr(module, name, None)
        if part is not None and not isinstance(part, torch.nn.Identity):
            raise VarcheckError(
                f"module_kernel: {type(module).__name__}.{name} is {type(part).__name__}, not "
                "Identity: it changes q, k or the output after the projections, so the probe "
                f"would read it with the scale; set {name} = torch.nn.Identity() in a copy"
            )


def _shapes(module: Any, kind: str, inputs: tuple[str, ...]) -> tuple[int, int, int, int]:
    """Head dimension, query heads, key/value heads and hidden width."""
    config = getattr(module, "config", None)
    heads = getattr(module, "num_heads", None) or getattr(config, "num_attention_heads", None)
    dk = getattr(module, "head_dim", None)
    first = getattr(module, inputs[0])
    hidden = getattr(first, "in_features", None) or getattr(module, "embed_dim", None)
    hidden = hidden or getattr(module, "hidden_size", None)
    if kind == "separate":
        dk = dk or first.out_features // heads
        heads = heads or first.out_features // dk
        kv = getattr(module, inputs[1]).out_features // dk
    else:
        kv = heads
    if not (dk and heads and kv and hidden):
        raise VarcheckError(
            f"module_kernel: cannot read the head shapes of {type(module).__name__}"
        )
    return int(dk), int(heads), int(kv), int(hidden)


def _call_options(
    torch: Any, module: Any, n: int, dk: int, dtype: Any, mask: str | None, given: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The keyword arguments of the module's forward: rotary off, the mask, what was given."""
    params = inspect.signature(module.forward).parameters
    kwargs, changes = dict(given), []
    if "position_embeddings" in params and "position_embeddings" not in kwargs:
        cos = torch.ones(1, n, dk, dtype=dtype)
        kwargs["position_embeddings"] = (cos, torch.zeros_like(cos))
        changes.append("rotary embeddings off (cos = 1, sin = 0)")
    if "residual" in params and "residual" not in kwargs:
        kwargs["residual"] = 0.0  # BLOOM adds its residual inside the attention
    if mask == "causal":
        if "is_causal" in params:
            kwargs["is_causal"] = True
        else:
            future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
            additive = torch.zeros(n, n, dtype=dtype).masked_fill(future, torch.finfo(dtype).min)
            kwargs["attention_mask"] = additive[None, None]
        changes.append("a causal mask given, as the model gives it")
    elif "attention_mask" in params and params["attention_mask"].default is inspect.Parameter.empty:
        kwargs.setdefault("attention_mask", None)
    return kwargs, changes


def module_kernel(
    module: Any, *, tokens: int = TOKENS, mask: str | None = None, **forward_kwargs: Any
) -> ModuleKernel:
    """A probe kernel that runs a copy of a torch attention module on the probe's q, k, v.

    Parameters
    ----------
    module : torch.nn.Module
        Self-attention with q/k/v/o projections (transformers' Llama-like and GPT-2 modules,
        timm's ``Attention``, BLOOM), or ``torch.nn.MultiheadAttention``. It is copied, put in
        eval mode, and its projections are replaced: the input ones return the probe's q, k
        and v, the output one is the identity.
    tokens : int
        Queries and keys per call (self-attention: as many keys as queries).
    mask : {None, "causal"}
        ``"causal"`` gives the module a causal mask as a model gives it (an additive mask in
        transformers, ``is_causal=True`` where the forward takes it); None gives none (the
        module's own default: transformers' sdpa path is causal, its eager path is not).
    **forward_kwargs
        More keyword arguments of the module's forward (BLOOM's ``alibi``).

    Returns
    -------
    ModuleKernel
        Call ``varcheck.probe(kernel, kernel.dk, **kernel.options)``.
    """
    torch = _torch()
    if mask not in (None, "causal"):
        raise VarcheckError(f"module_kernel: mask must be None or 'causal', got {mask!r}")
    if isinstance(module, torch.nn.MultiheadAttention):
        return _multihead(torch, module, tokens, mask)
    if not isinstance(module, torch.nn.Module):
        raise VarcheckError(f"module_kernel takes a torch.nn.Module, got {type(module).__name__}")
    mod = copy.deepcopy(module).eval()
    _refuse_inner_rotary(mod)
    _refuse_norms(torch, mod)
    kind, inputs, output = _layout(mod)
    dk, heads, kv, hidden = _shapes(mod, kind, inputs)
    dtype = next(mod.parameters()).dtype
    kwargs, changes = _call_options(torch, mod, tokens, dk, dtype, mask, forward_kwargs)
    feeds = _feed(torch, mod, kind, inputs)
    setattr(mod, output, torch.nn.Identity())

    def call(q: Any, k: Any, v: Any) -> Any:
        t = [torch.from_numpy(np.ascontiguousarray(a)).to(dtype) for a in (q, k, v)]
        feeds(*t)
        with torch.no_grad():
            out = mod(torch.zeros(1, tokens, hidden, dtype=dtype), **kwargs)
        out = out[0] if isinstance(out, tuple) else out
        return out.reshape(1, tokens, heads, dk).detach()

    changes = [f"{', '.join(inputs)} fed the probe's q, k, v", f"{output} the identity", *changes]
    return ModuleKernel(
        type(module).__name__,
        dk,
        heads,
        kv,
        tokens,
        str(dtype).removeprefix("torch."),
        tuple(changes),
        call,
    )


def _feed(torch: Any, mod: Any, kind: str, inputs: tuple[str, ...]) -> Any:
    """Replace the input projections by modules returning the probe's tensors; the setter."""

    class Fed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.value = None

        def forward(self, _: Any) -> Any:
            return self.value

    fed = [Fed() for _ in inputs]
    for name, f in zip(inputs, fed, strict=True):
        setattr(mod, name, f)

    def flat(x: Any) -> Any:  # (1, n, h, d) -> (1, n, h·d)
        return x.reshape(x.shape[0], x.shape[1], -1)

    def give(q: Any, k: Any, v: Any) -> None:
        if kind == "separate":
            for f, x in zip(fed, (q, k, v), strict=True):
                f.value = flat(x)
        elif kind == "fused":
            fed[0].value = torch.cat([flat(q), flat(k), flat(v)], dim=-1)
        else:
            fed[0].value = flat(torch.stack([q, k, v], dim=3))

    return give


def _multihead(torch: Any, module: Any, tokens: int, mask: str | None) -> ModuleKernel:
    """``nn.MultiheadAttention`` with identity projections, called with q, k, v directly."""
    mod = copy.deepcopy(module).eval()
    if mod.bias_k is not None or mod.add_zero_attn or not mod._qkv_same_embed_dim:
        raise VarcheckError(
            "module_kernel: this MultiheadAttention has add_bias_kv, add_zero_attn or its own "
            "kdim/vdim: keys and values are not the probe's; use one without them"
        )
    e, h, dtype = mod.embed_dim, mod.num_heads, mod.in_proj_weight.dtype
    with torch.no_grad():
        mod.in_proj_weight.copy_(torch.cat([torch.eye(e, dtype=dtype)] * 3))
        if mod.in_proj_bias is not None:
            mod.in_proj_bias.zero_()
        mod.out_proj.weight.copy_(torch.eye(e, dtype=dtype))
        if mod.out_proj.bias is not None:
            mod.out_proj.bias.zero_()
    future = torch.triu(torch.ones(tokens, tokens, dtype=torch.bool), diagonal=1)

    def call(q: Any, k: Any, v: Any) -> Any:
        t = [
            torch.from_numpy(np.ascontiguousarray(a)).to(dtype).reshape(1, tokens, e)
            for a in (q, k, v)
        ]
        if not mod.batch_first:
            t = [x.transpose(0, 1) for x in t]
        causal = {"attn_mask": future, "is_causal": True} if mask == "causal" else {}
        with torch.no_grad():
            out, _ = mod(*t, need_weights=False, **causal)
        out = out if mod.batch_first else out.transpose(0, 1)
        return out.reshape(1, tokens, h, e // h).detach()

    changes = (
        "in_proj and out_proj the identity, biases 0",
        *(("a causal mask given",) if mask == "causal" else ()),
    )
    return ModuleKernel(
        "MultiheadAttention", e // h, h, h, tokens, str(dtype).removeprefix("torch."), changes, call
    )
