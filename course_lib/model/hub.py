"""A Hugging Face Hub id as a model: ``ORG/NAME[@REVISION]`` read through ``huggingface_hub``, cached.

What is read, and where it is kept (nothing is a weight):

- ``config.json`` (and, for a model with a vision or audio tower, the processor configs
  ``preprocessor_config.json`` / ``processor_config.json`` / ``video_preprocessor_config.json`` where the
  repo has them) through ``hf_hub_download`` into the Hub's own cache
  (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``): the layout
  ``models--ORG--NAME/refs/<revision>`` (a commit sha), ``snapshots/<sha>/<file>`` (a link to
  ``blobs/<etag>``), as huggingface_hub 2.4's ``file_download.py`` writes it.
- The weights' exact bytes from the safetensors headers: ``HfApi.get_safetensors_metadata(repo, revision=sha)``
  reads ``model.safetensors.index.json`` and each shard's header by an HTTP range request (the first
  8 + N bytes of each file, never a tensor). Its parse is kept, summed by dtype, as one small JSON file
  per commit: ``$HF_HOME/course-memory/safetensors/models--ORG--NAME/<sha>.json``. A snapshot that
  holds the safetensors themselves (a downloaded model) is read in place (:mod:`course_lib.model.checkpoint`).

``HF_HUB_OFFLINE=1`` (or ``TRANSFORMERS_OFFLINE=1``) answers from the cache alone. What cannot be read
is one line (:class:`~course_lib.errors.CourseInputError`) saying which case it is and what to do: offline
with nothing cached, a gated or private repo without a token, a repo or a revision that does not exist,
no network. The spec's name is ``ORG/NAME@<commit sha>``: the output names the exact revision read, and
typing that name back reads the same files.

>>> parse_hub_id("Qwen/Qwen3-8B")
('Qwen/Qwen3-8B', 'main')
>>> parse_hub_id("deepseek-ai/DeepSeek-V4-Flash@refs/pr/3")
('deepseek-ai/DeepSeek-V4-Flash', 'refs/pr/3')
>>> is_hub_id("llama-3-8b"), is_hub_id("MiniMaxAI/MiniMax-M2.7")
(False, True)
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..bounds import MAX_DEVICE_BYTES, check_int
from .checkpoint import DTYPE_BITS, Checkpoint, check_header, read_checkpoint
from ..errors import CourseInputError

#: The files a multimodal profile may need beside config.json (absent ones are skipped).
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json", "video_preprocessor_config.json")
#: The config keys that mark a model with an encoder whose processor configs are worth reading.
TOWER_KEYS = ("vision_config", "audio_config", "vision_tower", "video_config")
#: Version of the cached safetensors summary (a file of another version is read again from the Hub).
SUMMARY_FORMAT = "course-memory safetensors summary 1"
#: A commit sha as the Hub names it (huggingface_hub's REGEX_COMMIT_HASH).
COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")
#: huggingface_hub's repo-id rule (utils/_validators.py): ``[\w\-.]+`` per part, at most 96 characters.
_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$", re.ASCII)
_TRUE = {"1", "ON", "YES", "TRUE"}


@dataclass(frozen=True)
class HubModel:
    """What was read for one Hub id.

    repo_id / revision: as typed (revision ``main`` when none was given).
    commit_sha: the commit the files come from.
    snapshot: the cache folder of that commit (config.json and any processor configs).
    config_path: its config.json.
    checkpoint: the weights' bytes from the safetensors headers, or ``None`` when they could not be read.
    weights_note: in words, where the weights' bytes come from (or why the formula gives them).
    """

    repo_id: str
    revision: str
    commit_sha: str
    snapshot: Path
    config_path: Path
    checkpoint: Checkpoint | None
    weights_note: str

    @property
    def name(self) -> str:
        """``ORG/NAME@<sha>``: the model's name in every output (type it back to read the same commit)."""
        return f"{self.repo_id}@{self.commit_sha}"


def is_hub_id(text: object) -> bool:
    """A model name with a '/' is a Hub id (a preset name never has one)."""
    return isinstance(text, str) and "/" in text.split("@", 1)[0]


def parse_hub_id(text: str) -> tuple[str, str]:
    """``(repo_id, revision)`` of ``ORG/NAME[@REVISION]``; one line for anything else.

    >>> parse_hub_id("bad id/x")
    Traceback (most recent call last):
    ...
    course_lib.errors.CourseInputError: model='bad id/x' is not a Hub id; give ORG/NAME or ORG/NAME@REVISION (letters, digits, '-', '_', '.'), e.g. Qwen/Qwen3-8B, a preset name, or --config PATH for a local folder
    """
    repo_id, _, revision = str(text).strip().partition("@")
    revision = revision or "main"
    bad = (not _REPO_ID.match(repo_id) or len(repo_id) > 96 or "--" in repo_id or ".." in repo_id
           or repo_id.startswith((".", "-")) or not revision.strip() or any(c.isspace() for c in revision))
    if bad:
        raise CourseInputError(f"model={str(text)[:120]!r} is not a Hub id; give ORG/NAME or ORG/NAME@REVISION "
                               f"(letters, digits, '-', '_', '.'), e.g. Qwen/Qwen3-8B, a preset name, or --config PATH for a "
                               f"local folder")
    return repo_id, revision


def offline() -> bool:
    """``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``, read now (huggingface_hub reads them once, at import)."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in _TRUE


def hf_home() -> Path:
    """``$HF_HOME``, else ``$XDG_CACHE_HOME/huggingface``, else ``~/.cache/huggingface`` (huggingface_hub's rule)."""
    if os.environ.get("HF_HOME"):
        return Path(os.path.expandvars(os.path.expanduser(os.environ["HF_HOME"])))
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "huggingface"


def hub_cache() -> Path:
    """``$HF_HUB_CACHE``, else ``$HF_HOME/hub`` (huggingface_hub 2.4 constants.py)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.path.expandvars(os.path.expanduser(os.environ["HF_HUB_CACHE"])))
    return hf_home() / "hub"


def summary_path(repo_id: str, commit_sha: str) -> Path:
    """Where the parsed safetensors headers of one commit are kept.

    >>> str(summary_path("Qwen/Qwen3-8B", "a" * 40)).endswith("course-memory/safetensors/models--Qwen--Qwen3-8B/" + "a" * 40 + ".json")
    True
    """
    return hf_home() / "course-memory" / "safetensors" / ("models--" + repo_id.replace("/", "--")) / f"{commit_sha}.json"


# ------------------------------------------------------------------ refusals, one line each

def _refusal(exc: BaseException, repo_id: str, revision: str, is_offline: bool) -> CourseInputError:
    """The one line for a failed read: which case, and what to do."""
    from huggingface_hub import errors as hf

    what = f"model={repo_id!r}" + (f" at revision {revision!r}" if revision != "main" else "")
    if isinstance(exc, hf.GatedRepoError):
        return CourseInputError(f"{what} is a gated repo and no token with access was given; accept its terms on "
                                f"huggingface.co/{repo_id}, then set HF_TOKEN (or run `hf auth login`)")
    if isinstance(exc, hf.RevisionNotFoundError):
        return CourseInputError(f"{what}: revision {revision!r} does not exist in the repo; give a branch, tag or "
                                f"commit sha it has (e.g. @main)")
    if isinstance(exc, hf.RepositoryNotFoundError):
        return CourseInputError(f"{what} does not exist on the Hub, or it is private and no token with access was "
                                f"given; check the spelling (ORG/NAME), or set HF_TOKEN for a private repo")
    if isinstance(exc, hf.RemoteEntryNotFoundError):
        return CourseInputError(f"{what} has no config.json; give a transformers model repo, or --config PATH")
    if is_offline:
        return CourseInputError(f"{what}: HF_HUB_OFFLINE is set and config.json of revision {revision!r} is not in "
                                f"the Hub cache ({hub_cache()}); run once online to cache it, or give --config PATH")
    status = getattr(getattr(exc, "response", None), "status_code", 0) if isinstance(exc, hf.HfHubHTTPError) else 0
    if status == 401:
        return CourseInputError(f"{what}: the Hub refused the token (401); set a valid HF_TOKEN")
    if status:
        return CourseInputError(f"{what}: the Hub answered {status} ({type(exc).__name__}); check the repo on "
                                f"huggingface.co/{repo_id}, or give --config PATH")
    return CourseInputError(f"{what}: the Hub could not be reached and nothing is cached "
                            f"({type(exc.__cause__ or exc).__name__}); connect, or set HF_HUB_OFFLINE=1 with "
                            f"a cached copy, or give --config PATH")


# ------------------------------------------------------------------ the files

class _Quiet:
    """While huggingface_hub runs: its own warnings ("Retrying in 1s [Retry 1/5]") held back (a failure is
    reported as one line of ours), and its offline switch set from the environment as it is now
    (huggingface_hub reads ``HF_HUB_OFFLINE`` once, when it is first imported)."""

    def __init__(self, is_offline: bool) -> None:
        self.is_offline = is_offline

    def __enter__(self) -> None:
        import logging

        import huggingface_hub.constants as constants

        self.constants, self.was_offline = constants, constants.HF_HUB_OFFLINE
        constants.HF_HUB_OFFLINE = self.is_offline
        self.logger = logging.getLogger("huggingface_hub")
        self.level = self.logger.level
        self.logger.setLevel(logging.ERROR + 10)

    def __exit__(self, *exc: object) -> None:
        self.logger.setLevel(self.level)
        self.constants.HF_HUB_OFFLINE = self.was_offline


def _download(repo_id: str, filename: str, revision: str, is_offline: bool) -> str:
    from huggingface_hub import hf_hub_download

    with _Quiet(is_offline):
        return hf_hub_download(repo_id, filename, revision=revision, cache_dir=str(hub_cache()),
                               local_files_only=is_offline, endpoint=os.environ.get("HF_ENDPOINT") or None)


def _optional_file(repo_id: str, filename: str, commit_sha: str, is_offline: bool) -> Path | None:
    """A processor config of the same commit, or ``None`` where the repo (or, offline, the cache) lacks it."""
    from huggingface_hub import errors as hf

    try:
        return Path(_download(repo_id, filename, commit_sha, is_offline))
    except (hf.EntryNotFoundError, hf.OfflineModeIsEnabled):
        return None        # not in the repo, or offline and not cached (the profile then uses its defaults)
    except Exception as exc:   # noqa: BLE001 - a processor config is optional; its failure is the config's
        if isinstance(exc, (hf.RepositoryNotFoundError, hf.RevisionNotFoundError)):
            raise
        return None


def resolve(text: str, *, cache_only: bool = False) -> HubModel:
    """Read a Hub id's config (and processor configs) and its weights' bytes, from the cache or the Hub
    (the cache alone when ``cache_only`` or ``HF_HUB_OFFLINE``)."""
    repo_id, revision = parse_hub_id(text)
    is_offline = cache_only or offline()
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:   # pragma: no cover - a dependency of the package
        raise CourseInputError(f"model={repo_id!r} is a Hub id, and reading it needs huggingface_hub; "
                               f"pip install huggingface_hub, or give --config PATH") from None
    try:
        config_path = Path(_download(repo_id, "config.json", revision, is_offline))
    except CourseInputError:
        raise
    except Exception as exc:   # noqa: BLE001 - every failure of the Hub read becomes one line
        raise _refusal(exc, repo_id, revision, is_offline) from None
    snapshot = config_path.parent
    commit_sha = snapshot.name
    cfg = _json_object(config_path)
    if any(key in cfg for key in TOWER_KEYS):
        for filename in PROCESSOR_FILES:
            try:
                _optional_file(repo_id, filename, commit_sha, is_offline)
            except Exception as exc:   # noqa: BLE001
                raise _refusal(exc, repo_id, revision, is_offline) from None
    checkpoint, note = weights(repo_id, commit_sha, snapshot, is_offline)
    return HubModel(repo_id, revision, commit_sha, snapshot, config_path, checkpoint, note)


def _json_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# ------------------------------------------------------------------ the weights' bytes

def weights(repo_id: str, commit_sha: str, snapshot: Path, is_offline: bool) -> tuple[Checkpoint | None, str]:
    """The weights' bytes of one commit: the cached summary, the snapshot's own safetensors, or the Hub's
    headers (then cached); ``(None, why)`` when none can be had (the formula then gives the bytes)."""
    path = summary_path(repo_id, commit_sha)
    if path.exists():
        return read_summary(path, repo_id, commit_sha), f"safetensors headers, cached in {path}"
    local = read_checkpoint(snapshot) if any(snapshot.glob("*.safetensors")) else None
    if local is not None:
        return local, f"the snapshot's own safetensors ({snapshot})"
    if is_offline:
        return None, (f"HF_HUB_OFFLINE is set and the safetensors headers of {repo_id}@{commit_sha[:12]} are not "
                      f"cached: the weights are the formula's (run once online to read the exact bytes)")
    from huggingface_hub import HfApi
    from huggingface_hub import errors as hf

    try:
        with _Quiet(is_offline):
            meta = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None).get_safetensors_metadata(
                repo_id, revision=commit_sha)
    except hf.NotASafetensorsRepoError:
        return None, f"{repo_id} has no safetensors (a .bin or GGUF repo): the weights are the formula's"
    except Exception as exc:   # noqa: BLE001 - the config was read; the weights fall back to the formula
        return None, (f"the safetensors headers of {repo_id} could not be read ({type(exc).__name__}): "
                      f"the weights are the formula's")
    summary = summarize(meta, repo_id, commit_sha)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(summary, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass           # a read-only cache: the figure is still right, only not kept
    return read_summary_data(summary, str(path), repo_id, commit_sha), "safetensors headers read from the Hub"


def summarize(meta: Any, repo_id: str, commit_sha: str) -> dict[str, Any]:
    """The cache entry for a ``SafetensorsRepoMetadata``: bytes and elements by dtype, every header checked
    as :func:`course_lib.model.checkpoint.check_header` checks a local file's.

    >>> from huggingface_hub.utils import SafetensorsFileMetadata, SafetensorsRepoMetadata, TensorInfo
    >>> f = SafetensorsFileMetadata(metadata={}, tensors={
    ...     "w": TensorInfo(dtype="BF16", shape=[4, 8], data_offsets=(0, 64)),
    ...     "s": TensorInfo(dtype="F32", shape=[2], data_offsets=(64, 72))})
    >>> m = SafetensorsRepoMetadata(metadata=None, sharded=False, weight_map={"w": "model.safetensors",
    ...     "s": "model.safetensors"}, files_metadata={"model.safetensors": f})
    >>> s = summarize(m, "org/tiny", "0" * 40)
    >>> s["total_bytes"], s["bytes_by_dtype"], s["elements_by_dtype"]   # 32 x 2 B + 2 x 4 B
    (72, {'BF16': 64, 'F32': 8}, {'BF16': 32, 'F32': 2})
    """
    by_dtype: dict[str, int] = {}
    elements: dict[str, int] = {}
    for filename, fmeta in sorted(meta.files_metadata.items()):
        header = {name: {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": list(t.data_offsets)}
                  for name, t in fmeta.tensors.items()}
        end = max((t["data_offsets"][1] for t in header.values()), default=0)
        header = check_header(header, end, f"{repo_id}@{commit_sha[:12]}:{filename}")
        for t in header.values():
            if not isinstance(t, dict) or "dtype" not in t:
                continue
            count = 1
            for dim in t["shape"]:
                count *= dim
            by_dtype[t["dtype"]] = by_dtype.get(t["dtype"], 0) + t["data_offsets"][1] - t["data_offsets"][0]
            elements[t["dtype"]] = elements.get(t["dtype"], 0) + count
    index_total = (meta.metadata or {}).get("total_size") if meta.sharded else None
    return {"format": SUMMARY_FORMAT, "repo_id": repo_id, "commit_sha": commit_sha,
            "files": len(meta.files_metadata), "total_bytes": sum(by_dtype.values()),
            "bytes_by_dtype": by_dtype, "elements_by_dtype": elements,
            "index_total_size": index_total if isinstance(index_total, int) else None}


def read_summary(path: Path, repo_id: str, commit_sha: str) -> Checkpoint:
    """A cached summary as a :class:`Checkpoint`; a damaged one is one line saying to delete it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CourseInputError(f"the cached safetensors summary {str(path)!r} cannot be read ({exc}); delete it "
                               f"and run again online") from None
    return read_summary_data(data, str(path), repo_id, commit_sha)


def read_summary_data(data: Any, where: str, repo_id: str, commit_sha: str) -> Checkpoint:
    """Check a summary (its dtypes, whole byte counts that agree with the element counts) and build the
    :class:`Checkpoint`.

    >>> s = {"format": SUMMARY_FORMAT, "repo_id": "o/m", "commit_sha": "0" * 40, "files": 1, "total_bytes": 72,
    ...      "bytes_by_dtype": {"BF16": 64, "F32": 8}, "elements_by_dtype": {"BF16": 32, "F32": 2}}
    >>> c = read_summary_data(s, "x.json", "o/m", "0" * 40)
    >>> c.total_bytes, c.params, c.served_bytes(2)     # served in bf16: 34 values x 2 B
    (72, 34, 68)
    """
    def bad(why: str) -> CourseInputError:
        return CourseInputError(f"the cached safetensors summary {where!r} {why}; delete it and run again online")

    if not isinstance(data, dict) or data.get("format") != SUMMARY_FORMAT:
        raise bad(f"is not a {SUMMARY_FORMAT!r} file")
    if data.get("repo_id") != repo_id or data.get("commit_sha") != commit_sha:
        raise bad(f"belongs to {data.get('repo_id')!r}@{data.get('commit_sha')!r}, not {repo_id}@{commit_sha}")
    by_dtype, elements = data.get("bytes_by_dtype"), data.get("elements_by_dtype")
    if not isinstance(by_dtype, dict) or not isinstance(elements, dict) or set(by_dtype) != set(elements):
        raise bad("lacks matching bytes_by_dtype and elements_by_dtype maps")
    sizes: dict[str, int] = {}
    counts: dict[str, int] = {}
    for dtype in by_dtype:
        if dtype not in DTYPE_BITS:
            raise bad(f"names dtype {dtype!r:.40}, not a safetensors dtype")
        try:
            sizes[dtype] = check_int(f"bytes_by_dtype[{dtype}]", by_dtype[dtype], 0, MAX_DEVICE_BYTES)
            counts[dtype] = check_int(f"elements_by_dtype[{dtype}]", elements[dtype], 0, 8 * MAX_DEVICE_BYTES)
        except CourseInputError as exc:
            raise bad(f"holds a bad count ({exc})") from None
        if sizes[dtype] * 8 != counts[dtype] * DTYPE_BITS[dtype]:
            raise bad(f"says {sizes[dtype]:,} B of {dtype} for {counts[dtype]:,} values "
                      f"({DTYPE_BITS[dtype]} bits each)")
    total = sum(sizes.values())
    if data.get("total_bytes") != total:
        raise bad(f"says total_bytes={data.get('total_bytes')!r}, not the dtypes' sum {total:,}")
    files = data.get("files")
    source = (f"safetensors headers of {repo_id}@{commit_sha[:12]} on the Hub "
              f"({files} file{'s' if files != 1 else ''}, read by range request, no weight downloaded)")
    index_total = data.get("index_total_size")
    if isinstance(index_total, int) and index_total != total:
        source += f"; the index's metadata.total_size says {index_total:,}"
    return Checkpoint(f"{repo_id}@{commit_sha}", total, source, sum(counts.values()), sizes, counts)


def hub_spec(text: str, *, params_total: int | None = None, cache_only: bool = False):
    """The :class:`~course_lib.model.spec.ModelSpec` of a Hub id, named ``ORG/NAME@<sha>``."""
    from dataclasses import replace

    from .models import from_hf_config

    model = resolve(text, cache_only=cache_only)
    spec = from_hf_config(model.config_path, name=model.name, params_total=params_total,
                          checkpoint=model.checkpoint)
    notes = (f"read from the Hub: {model.repo_id} revision {model.revision!r} = commit {model.commit_sha}",)
    quant = _optional_file(model.repo_id, "hf_quant_config.json", model.commit_sha, cache_only or offline())
    if quant is not None:   # a ModelOpt checkpoint may declare its quantization only there (course_lib.model.modelopt)
        from .quantization import format_with_hf_quant_config
        fmt = format_with_hf_quant_config(_json_object(model.config_path), _json_object(quant), spec.model_type)
        spec = spec if fmt is None else replace(spec, quantization=fmt)
    if model.checkpoint is None:
        notes += (model.weights_note,)
    return replace(spec, notes=spec.notes + notes)
