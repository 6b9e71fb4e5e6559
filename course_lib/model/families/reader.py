"""Read a Hugging Face config strictly: every number bounded, every flag a JSON boolean.

A config is untrusted input. Each read names the key, and a refusal is one
line: the bad value, the bound or what is valid, and the key (see
:mod:`course_lib.bounds`).

>>> c = Config({"model_type": "llama", "num_hidden_layers": 32, "tie_word_embeddings": "false"})
>>> c.layers("num_hidden_layers")
32
>>> c.flag("tie_word_embeddings", False)
Traceback (most recent call last):
...
course_lib.errors.CourseInputError: config (model_type='llama'): tie_word_embeddings='false' is not a JSON boolean; use true or false
>>> Config({"model_type": "llama", "head_dim": 10**30}).width("head_dim")
Traceback (most recent call last):
...
course_lib.errors.CourseInputError: config (model_type='llama'): head_dim=<a 31-digit number> is above the bound 10,000,000 (the widest dimension a config may give); use a whole number from 1 to 10,000,000
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ...bounds import MAX_CONTEXT_TOKENS, MAX_DIMENSION, MAX_LAYERS, check_int, check_number
from ...errors import CourseInputError

_MISSING = object()

#: The layer kinds a ``layer_types`` list may name, and what each caches.
ATTENTION_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")
STATE_LAYER_TYPES = ("linear_attention",)
LAYER_TYPES = ATTENTION_LAYER_TYPES + STATE_LAYER_TYPES

_WHY_WIDTH = "the widest dimension a config may give"
_WHY_LAYERS = "10^6 layers; real models have under 200"


class MissingKey(CourseInputError):
    """A config leaves out a key the family's formula needs (transformers' config class may default it)."""


def check_model_types(cfg: Mapping[str, Any], where: str = "") -> None:
    """Every nested config's ``model_type`` (text_config, vision_config, ...) is a string, or absent.

    >>> check_model_types({"model_type": "mistral3", "text_config": {"model_type": ["mistral"]}})
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: config: text_config.model_type=['mistral'] is not a string; use e.g. "mistral"
    """
    for key, value in cfg.items():
        if isinstance(value, Mapping) and isinstance(key, str):
            mt = value.get("model_type")
            if mt is not None and not isinstance(mt, str):
                example = "mistral" if key == "text_config" else "siglip_vision_model"
                raise CourseInputError(f"config: {where}{key}.model_type={mt!r:.60} is not a string; "
                                       f"use e.g. \"{example}\"")
            check_model_types(value, f"{where}{key}.")


class Config:
    """One config dict (or its ``text_config``), read under a family's key names.

    ``get`` returns the first present, non-null key; the typed readers
    (``layers``, ``width``, ``count``, ``flag``, ``number``, ``layer_list``)
    check what they return.
    """

    def __init__(self, cfg: Mapping[str, Any], model_type: str | None = None):
        if not isinstance(cfg, Mapping):
            raise CourseInputError(f"config: {cfg!r:.60} is not a JSON object; give a Hugging Face config.json")
        self.cfg = cfg
        mt = model_type if model_type is not None else cfg.get("model_type", "?")
        if not isinstance(mt, str):
            raise CourseInputError(f"config: model_type={mt!r:.60} is not a string; use e.g. \"llama\"")
        self.model_type = mt

    # ------------------------------------------------------------------ plumbing
    def _where(self) -> str:
        return f"config (model_type={self.model_type!r})"

    def refuse(self, message: str) -> CourseInputError:
        """A :class:`CourseInputError` prefixed with which config it is about."""
        return CourseInputError(f"{self._where()}: {message}")

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None

    def get(self, *keys: str, default: Any = _MISSING) -> Any:
        for key in keys:
            if self.cfg.get(key) is not None:
                return self.cfg[key]
        if default is _MISSING:
            raise MissingKey(f"{self._where()}: lacks {' / '.join(repr(k) for k in keys)}; add it to config.json")
        return default

    def _key(self, keys: Sequence[str]) -> str:
        for key in keys:
            if self.cfg.get(key) is not None:
                return key
        return keys[0]

    def _int(self, keys: Sequence[str], default: Any, lo: int, hi: int, why: str) -> Any:
        value = self.get(*keys, default=default)
        if value is None:
            return None
        try:
            return check_int(self._key(keys), value, lo, hi, why)
        except CourseInputError as exc:
            raise self.refuse(str(exc)) from None

    # ------------------------------------------------------------------ typed readers
    def layers(self, *keys: str, default: Any = _MISSING, minimum: int = 1) -> int:
        """A layer count (or index), at most :data:`MAX_LAYERS`."""
        return self._int(keys, default, minimum, MAX_LAYERS, _WHY_LAYERS)

    def width(self, *keys: str, default: Any = _MISSING, minimum: int = 1) -> int:
        """A width (hidden size, heads, head_dim, vocabulary, experts), at most :data:`MAX_DIMENSION`."""
        return self._int(keys, default, minimum, MAX_DIMENSION, _WHY_WIDTH)

    def tokens(self, *keys: str, default: Any = _MISSING) -> int | None:
        """A token count (``max_position_embeddings``), at most :data:`MAX_CONTEXT_TOKENS`."""
        return self._int(keys, default, 0, MAX_CONTEXT_TOKENS, "10^8 tokens, 100x today's longest contexts")

    def optional_width(self, *keys: str, minimum: int = 1) -> int | None:
        """A width, or ``None`` when absent or null (e.g. ``sliding_window: null``)."""
        return self._int(keys, None, minimum, MAX_DIMENSION, _WHY_WIDTH)

    def flag(self, key: str, default: bool) -> bool:
        """A JSON boolean; absent or null means the family's ``default``. ``"false"`` is refused."""
        value = self.cfg.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.refuse(f"{key}={value!r:.60} is not a JSON boolean; use true or false")
        return value

    def number(self, key: str, default: float, lo: float, hi: float) -> float:
        """A finite float in ``[lo, hi]``."""
        value = self.cfg.get(key)
        if value is None:
            return default
        try:
            return check_number(key, value, lo, hi)
        except CourseInputError as exc:
            raise self.refuse(str(exc)) from None

    def text(self, key: str, default: str | None, valid: Sequence[str] | None = None) -> str | None:
        value = self.cfg.get(key)
        if value is None:
            return default
        if not isinstance(value, str) or (valid is not None and value not in valid):
            shown = f"{value!r:.60}"
            raise self.refuse(f"{key}={shown} is not valid; use one of {', '.join(valid or ())}")
        return value

    def layer_list(self, key: str, num_layers: int) -> list[int] | None:
        """A list of layer indices (``mlp_only_layers``, ``moe_layers``), each in range."""
        value = self.cfg.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.refuse(f"{key}={value!r:.60} is not a list of layer indices")
        if len(value) > num_layers:
            raise self.refuse(f"{key} has {len(value):,} entries for num_hidden_layers={num_layers}")
        out = []
        for item in value:
            try:
                out.append(check_int(key, item, 0, num_layers - 1, "a layer index below num_hidden_layers"))
            except CourseInputError as exc:
                raise self.refuse(str(exc)) from None
        return out

    def layer_types(self, num_layers: int, valid: Sequence[str] = ATTENTION_LAYER_TYPES) -> list[str] | None:
        """``layer_types``, one known name per layer, or ``None`` when absent."""
        value = self.cfg.get("layer_types")
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.refuse(f"layer_types={value!r:.60} is not a list; use one entry per layer")
        if len(value) != num_layers:
            raise self.refuse(f"layer_types has {len(value):,} entries for num_hidden_layers={num_layers}")
        for item in value:
            if not isinstance(item, str) or item not in valid:
                raise self.refuse(f"layer_types holds {item!r:.60}; each entry must be one of {', '.join(valid)}")
        return list(value)

    def sub(self, key: str) -> "Config | None":
        """A nested config (``text_config``, ``vision_config``), or ``None``."""
        value = self.cfg.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self.refuse(f"{key}={value!r:.60} is not a JSON object")
        return Config(value, value.get("model_type") if isinstance(value.get("model_type"), str) else self.model_type)
