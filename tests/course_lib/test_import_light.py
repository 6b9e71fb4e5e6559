"""`import course_lib` stays light (no torch, no matplotlib, no transformers), and every `>>>` example runs.

Imports are checked in a fresh interpreter: this test process may already hold torch.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import json
import pkgutil
import subprocess
from pathlib import Path

import pytest

from conftest import HANG_S

HEAVY = ("torch", "matplotlib", "transformers", "safetensors")

IMPORTS = {
    "import course_lib": "import course_lib",
    "import course_lib.cli": "import course_lib.cli",
    "build the CLI parser": "import course_lib.cli; course_lib.cli.build_parser()",
    "plan a budget": "import course_lib; course_lib.plan_budget(device_bytes='24GB', weights_bytes='14GB', "
                     "per_sequence_kv_bytes='1.5GB', active_sequences=4)",
    # every family's formula, the presets, and the estimate, with no transformers or torch behind them
    "estimate every preset": "import course_lib as c; [c.estimate(c.get_model(m), gpu='b200') for m in c.model_names()]",
    # (a family with a formula: one without is built by transformers on the meta device, the heavy path)
    "read a model folder's safetensors headers": (
        "import json, struct, tempfile, pathlib, course_lib; d = pathlib.Path(tempfile.mkdtemp()); "
        "(d / 'config.json').write_text(json.dumps({'model_type': 'llama', 'hidden_size': 64, 'vocab_size': 8, "
        "'intermediate_size': 64, 'num_hidden_layers': 2, 'num_attention_heads': 4})); "
        "h = json.dumps({'w': {'dtype': 'BF16', 'shape': [4], 'data_offsets': [0, 8]}}).encode(); "
        "(d / 'model.safetensors').write_bytes(struct.pack('<Q', len(h)) + h + bytes(8)); "
        "assert course_lib.from_hf_config(d).checkpoint.total_bytes == 8"),
}


#: Run a snippet as if transformers were not installed (an import of it fails, as on a learner's machine).
WITHOUT_TRANSFORMERS = "import sys; sys.modules['transformers'] = None\n"


def test_without_transformers_an_unknown_family_is_one_line_saying_how_to_get_it(python_exe, python_env, repo_root):
    code = (WITHOUT_TRANSFORMERS + "import course_lib\ntry:\n    course_lib.from_hf_config({'model_type': 'mamba', "
            "'hidden_size': 64, 'num_hidden_layers': 2})\nexcept course_lib.CourseInputError as exc:\n    print(exc)")
    proc = subprocess.run([python_exe, "-c", code], cwd=repo_root, env=python_env, capture_output=True, text=True,
                          timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr
    line, = proc.stdout.splitlines()
    assert "model_type='mamba' is not supported" in line
    assert "pip install 'course-model-memory[transformers]'" in line


@pytest.mark.parametrize("code", list(IMPORTS.values()), ids=list(IMPORTS))
def test_heavy_modules_not_imported(code, python_exe, python_env, repo_root):
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    proc = subprocess.run([python_exe, "-c", probe], cwd=repo_root, env=python_env, capture_output=True,
                          text=True, timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert loaded == [], f"`{code}` imported {loaded}; import them inside the functions that need them"


# ------------------------------------------------------------------ doctests

SKIP_PREFIXES = ("course_lib.measure",)    # imports torch and times real work: too slow for here


def _module_names(package: str = "course_lib") -> list[str]:
    """course_lib and its submodules, found without importing the skipped ones."""
    spec = importlib.util.find_spec(package)
    names = [package]
    for info in pkgutil.iter_modules(spec.submodule_search_locations):
        name = f"{package}.{info.name}"
        if name.startswith(SKIP_PREFIXES) or info.name == "__main__":
            continue
        names.extend(_module_names(name) if info.ispkg else [name])
    return names


def _has_examples(name: str) -> bool:
    origin = importlib.util.find_spec(name).origin
    return bool(origin) and origin.endswith(".py") and ">>>" in Path(origin).read_text(encoding="utf-8")


DOCTEST_MODULES = [name for name in _module_names() if _has_examples(name)]


def test_doctest_modules_found():
    # The foundation modules all carry worked examples; if these vanish the collection is broken.
    for name in ("course_lib", "course_lib.units", "course_lib.dtypes", "course_lib.model.models", "course_lib.serving.budget",
                 "course_lib.model.presets", "course_lib.errors", "course_lib.views.report"):
        assert name in DOCTEST_MODULES, f"{name} should have >>> examples"


@pytest.mark.parametrize("name", DOCTEST_MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted > 0, f"{name} has '>>>' in its source but doctest found no examples"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see output above)"
