"""A small real decoder-only transformer, built from a :class:`~course_lib.model.models.ModelSpec`.

Llama-style: token embedding, then per layer RMSNorm -> grouped-query
attention with rotary positions -> residual, RMSNorm -> gated MLP
(``down(silu(gate(h)) * up(h))``) -> residual; a final RMSNorm and the LM head.
Weights are random (no downloads); what we care about is where the bytes go.

The KV cache is one preallocated tensor, filled by prefill and decode:

    kv_cache.shape == [layers, 2 (key, value), sequences, kv_heads, context_tokens, head_dim]

so its size is exactly ``2 x layers x kv_heads x head_dim x bytes`` per token,
the formula of :func:`course_lib.model.models.kv_cache_bytes_per_token`.

The model is built from the spec's shape, and its parameter count must equal
``spec.params_total``; a family we cannot build faithfully is refused:

>>> from course_lib.model.presets import get_model
>>> arch = architecture(get_model("course-tiny"))
>>> arch.params_total == get_model("course-tiny").params_total == 245_924_864
True
>>> architecture(get_model("gpt2"))
Traceback (most recent call last):
...
course_lib.errors.CourseInputError: model 'gpt2' (model_type='gpt2') cannot be measured: the measured model is llama-style (RMSNorm, rotary, GQA, gated MLP); use a llama, mistral, qwen2, phi3 or gemma2 config, e.g. --model course-tiny

torch is imported inside the functions, so importing this module is light.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import CourseInputError, check_count
from ..model.models import ModelSpec

#: Families whose checkpoints have this layout (HF model_type).
LLAMA_STYLE = ("llama", "mistral", "qwen2", "phi3", "gemma2")
#: Storage dtypes torch can compute in on CPU and GPU alike.
TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


@dataclass(frozen=True)
class Architecture:
    """Everything needed to build the model (plain ints and flags, JSON-ready).

    qkv_bias / o_bias: biases on the q, k, v (qwen2) and output projections.
    norms_per_layer: 2 (llama) or 4 (gemma2's extra post-norms).
    rope_theta: rotary base (10,000 as in Llama-2).
    """

    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tied_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    norms_per_layer: int = 2
    rope_theta: float = 10_000.0

    @property
    def q_width(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.num_kv_heads * self.head_dim

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every weight tensor's name and shape, in creation order."""
        h, q, kv, i = self.hidden_size, self.q_width, self.kv_width, self.intermediate_size
        out: dict[str, tuple[int, ...]] = {"embed": (self.vocab_size, h)}
        for n in range(self.num_layers):
            p = f"layers.{n}."
            out[p + "attn_norm"] = (h,)
            out[p + "wq"], out[p + "wk"], out[p + "wv"], out[p + "wo"] = (q, h), (kv, h), (kv, h), (h, q)
            if self.qkv_bias:
                out[p + "bq"], out[p + "bk"], out[p + "bv"] = (q,), (kv,), (kv,)
            if self.o_bias:
                out[p + "bo"] = (h,)
            out[p + "mlp_norm"] = (h,)
            if self.norms_per_layer == 4:
                out[p + "post_attn_norm"], out[p + "post_mlp_norm"] = (h,), (h,)
            out[p + "w_gate"], out[p + "w_up"], out[p + "w_down"] = (i, h), (i, h), (h, i)
        out["final_norm"] = (h,)
        if not self.tied_embeddings:
            out["lm_head"] = (self.vocab_size, h)
        return out

    @property
    def params_total(self) -> int:
        """Parameters of the built model: :meth:`shapes` counted per layer once, not tensor by tensor
        (a config of 10^6 layers is refused in microseconds instead of seconds).

        >>> a = Architecture("t", 8, 3, 2, 1, 4, 16, 10, qkv_bias=True, o_bias=True, norms_per_layer=4)
        >>> a.params_total == sum(math.prod(s) for s in a.shapes().values())
        True
        """
        h, q, kv, i = self.hidden_size, self.q_width, self.kv_width, self.intermediate_size
        layer = (2 * q * h + 2 * kv * h + 3 * i * h + self.norms_per_layer * h
                 + (q + 2 * kv if self.qkv_bias else 0) + (h if self.o_bias else 0))
        heads = (1 if self.tied_embeddings else 2) * self.vocab_size * h
        return heads + self.num_layers * layer + h

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def architecture(spec: ModelSpec) -> Architecture:
    """The buildable architecture of ``spec``, or :class:`CourseInputError` saying why not.

    Biases and the number of norms are read back from the spec's parameter
    groups, so the built model has exactly ``spec.params_total`` parameters.
    """
    label = f"model {spec.name!r} (model_type={spec.model_type!r})"
    if spec.model_type not in LLAMA_STYLE or spec.attention == "mla" or spec.num_experts:
        raise CourseInputError(
            f"{label} cannot be measured: the measured model is llama-style (RMSNorm, rotary, GQA, gated MLP); "
            f"use a llama, mistral, qwen2, phi3 or gemma2 config, e.g. --model course-tiny")
    h, layers = spec.hidden_size, spec.num_layers
    q_width, kv_width = spec.num_attention_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    params = spec.params
    kv_extra = params.get("attention_kv", 0) // layers - 2 * h * kv_width   # k and v biases
    qkv_bias = kv_extra == 2 * kv_width
    o_extra = params.get("attention", 0) // layers - 2 * h * q_width - (q_width if qkv_bias else 0)
    norms_per_layer = (params.get("norms", 0) - h) // (layers * h)
    arch = Architecture(
        name=spec.name, hidden_size=h, num_layers=layers, num_heads=spec.num_attention_heads,
        num_kv_heads=spec.num_kv_heads, head_dim=spec.head_dim, intermediate_size=spec.intermediate_size,
        vocab_size=spec.vocab_size, tied_embeddings=spec.tie_word_embeddings,
        qkv_bias=qkv_bias, o_bias=o_extra == h,
        norms_per_layer=norms_per_layer if norms_per_layer in (2, 4) else 2,
    )
    if arch.params_total != spec.params_total:
        raise CourseInputError(
            f"{label} cannot be measured faithfully: the llama-style model built from its shape has "
            f"{arch.params_total:,} parameters but the spec counts {spec.params_total:,} (extra biases or "
            f"a given --params?); use a plain llama-style config, e.g. --model course-tiny")
    return arch


def torch_dtype(name: str):
    """The torch dtype for "fp32" / "fp16" / "bf16" (any alias course_lib knows)."""
    import torch

    from ..dtypes import get_dtype

    canonical = get_dtype(name).name
    if canonical not in TORCH_DTYPES:
        raise CourseInputError(f"dtype={name!r} cannot be computed in by the measured model; use fp32, fp16 or bf16")
    return getattr(torch, TORCH_DTYPES[canonical])


# ----------------------------------------------------------------- the KV cache

class KVCache:
    """One preallocated tensor holding every layer's keys and values.

    ``torch.zeros`` writes every byte, so the operating system (or the GPU
    allocator) really commits the memory now; ``torch.empty`` might not touch
    the pages, and an untouched page costs no RAM until first written.
    """

    def __init__(self, arch: Architecture, sequences: int, context_tokens: int, dtype: str = "fp32",
                 device: str = "cpu"):
        import torch

        self.sequences = check_count("sequences", sequences, 1)
        self.context_tokens = check_count("context_tokens", context_tokens, 1)
        self.tensor = torch.zeros(arch.num_layers, 2, self.sequences, arch.num_kv_heads, self.context_tokens,
                                  arch.head_dim, dtype=torch_dtype(dtype), device=device)

    @property
    def nbytes(self) -> int:
        """Bytes of the cache tensor (elements x element size)."""
        return self.tensor.numel() * self.tensor.element_size()

    def write(self, layer: int, start: int, k, v) -> None:
        """Store keys/values ``[S, kv_heads, n, head_dim]`` at positions start..start+n-1."""
        n = k.shape[2]
        if start + n > self.context_tokens:
            raise CourseInputError(f"position {start + n} is past the cache's context_tokens={self.context_tokens}")
        self.tensor[layer, 0, :, :, start:start + n] = k
        self.tensor[layer, 1, :, :, start:start + n] = v

    def read(self, layer: int, end: int):
        """Keys and values of positions 0..end-1, as views (no copy)."""
        return self.tensor[layer, 0, :, :, :end], self.tensor[layer, 1, :, :, :end]


# ----------------------------------------------------------------- the model

class TinyDecoder:
    """The decoder: a dict of named weight tensors and a forward pass over them.

    Build one with :meth:`random`; ``weights`` is also its safetensors state dict.
    """

    #: Let attention read the shared KV heads directly (``enable_gqa``); None = where the fused kernels
    #: can (CPU; CUDA fp16/bf16 without a mask). Otherwise each KV head is copied for its query heads,
    #: so PyTorch never falls back to the math kernel and its tokens x tokens score matrix.
    native_gqa: bool | None = None

    def __init__(self, arch: Architecture, weights: dict[str, Any]):
        self.arch = arch
        self.weights = weights

    @classmethod
    def random(cls, arch: Architecture, dtype: str = "fp32", device: str = "cpu", seed: int = 0) -> "TinyDecoder":
        """Random weights (normal, std 0.02; norms at 1), written in place so every page is touched."""
        import torch

        dt = torch_dtype(dtype)
        gen = torch.Generator(device=device).manual_seed(seed)
        weights = {}
        for name, shape in arch.shapes().items():
            tensor = torch.empty(shape, dtype=dt, device=device)
            if name.endswith("norm"):
                tensor.fill_(1.0)
            elif name.split(".")[-1].startswith("b"):
                tensor.zero_()
            else:
                tensor.normal_(0.0, 0.02, generator=gen)
            weights[name] = tensor
        return cls(arch, weights)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.weights.values())

    def to(self, device: str) -> "TinyDecoder":
        return TinyDecoder(self.arch, {k: v.to(device) for k, v in self.weights.items()})

    # -- pieces
    def _norm(self, x, name: str):
        import torch.nn.functional as F

        return F.rms_norm(x, (x.shape[-1],), self.weights[name], eps=1e-6)

    def _rope(self, x, start: int):
        """Rotate ``x [S, heads, n, head_dim]`` by its positions start..start+n-1 (rotate-half form)."""
        import torch

        n, d = x.shape[2], x.shape[3]
        inv_freq = 1.0 / (self.arch.rope_theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
        angles = torch.outer(torch.arange(start, start + n, device=x.device, dtype=torch.float32), inv_freq)
        cos = torch.cat([angles.cos(), angles.cos()], dim=-1).to(x.dtype)
        sin = torch.cat([angles.sin(), angles.sin()], dim=-1).to(x.dtype)
        half = d // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def _attention(self, layer: int, h, cache: KVCache, start: int):
        import torch
        import torch.nn.functional as F

        a, w, p = self.arch, self.weights, f"layers.{layer}."
        S, n, _ = h.shape
        q = F.linear(h, w[p + "wq"], w.get(p + "bq")).view(S, n, a.num_heads, a.head_dim).transpose(1, 2)
        k = F.linear(h, w[p + "wk"], w.get(p + "bk")).view(S, n, a.num_kv_heads, a.head_dim).transpose(1, 2)
        v = F.linear(h, w[p + "wv"], w.get(p + "bv")).view(S, n, a.num_kv_heads, a.head_dim).transpose(1, 2)
        q, k = self._rope(q, start), self._rope(k, start)
        cache.write(layer, start, k, v)
        del k, v
        keys, values = cache.read(layer, start + n)
        if start == 0:            # a whole prompt: plain causal mask
            mask, causal = None, n > 1
        elif n == 1:              # decode: the new token sees every cached token
            mask, causal = None, False
        else:                     # a later prefill chunk: token i sees positions <= start + i
            positions = torch.arange(start + n, device=h.device)
            mask, causal = positions[None, :] <= (start + torch.arange(n, device=h.device))[:, None], False
        native = self.native_gqa
        if native is None:   # CPU flash and CUDA flash read shared KV heads; other CUDA kernels need copies
            native = h.device.type == "cpu" or (mask is None and q.dtype in (torch.float16, torch.bfloat16))
        if not native and a.num_kv_heads != a.num_heads:
            group = a.num_heads // a.num_kv_heads
            keys, values = keys.repeat_interleave(group, 1), values.repeat_interleave(group, 1)
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, is_causal=causal, enable_gqa=native)
        del q
        out = out.transpose(1, 2).reshape(S, n, a.q_width)
        return F.linear(out, w[p + "wo"], w.get(p + "bo"))

    def _mlp(self, layer: int, h):
        import torch.nn.functional as F

        w, p = self.weights, f"layers.{layer}."
        # Alive together at the widest point: x, h, silu(gate), up, and their product.
        return F.linear(F.silu(F.linear(h, w[p + "w_gate"])) * F.linear(h, w[p + "w_up"]), w[p + "w_down"])

    # -- forward
    def forward(self, token_ids, cache: KVCache, start: int = 0):
        """Run ``token_ids [S, n]`` at positions start..start+n-1, filling the cache.

        Returns the logits of the last position only, ``[S, vocab]`` (sampling
        needs no more; a full ``[S, n, vocab]`` tensor would dwarf the rest).
        """
        import torch

        with torch.inference_mode():
            x = self.weights["embed"][token_ids]
            four = self.arch.norms_per_layer == 4
            for layer in range(self.arch.num_layers):
                p = f"layers.{layer}."
                attn = self._attention(layer, self._norm(x, p + "attn_norm"), cache, start)
                x = x + (self._norm(attn, p + "post_attn_norm") if four else attn)
                del attn
                mlp = self._mlp(layer, self._norm(x, p + "mlp_norm"))
                x = x + (self._norm(mlp, p + "post_mlp_norm") if four else mlp)
                del mlp
            last = self._norm(x[:, -1, :], "final_norm")
            del x
            head = self.weights["embed"] if self.arch.tied_embeddings else self.weights["lm_head"]
            return torch.nn.functional.linear(last, head)

    def prefill(self, token_ids, cache: KVCache, chunk_tokens: int | None = None):
        """Fill the cache with the prompts ``[S, n]``, ``chunk_tokens`` positions per step (all at once by default)."""
        n = token_ids.shape[1]
        chunk = n if chunk_tokens is None else check_count("prefill_chunk_tokens", chunk_tokens, 1)
        logits = None
        for start in range(0, n, chunk):
            logits = self.forward(token_ids[:, start:start + chunk], cache, start)
        return logits

    def decode(self, next_ids, cache: KVCache, position: int):
        """One decode step: ``next_ids [S, 1]`` at ``position``; returns ``[S, vocab]`` logits."""
        return self.forward(next_ids, cache, position)
