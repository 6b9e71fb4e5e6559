"""Plain-text tables for budgets: what the CLI, the lab and the notebook print."""

from __future__ import annotations

from .budget import Budget, Estimate
from .units import GB, GiB


def budget_table(budget: Budget, title: str | None = None) -> str:
    """A budget as an aligned table, every size in bytes, GB (10^9) and GiB (2^30).

    >>> from course_lib.budget import plan_budget
    >>> b = plan_budget(device_bytes="24GB", weights_bytes="14GB", workspace_bytes="2GB",
    ...                 reserve_bytes="2GB", per_sequence_kv_bytes="1.5GB", active_sequences=4)
    >>> print(budget_table(b).splitlines()[-1])
    verdict: fits: 4 active sequences leave 0.00 GB headroom (at most 4 fit)
    """
    rows = [(p.name, p.kind, p.bytes, p.note) for p in budget.pools]
    lines = []
    if title:
        lines.append(title)
    header = f"{'pool':<14} {'kind':<18} {'bytes':>16} {'GB':>9} {'GiB':>9}  note"
    lines.append(header)
    lines.append("-" * len(header))
    for name, kind, size, note in rows:
        lines.append(f"{name:<14} {kind:<18} {size:>16,} {size / GB:>9.3f} {size / GiB:>9.3f}  {note}")
    lines.append("-" * len(header))
    for label, size in (("used", budget.used_bytes), ("device", budget.device_bytes),
                        ("headroom", budget.headroom_bytes)):
        lines.append(f"{label:<14} {'':<18} {size:>16,} {size / GB:>9.3f} {size / GiB:>9.3f}")
    lines.append(f"per sequence: {budget.per_sequence_bytes:,} B ({budget.per_sequence_bytes / GB:.3f} GB); "
                 f"left for requests after fixed pools: {budget.request_budget_bytes / GB:.3f} GB")
    lines.append(f"max_active_sequences: {budget.max_active_sequences} "
                 f"(sequence {budget.first_crossing_sequences} crosses the safe budget)")
    lines.append(f"verdict: {budget.verdict()}")
    return "\n".join(lines)


def estimate_table(est: Estimate) -> str:
    """An :class:`Estimate` as a header of model facts plus its budget table."""
    spec = est.spec
    per_gpu = " per GPU" if est.tensor_parallel > 1 else ""
    head = [
        f"model: {spec.name} ({spec.model_type}, {spec.attention.upper()}, {spec.num_layers} layers, "
        f"{spec.num_attention_heads} heads / {spec.num_kv_heads} KV heads, head_dim {spec.head_dim})",
        f"params_total: {spec.params_total:,}",
        f"weights dtype: {est.dtype}; KV-cache dtype: {est.kv_dtype}; tensor parallel: {est.tensor_parallel}",
        f"kv_cache_bytes_per_token{per_gpu}: {est.kv_cache_bytes_per_token:,} B; context: {est.context_tokens} tokens",
    ]
    if est.replicated:
        head.append("replicated on every GPU: " + ", ".join(f"{k} {v:,} params" for k, v in est.replicated.items()))
    for note in spec.notes:
        head.append(f"note: {note}")
    return "\n".join(head) + "\n\n" + budget_table(est.budget, title=f"budget{per_gpu}:")
