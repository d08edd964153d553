"""Transformer model specifications: dense decoders (GQA, SwiGLU), MoE, MLA; files and presets.

A :class:`ModelSpec` is plain data: the shapes that decide FLOPs, parameters,
activation memory and communication volume.  Specs come from

* a built-in preset (``workloads/presets/<name>.yaml``, each with its source),
  see :func:`preset_names`;
* a user's YAML or JSON file with the same keys (see any preset for a template).

:func:`load_model` accepts either.  Every malformed input raises a
:class:`~fabric.errors.FabricError` naming the file and key.

Keys (all sizes are element counts, not bytes)
----------------------------------------------
name, source, notes : str
hidden : int                 model width h
layers : int                 transformer layers l
heads : int                  attention (query) heads a
kv_heads : int               key/value heads g (GQA); default ``heads`` (MHA)
head_dim : int               query/key head dimension; default ``hidden // heads``
v_head_dim : int             value head dimension; default ``head_dim``
ffn_hidden : int             dense MLP width f (default 4h)
swiglu : bool                gated MLP (3 matrices) instead of GeLU (2 matrices)
vocab : int                  vocabulary V (as padded by the framework)
seq_len : int                training sequence length s
dropout : float              hidden/attention dropout (adds masks and memory traffic)
tied_embeddings : bool       input embedding shared with the output layer
experts : int                routed experts E (0: dense model)
top_k : int                  experts per token
expert_ffn_hidden : int      routed-expert MLP width
shared_experts : int         always-active experts of width ``shared_ffn_hidden``
shared_ffn_hidden : int      default ``expert_ffn_hidden``
dense_layers : int           leading layers with the dense MLP in an MoE model
q_lora_rank, kv_lora_rank, rope_head_dim : int
                             multi-head latent attention (DeepSeek-V2/V3); 0 = off
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from fabric.checks import is_whole, shown, whole
from fabric.errors import FabricError

_INT_KEYS = ("hidden", "layers", "heads", "kv_heads", "head_dim", "v_head_dim", "ffn_hidden", "vocab", "seq_len",
             "experts", "top_k", "expert_ffn_hidden", "shared_experts", "shared_ffn_hidden", "dense_layers",
             "q_lora_rank", "kv_lora_rank", "rope_head_dim")
_BOOL_KEYS = ("swiglu", "tied_embeddings")
_STR_KEYS = ("name", "source", "notes")
_FLOAT_KEYS = ("dropout",)
_REQUIRED = ("hidden", "layers", "heads", "vocab", "seq_len")


@dataclass(frozen=True)
class ModelSpec:
    """Shapes of a decoder-only transformer (dense or MoE).

    Build one with :func:`load_model` or :meth:`from_dict` (which fills
    defaults and validates); fields are described in the module docstring.
    """

    name: str
    hidden: int
    layers: int
    heads: int
    vocab: int
    seq_len: int
    kv_heads: int = 0
    head_dim: int = 0
    v_head_dim: int = 0
    ffn_hidden: int = 0
    swiglu: bool = False
    dropout: float = 0.0
    tied_embeddings: bool = False
    experts: int = 0
    top_k: int = 0
    expert_ffn_hidden: int = 0
    shared_experts: int = 0
    shared_ffn_hidden: int = 0
    dense_layers: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_head_dim: int = 0
    source: str = ""
    notes: str = ""

    # ------------------------------------------------------------ derived shapes
    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices per MLP (3 for SwiGLU: gate, up, down; 2 for GeLU)."""
        return 3 if self.swiglu else 2

    def attention_params(self) -> int:
        """Weights of one attention block (projections only; no biases)."""
        h, a, g, d, dv = self.hidden, self.heads, self.kv_heads, self.head_dim, self.v_head_dim
        if self.is_mla:
            q = (h * self.q_lora_rank + self.q_lora_rank * a * d) if self.q_lora_rank else h * a * d
            kv = h * (self.kv_lora_rank + self.rope_head_dim) + self.kv_lora_rank * a * (d - self.rope_head_dim + dv)
            return q + kv + a * dv * h
        return h * a * d + h * g * (d + dv) + a * dv * h

    def mlp_params(self, width: int) -> int:
        return self.mlp_matrices * self.hidden * width

    def params(self) -> int:
        """Total parameters (embeddings counted once if tied)."""
        dense_mlp = self.mlp_params(self.ffn_hidden)
        per_moe = (self.experts * self.mlp_params(self.expert_ffn_hidden)
                   + self.shared_experts * self.mlp_params(self.shared_ffn_hidden) + self.hidden * self.experts)
        body = self.layers * (self.attention_params() + 2 * self.hidden)
        body += (self.layers - self.moe_layers) * dense_mlp + self.moe_layers * per_moe
        emb = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return int(body + emb)

    def active_params(self) -> int:
        """Parameters a token passes through (top-k routed + shared experts)."""
        if not self.is_moe:
            return self.params()
        per_moe_active = (self.top_k * self.mlp_params(self.expert_ffn_hidden)
                          + self.shared_experts * self.mlp_params(self.shared_ffn_hidden) + self.hidden * self.experts)
        body = self.layers * (self.attention_params() + 2 * self.hidden)
        body += self.dense_layers * self.mlp_params(self.ffn_hidden) + self.moe_layers * per_moe_active
        return int(body + self.vocab * self.hidden * (1 if self.tied_embeddings else 2))

    def with_seq_len(self, seq_len: int) -> "ModelSpec":
        if not (is_whole(seq_len) and 0 < seq_len <= MAX_MODEL_INT):  # 8.5 was read as 8, 1e308 overflowed
            raise FabricError("seq_len", f"{seq_len!r} must be a whole number in 1..{MAX_MODEL_INT:,}")
        return dataclasses.replace(self, seq_len=int(seq_len))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    # ------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, raw: Any, where: str = "model") -> "ModelSpec":
        """Validate a mapping of keys (module docstring) and fill defaults.

        Raises
        ------
        FabricError
            Naming ``where:key`` for a missing, unknown or ill-typed key.
        """
        if not isinstance(raw, dict):
            raise FabricError(where, "must be a mapping of model keys (hidden, layers, heads, vocab, seq_len, ...)")
        allowed = set(_INT_KEYS) | set(_BOOL_KEYS) | set(_STR_KEYS) | set(_FLOAT_KEYS)
        for key in raw:
            if key not in allowed:
                raise FabricError(f"{where}:{key}", f"unknown key; allowed: {', '.join(sorted(allowed))}")
        for key in _REQUIRED:
            if key not in raw:
                raise FabricError(f"{where}:{key}", "missing; required keys: " + ", ".join(_REQUIRED))
        vals: dict[str, Any] = {}
        for key, value in raw.items():
            field = f"{where}:{key}"
            if key in _INT_KEYS:
                # 1.28256e5 is the whole number it writes; 1.5 is not.  Past MAX_MODEL_INT int64 sizes overflow,
                # and the message cuts a 400-digit integer short (checks.shown)
                value = whole(value, field, lo=0, hi=MAX_MODEL_INT)
            elif key in _BOOL_KEYS:
                if not isinstance(value, bool):
                    raise FabricError(field, f"{shown(value)} must be true or false")
            elif key in _FLOAT_KEYS:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                    raise FabricError(field, f"{shown(value)} must be a number in [0, 1)")
                value = float(value)
            elif not isinstance(value, str):
                raise FabricError(field, f"{shown(value)} must be a string")
            vals[key] = value
        for key in _REQUIRED:
            if vals[key] <= 0:
                raise FabricError(f"{where}:{key}", f"{vals[key]} must be > 0")
        vals.setdefault("name", Path(where).stem if where != "model" else "model")
        h, a = vals["hidden"], vals["heads"]
        vals["kv_heads"] = vals.get("kv_heads") or a
        if vals.get("head_dim", 0) == 0:
            if h % a:
                raise FabricError(f"{where}:heads", f"heads={a} does not divide hidden={h}; give head_dim")
            vals["head_dim"] = h // a
        vals["v_head_dim"] = vals.get("v_head_dim") or vals["head_dim"]
        vals["ffn_hidden"] = vals.get("ffn_hidden") or 4 * h
        if a % vals["kv_heads"]:
            raise FabricError(f"{where}:kv_heads", f"{vals['kv_heads']} must divide heads={a}")
        experts = vals.get("experts", 0)
        if experts:
            for key in ("top_k", "expert_ffn_hidden"):
                if not vals.get(key):
                    raise FabricError(f"{where}:{key}", f"required (> 0) for an MoE model (experts={experts})")
            if vals["top_k"] > experts:
                raise FabricError(f"{where}:top_k", f"{vals['top_k']} exceeds experts={experts}")
            if vals.get("dense_layers", 0) >= vals["layers"]:
                raise FabricError(f"{where}:dense_layers", f"must be below layers={vals['layers']}")
            if vals.get("shared_experts"):
                vals["shared_ffn_hidden"] = vals.get("shared_ffn_hidden") or vals["expert_ffn_hidden"]
            elif vals.get("shared_ffn_hidden"):  # a width of no expert: it was dropped without a word
                raise FabricError(f"{where}:shared_ffn_hidden", "only with shared_experts > 0")
        else:
            for key in ("top_k", "expert_ffn_hidden", "shared_experts", "shared_ffn_hidden", "dense_layers"):
                if vals.get(key):
                    raise FabricError(f"{where}:{key}", "only for an MoE model; set experts > 0")
        if vals.get("kv_lora_rank"):
            if not vals.get("rope_head_dim") or vals["rope_head_dim"] >= vals["head_dim"]:
                raise FabricError(f"{where}:rope_head_dim",
                                  "MLA needs 0 < rope_head_dim < head_dim (head_dim = nope + rope)")
        elif vals.get("q_lora_rank") or vals.get("rope_head_dim"):
            raise FabricError(f"{where}:kv_lora_rank", "q_lora_rank / rope_head_dim need kv_lora_rank > 0 (MLA)")
        return cls(**vals)


# ------------------------------------------------------------------ presets and files
#: Largest integer a model file may give (layers, widths, vocabulary, sequence length): 2**24, about 16.8 M,
#: is 100x the widest published dimension (vocabularies of ~256 K) and keeps products of three in int64.
MAX_MODEL_INT = 1 << 24


def _presets_dir():
    return resources.files("workloads") / "presets"


def preset_names() -> list[str]:
    """Names of the built-in model presets (file stems under ``workloads/presets``)."""
    return sorted(p.name[:-5] for p in _presets_dir().iterdir() if p.name.endswith(".yaml"))


_PRESET_CACHE: dict[str, ModelSpec] = {}


def load_preset(name: str) -> ModelSpec:
    """A built-in preset by name (e.g. ``llama3-70b``)."""
    if name not in _PRESET_CACHE:
        path = _presets_dir() / f"{name}.yaml"
        if not path.is_file():
            raise FabricError("model", f"unknown preset {name!r}; presets: {', '.join(preset_names())}, "
                                         "or a .yaml/.json file")
        _PRESET_CACHE[name] = ModelSpec.from_dict(yaml.safe_load(path.read_text()), f"{name}.yaml")
    return _PRESET_CACHE[name]


def load_model(ref: str | Path | ModelSpec) -> ModelSpec:
    """A :class:`ModelSpec` from a preset name, a YAML/JSON file path, or a spec.

    Examples
    --------
    >>> m = load_model("gpt3-175b")
    >>> m.hidden, m.layers, round(m.params() / 1e9)
    (12288, 96, 175)
    """
    if isinstance(ref, ModelSpec):
        return ref
    text = str(ref)
    path = Path(text)
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        from fabric.files import load_json, load_yaml

        raw = (load_json if path.suffix.lower() == ".json" else load_yaml)(path, "model")
        try:
            return ModelSpec.from_dict(raw, path.name)
        except (OverflowError, TypeError, ValueError) as exc:
            if isinstance(exc, FabricError):
                raise
            raise FabricError(f"{path.name}", f"a value is out of range or of the wrong type ({exc})") \
                from None
    if text not in preset_names() and (path.exists() or "/" in text or path.suffix.lower() in (".txt", ".toml")):
        # a path, not a preset name: say what the file should be
        raise FabricError("model", f"{text!r} is not a model file (.yaml, .yml or .json) nor a preset; "
                                     f"presets: {', '.join(preset_names())}")
    return load_preset(text)
