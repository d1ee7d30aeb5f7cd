"""The model families an audit reads, from a Hugging Face ``config.json``: shape and declared scale.

:func:`model_spec` turns a config (a parsed JSON object) into a :class:`ModelSpec`: head counts,
d_head, the scale the checkpoint declares for its logits, soft-capping, sliding windows per
layer, RoPE frequencies and the tensors (names and shapes) the forward pass reads. Everything is
checked here, before a tensor is read: an unknown ``model_type``, a quantised checkpoint, head
counts that do not divide, a RoPE variant that is not implemented are one line each. The rules
(defaults when a key is absent, which layers slide, which scale is declared) are those of the
released configurations and their reference implementation; docs/audit.md lists them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.messages import cut
from ..errors import VarcheckError

__all__ = ["FAMILIES", "ENCODERS", "ModelSpec", "Rope", "model_spec", "expected_tensors"]

#: ``model_type`` values read, in the order error messages list them
FAMILIES = ("bert", "roberta", "gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2")
#: the bidirectional encoders among them
ENCODERS = ("bert", "roberta")
_LLAMA_LIKE = FAMILIES[3:]
#: absent ``num_key_value_heads``: the family's default (None: as many as query heads)
_KV_DEFAULT = {"llama": None, "mistral": 8, "qwen2": 32, "qwen3": 32, "gemma": 16, "gemma2": 4}
#: absent ``head_dim``: the family's default (None: hidden size over heads)
_HEAD_DIM_DEFAULT = {"qwen3": 128, "gemma": 256, "gemma2": 256}
_TIED_DEFAULT = {"bert": True, "roberta": True, "gpt2": True, "gemma": True, "gemma2": True}
_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}
_ROPE_TYPES = ("default", "linear", "llama3")
#: bounds of the whole-number fields: far above any released model, far below what would let a
#: tiny file ask for gigabytes before a tensor is read
_COUNTS = {"hidden": 65536, "layers": 1024, "heads": 1024, "intermediate": 1 << 20}
_NAMES = {
    "gpt2": {"hidden": "n_embd", "layers": "n_layer", "heads": "n_head"},
    "other": {
        "hidden": "hidden_size",
        "layers": "num_hidden_layers",
        "heads": "num_attention_heads",
    },
}


@dataclass(frozen=True)
class Rope:
    """Rotary positions: frequency per pair of coordinates, paired as (p, p + d_head/2).

    Attributes
    ----------
    inv_freq : tuple of float
        θ_p for p < d_head/2, float32 values, after any scaling of the frequencies.
    kind : str
        ``default``, ``linear`` or ``llama3``.
    theta : float
    """

    inv_freq: tuple[float, ...]
    kind: str
    theta: float


@dataclass(frozen=True)
class ModelSpec:
    """What the audit needs of a checkpoint's configuration.

    Attributes
    ----------
    family : str
        A ``model_type`` of :data:`FAMILIES`.
    hidden, layers, heads, kv_heads, head_dim, intermediate : int
    eps : float
        LayerNorm or RMSNorm epsilon.
    activation : str
        ``gelu`` (erf), ``gelu_tanh``, ``relu`` or ``silu``.
    max_positions : int
        Longest sequence the checkpoint takes.
    scales : tuple of float
        Declared scale of q·k per layer (what the checkpoint multiplies logits by).
    scale_rule : str
        Where that scale comes from, for reports.
    softcap, final_softcap : float or None
        Gemma 2's c in c·tanh(s/c) on the scaled logits and on the output logits.
    windows : tuple of (int or None)
        Sliding window per layer: key j visible to query i iff i − w < j ≤ i.
    rope : Rope or None
    qkv_bias, o_bias, mlp_bias, qk_norm : bool
    norm_offset : float
        Added to stored RMSNorm gains (1 for Gemma, whose gains are stored as g − 1).
    embed_scale : float or None
        Gemma's multiplier of the embeddings (√hidden, as float32).
    tied : bool
        Output matrix is the embedding matrix.
    pad_token_id : int
        RoBERTa's padding id (its positions start after it).
    """

    family: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    eps: float
    activation: str
    max_positions: int
    scales: tuple[float, ...]
    scale_rule: str
    softcap: float | None
    final_softcap: float | None
    windows: tuple[int | None, ...]
    rope: Rope | None
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool
    norm_offset: float
    embed_scale: float | None
    tied: bool
    pad_token_id: int

    @property
    def causal(self) -> bool:
        """Whether a query sees only keys at or before it."""
        return self.family not in ENCODERS

    def kv_head(self, head: int) -> int:
        """The key head query head ``head`` reads (consecutive query heads share one)."""
        return head // (self.heads // self.kv_heads)


def _refuse(where: str, text: str) -> VarcheckError:
    return VarcheckError(f"{where}: {text}")


def _count(raw: Mapping[str, Any], key: str, where: str, most: int, default: Any = None) -> int:
    value = raw.get(key)
    value = default if value is None else value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if value is None:
        raise _refuse(where, f"no {key!r}; accepted: a whole number from 1 to {most:,}")
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
        raise _refuse(
            where, f"{key} {cut(repr(value))} is not accepted; a whole number from 1 to {most:,}"
        )
    return value


def _number(
    raw: Mapping[str, Any], key: str, where: str, default: float, low: float, high: float
) -> float:
    value = raw.get(key, default)
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not (low < value < high) or not math.isfinite(value):
        raise _refuse(
            where, f"{key} {cut(repr(value))} is not accepted; a number in ({low:g}, {high:g})"
        )
    return float(value)


def _optional_cap(
    raw: Mapping[str, Any], key: str, where: str, default: float | None
) -> float | None:
    if raw.get(key, default) is None:
        return None
    return _number(raw, key, where, default or 0.0, 0.0, 1e6)


def _refuse_variants(raw: Mapping[str, Any], family: str, where: str) -> None:
    """Refuse what the family's forward pass here does not implement."""
    if raw.get("quantization_config") is not None:
        raise _refuse(
            where, "a quantised checkpoint (quantization_config); accepted: float weights"
        )
    if family in ENCODERS:
        if raw.get("is_decoder") or raw.get("add_cross_attention"):
            raise _refuse(where, "an encoder used as a decoder; accepted: a plain encoder")
        kind = raw.get("position_embedding_type", "absolute")
        if kind != "absolute":
            raise _refuse(where, f"position_embedding_type {cut(repr(kind))}; accepted: 'absolute'")
    if raw.get("use_bidirectional_attention"):
        raise _refuse(where, "bidirectional attention in a decoder; accepted: causal")
    if raw.get("partial_rotary_factor", 1.0) != 1.0:
        raise _refuse(where, "partial rotary embeddings; accepted: partial_rotary_factor 1")


def _activation(raw: Mapping[str, Any], family: str, where: str) -> str:
    key = {"gpt2": "activation_function", "gemma2": "hidden_activation"}.get(family, "hidden_act")
    default = {"gpt2": "gelu_new", "gemma": "gelu_pytorch_tanh", "gemma2": "gelu_pytorch_tanh"}
    value = raw.get(key) or default.get(family, "gelu" if family in ENCODERS else "silu")
    if family == "gemma" and value == "gelu":
        value = "gelu_pytorch_tanh"  # Gemma's "gelu" is the tanh form
    if not isinstance(value, str) or value not in _ACTIVATIONS:
        raise _refuse(where, f"{key} {cut(repr(value))}; accepted: {', '.join(_ACTIVATIONS)}")
    return _ACTIVATIONS[value]


def _rope_parameters(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The RoPE settings, v4 (``rope_theta``, ``rope_scaling``) or v5 (``rope_parameters``)."""
    scaling = raw.get("rope_scaling")
    params = scaling if scaling else raw.get("rope_parameters")
    params = dict(params) if isinstance(params, dict) else {}
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in _ROPE_TYPES:
        raise _refuse(where, f"rope type {cut(repr(kind))}; accepted: {', '.join(_ROPE_TYPES)}")
    params["rope_type"] = kind
    params.setdefault("rope_theta", raw.get("rope_theta", 10000.0))
    return params


def _rope(raw: Mapping[str, Any], head_dim: int, where: str) -> Rope:
    params = _rope_parameters(raw, where)
    theta = _number(params, "rope_theta", where, 10000.0, 1.0, 1e12)
    exponent = np.arange(0, head_dim, 2).astype(np.float32) / np.float32(head_dim)
    inv = (np.float32(1.0) / (np.float32(theta) ** exponent)).astype(np.float32)
    kind = params["rope_type"]
    if kind == "linear":
        inv = (inv / np.float32(_number(params, "factor", where, 1.0, 0.0, 1e6))).astype(np.float32)
    elif kind == "llama3":
        inv = _llama3(inv, params, where)
    return Rope(tuple(float(v) for v in inv), kind, theta)


def _llama3(inv: np.ndarray, params: Mapping[str, Any], where: str) -> np.ndarray:
    """Llama 3.1's frequencies: long wavelengths divided by ``factor``, short ones kept, a
    linear blend between."""
    factor = _number(params, "factor", where, 8.0, 0.0, 1e6)
    low = _number(params, "low_freq_factor", where, 1.0, 0.0, 1e6)
    high = _number(params, "high_freq_factor", where, 4.0, low, 1e6)
    old = _number(params, "original_max_position_embeddings", where, 8192, 0.0, 1e9)
    wavelen = np.float32(2 * math.pi) / inv
    scaled = np.where(wavelen > old / low, inv / np.float32(factor), inv)
    smooth = (old / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / np.float32(factor) + smooth * scaled
    medium = ~(wavelen < old / high) & ~(wavelen > old / low)
    return np.where(medium, blended, scaled).astype(np.float32)


def _windows(raw: Mapping[str, Any], family: str, layers: int, where: str) -> tuple:
    """Sliding window per layer (None: full causal attention)."""
    if family == "mistral":
        w = raw.get("sliding_window", 4096)
        return (
            None if w is None else _count(raw, "sliding_window", where, 1 << 30, 4096),
        ) * layers
    if family in ("qwen2", "qwen3"):
        if not raw.get("use_sliding_window") or raw.get("sliding_window") is None:
            return (None,) * layers
        w = _count(raw, "sliding_window", where, 1 << 30)
        types = raw.get("layer_types")
        if types is None:
            first = raw.get("max_window_layers", 28)
            if not isinstance(first, int) or isinstance(first, bool) or not 0 <= first < 1 << 20:
                raise _refuse(
                    where, f"max_window_layers {cut(repr(first))}; accepted: a whole number >= 0"
                )
            return tuple(w if i >= first else None for i in range(layers))
        return _typed_windows(types, w, layers, where)
    if family == "gemma2":
        w = _count(raw, "sliding_window", where, 1 << 30, 4096)
        types = raw.get("layer_types")
        if types is None:
            return tuple(w if i % 2 == 0 else None for i in range(layers))
        return _typed_windows(types, w, layers, where)
    return (None,) * layers


def _typed_windows(types: Any, w: int, layers: int, where: str) -> tuple:
    kinds = ("full_attention", "sliding_attention")
    if not isinstance(types, list) or len(types) != layers or any(t not in kinds for t in types):
        raise _refuse(where, f"layer_types must list {layers} of {', '.join(kinds)}")
    return tuple(w if t == "sliding_attention" else None for t in types)


def _shape(raw: Mapping[str, Any], family: str, where: str) -> dict[str, int]:
    names = _NAMES["gpt2" if family == "gpt2" else "other"]
    out = {k: _count(raw, names[k], where, _COUNTS[k]) for k in ("hidden", "layers", "heads")}
    hidden, heads = out["hidden"], out["heads"]
    kv = raw.get("num_key_value_heads") if family in _LLAMA_LIKE else None
    kv_default = _KV_DEFAULT.get(family) or heads
    out["kv_heads"] = _count(raw, "num_key_value_heads", where, _COUNTS["heads"], kv or kv_default)
    if heads % out["kv_heads"]:
        raise _refuse(
            where,
            f"{heads} query heads do not share {out['kv_heads']} key-value heads "
            "evenly; accepted: a divisor of the query heads",
        )
    declared = raw.get("head_dim") if family in _LLAMA_LIKE else None
    if declared is None and family in _HEAD_DIM_DEFAULT and "head_dim" not in raw:
        declared = _HEAD_DIM_DEFAULT[family]
    if declared is None:
        if hidden % heads:
            raise _refuse(where, f"hidden size {hidden} is not a multiple of {heads} heads")
        out["head_dim"] = hidden // heads
    else:
        out["head_dim"] = _count({"head_dim": declared}, "head_dim", where, 4096)
    if family in _LLAMA_LIKE and out["head_dim"] % 2:
        raise _refuse(where, f"head_dim {out['head_dim']} is odd; RoPE needs an even one")
    key = "n_inner" if family == "gpt2" else "intermediate_size"
    default = 4 * hidden if family == "gpt2" else None
    out["intermediate"] = _count(raw, key, where, _COUNTS["intermediate"], raw.get(key) or default)
    return out


def _scales(raw: Mapping[str, Any], family: str, shape: dict[str, int], where: str) -> tuple:
    """Declared scale per layer, and the rule it comes from."""
    dk, layers = shape["head_dim"], shape["layers"]
    if family == "gpt2":
        base = 1 / math.sqrt(dk) if raw.get("scale_attn_weights", True) else 1.0
        rule = "1/√d_head" if raw.get("scale_attn_weights", True) else "1 (scale_attn_weights off)"
        if raw.get("scale_attn_by_inverse_layer_idx"):
            return tuple(base / (i + 1) for i in range(layers)), rule + " ÷ (layer + 1)"
        return (base,) * layers, rule
    if family == "gemma2":
        scalar = _number(raw, "query_pre_attn_scalar", where, 256, 0.0, 1e9)
        return (scalar**-0.5,) * layers, f"query_pre_attn_scalar^-1/2 ({scalar:g})"
    return (1 / math.sqrt(dk),) * layers, "1/√d_head"


def model_spec(raw: Mapping[str, Any], where: str = "config.json") -> ModelSpec:
    """The :class:`ModelSpec` of a parsed ``config.json``.

    Raises
    ------
    VarcheckError
        An unknown ``model_type`` (the line names the accepted ones), a variant not implemented,
        a count out of bounds or head counts that do not divide.
    """
    family = raw.get("model_type")
    if family not in FAMILIES:
        raise _refuse(
            where, f"model_type {cut(repr(family))} is not read; accepted: " + ", ".join(FAMILIES)
        )
    _refuse_variants(raw, family, where)
    shape = _shape(raw, family, where)
    scales, rule = _scales(raw, family, shape, where)
    llama_like = family in _LLAMA_LIKE
    eps_key = {"gpt2": "layer_norm_epsilon"}.get(
        family, "layer_norm_eps" if not llama_like else "rms_norm_eps"
    )
    eps_default = 1e-12 if family in ENCODERS else (1e-5 if family == "gpt2" else 1e-6)
    pos_key = "n_positions" if family == "gpt2" else "max_position_embeddings"
    pos_default = {"bert": 512, "roberta": 512, "gpt2": 1024, "mistral": 131072}.get(family, 8192)
    return ModelSpec(
        family=family,
        eps=_number(raw, eps_key, where, eps_default, 0.0, 1.0),
        activation=_activation(raw, family, where),
        max_positions=_count(raw, pos_key, where, 1 << 24, pos_default),
        scales=scales,
        scale_rule=rule,
        softcap=_optional_cap(
            raw, "attn_logit_softcapping", where, 50.0 if family == "gemma2" else None
        ),
        final_softcap=_optional_cap(
            raw, "final_logit_softcapping", where, 30.0 if family == "gemma2" else None
        ),
        windows=_windows(raw, family, shape["layers"], where),
        rope=_rope(raw, shape["head_dim"], where) if llama_like else None,
        qkv_bias=family in ("qwen2", *ENCODERS, "gpt2") or bool(raw.get("attention_bias")),
        o_bias=family in (*ENCODERS, "gpt2")
        or (family != "qwen2" and bool(raw.get("attention_bias"))),
        mlp_bias=family in (*ENCODERS, "gpt2") or bool(raw.get("mlp_bias")),
        qk_norm=family == "qwen3",
        norm_offset=1.0 if family in ("gemma", "gemma2") else 0.0,
        embed_scale=float(np.sqrt(np.float32(shape["hidden"])))
        if family in ("gemma", "gemma2")
        else None,
        tied=bool(raw.get("tie_word_embeddings", _TIED_DEFAULT.get(family, False))),
        pad_token_id=_pad_id(raw, family, where),
        **shape,
    )


def _pad_id(raw: Mapping[str, Any], family: str, where: str) -> int:
    if family != "roberta":
        return 0
    value = raw.get("pad_token_id", 1)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 24:
        raise _refuse(where, f"pad_token_id {cut(repr(value))}; accepted: a whole number >= 0")
    return value


def _bert_layer(spec: ModelSpec, i: int) -> dict[str, tuple]:
    d, f = spec.hidden, spec.intermediate
    p = f"encoder.layer.{i}."
    out: dict[str, tuple] = {}
    for name in ("query", "key", "value"):
        out[f"{p}attention.self.{name}.weight"] = (d, d)
        out[f"{p}attention.self.{name}.bias"] = (d,)
    for name, shape in (
        ("attention.output.dense", (d, d)),
        ("intermediate.dense", (f, d)),
        ("output.dense", (d, f)),
    ):
        out[f"{p}{name}.weight"], out[f"{p}{name}.bias"] = shape, shape[:1]
    for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
        out[f"{p}{ln}.weight"] = out[f"{p}{ln}.bias"] = (d,)
    return out


def _gpt2_layer(spec: ModelSpec, i: int) -> dict[str, tuple]:
    d, f = spec.hidden, spec.intermediate
    p = f"h.{i}."
    return {
        f"{p}ln_1.weight": (d,),
        f"{p}ln_1.bias": (d,),
        f"{p}ln_2.weight": (d,),
        f"{p}ln_2.bias": (d,),
        f"{p}attn.c_attn.weight": (d, 3 * d),
        f"{p}attn.c_attn.bias": (3 * d,),
        f"{p}attn.c_proj.weight": (d, d),
        f"{p}attn.c_proj.bias": (d,),
        f"{p}mlp.c_fc.weight": (d, f),
        f"{p}mlp.c_fc.bias": (f,),
        f"{p}mlp.c_proj.weight": (f, d),
        f"{p}mlp.c_proj.bias": (d,),
    }


def _llama_layer(spec: ModelSpec, i: int) -> dict[str, tuple]:
    d, f, dk = spec.hidden, spec.intermediate, spec.head_dim
    p = f"layers.{i}."
    rows = {"q": spec.heads * dk, "k": spec.kv_heads * dk, "v": spec.kv_heads * dk}
    out: dict[str, tuple] = {}
    for name, n in rows.items():
        out[f"{p}self_attn.{name}_proj.weight"] = (n, d)
        if spec.qkv_bias:
            out[f"{p}self_attn.{name}_proj.bias"] = (n,)
    out[f"{p}self_attn.o_proj.weight"] = (d, rows["q"])
    if spec.o_bias:
        out[f"{p}self_attn.o_proj.bias"] = (d,)
    if spec.qk_norm:
        out[f"{p}self_attn.q_norm.weight"] = out[f"{p}self_attn.k_norm.weight"] = (dk,)
    norms = ["input_layernorm", "post_attention_layernorm"]
    if spec.family == "gemma2":
        norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
    for name in norms:
        out[f"{p}{name}.weight"] = (d,)
    for name, shape in (("gate_proj", (f, d)), ("up_proj", (f, d)), ("down_proj", (d, f))):
        out[f"{p}mlp.{name}.weight"] = shape
        if spec.mlp_bias:
            out[f"{p}mlp.{name}.bias"] = shape[:1]
    return out


def expected_tensors(spec: ModelSpec, layer: int | None = None) -> dict[str, tuple]:
    """Tensors the forward pass reads and their shapes (None: any size on that axis), named
    without the checkpoint's prefix: those of one layer, or (``layer`` None) the rest."""
    if layer is not None:
        build = {"bert": _bert_layer, "roberta": _bert_layer, "gpt2": _gpt2_layer}
        return build.get(spec.family, _llama_layer)(spec, layer)
    d = spec.hidden
    if spec.family in ENCODERS:
        return {
            "embeddings.word_embeddings.weight": (None, d),
            "embeddings.position_embeddings.weight": (None, d),
            "embeddings.token_type_embeddings.weight": (None, d),
            "embeddings.LayerNorm.weight": (d,),
            "embeddings.LayerNorm.bias": (d,),
        }
    if spec.family == "gpt2":
        return {
            "wte.weight": (None, d),
            "wpe.weight": (None, d),
            "ln_f.weight": (d,),
            "ln_f.bias": (d,),
        }
    return {"embed_tokens.weight": (None, d), "norm.weight": (d,)}
