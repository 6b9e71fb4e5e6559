"""Every JSON the grader parses from a hand-in is bounded before it is built (issue 39, round 5).

Before, a notebook was ``json.loads``-ed, made nodes and validated in the grading worker with no bound
but the 20 MiB file cap: 19 MiB of empty metadata objects (6.6 million) took a worker to 3.94 GB, and
620,000 attachments on one markdown cell 67 s of its CPU, before that notebook was refused. Here, each
hostile notebook is read as the grader reads it (``read_submission_limited``: its JSON counted from the bytes,
then parsed in a forked child with a memory and a CPU limit) by a Python of its own with 20 CPU seconds at
most, whose peak RSS, and its reader's, are compared with the same reading a legitimate notebook
(nbgrader's example).
:func:`autograder.contract.jsonshape.shape` itself is held to the structure ``json.loads`` builds.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.contract.jsonshape import TooLarge, shape

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "files" / "nbgrader_example" / "submitted" / "bitdiddle" / "ps1" / "problem1.ipynb"
#: The child: reads the file with read_submission; prints what happened, its CPU seconds and peak RSS (KiB:
#: VmHWM, this program's own; ru_maxrss would keep the high-water mark of the pytest process it was forked from).
READ = """
import json, re, resource, sys
resource.setrlimit(resource.RLIMIT_CPU, (20, 20))
from autograder.source.restore import Refused, read_submission_limited
data = open(sys.argv[1], "rb").read()
try:
    read_submission_limited(data)
    out = "read"
except Refused as e:
    out = str(e)
usage = resource.getrusage(resource.RUSAGE_SELF)
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
reader = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"out": out, "cpu_s": usage.ru_utime + usage.ru_stime + reader.ru_utime + reader.ru_stime,
                  "peak_kib": peak, "reader_peak_kib": reader.ru_maxrss, "bytes": len(data)}))
"""


def _read_in_child(path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", READ, str(path)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, f"the reader died (rc {proc.returncode}): {proc.stderr[-1500:]}"
    return json.loads(proc.stdout.splitlines()[-1])


def _hostile(tmp_path: Path, name: str, where: bytes, what: bytes) -> Path:
    """nbgrader's example notebook with ``what`` put right after the first ``where``."""
    data = EXAMPLE.read_bytes()
    assert where in data
    path = tmp_path / name
    path.write_bytes(data.replace(where, where + what, 1))
    return path


@pytest.fixture(scope="module")
def control(tmp_path_factory):
    result = _read_in_child(EXAMPLE)
    assert result["out"] == "read", result
    return result


def test_a_million_empty_metadata_objects_are_refused_before_they_are_built(tmp_path, control):
    objects = b",".join([b"{}"] * 1_000_000)
    path = _hostile(tmp_path, "objects.ipynb", b'"metadata": {\n', b'"x": [' + objects + b"],\n")
    result = _read_in_child(path)
    assert result["out"].startswith("the notebook holds more than 100,000 objects and arrays"), result
    assert "clear its outputs" in result["out"]
    # before: ~900 MiB more than reading the example (3.94 GB at 19 MiB); now the file's bytes, 3 times
    for peak in ("peak_kib", "reader_peak_kib"):   # the grader's and its reader's
        assert result[peak] - control[peak] < 3 * result["bytes"] / 1024 + 8 * 1024, (peak, result, control)


def test_300000_attachments_on_a_markdown_cell_are_refused_at_once(tmp_path, control):
    attachments = b",".join(b'"a%d.png": {"image/png": ""}' % i for i in range(300_000))
    path = _hostile(tmp_path, "attachments.ipynb", b'"cell_type": "markdown",', b' "attachments": {' + attachments + b"},")
    result = _read_in_child(path)   # before: validated one by one, past the child's 20 CPU seconds
    assert result["out"].startswith("the notebook holds more than 100,000 objects and arrays"), result
    assert result["cpu_s"] - control["cpu_s"] < 2.0, (result, control)
    for peak in ("peak_kib", "reader_peak_kib"):   # the grader's and its reader's
        assert result[peak] - control[peak] < 3 * result["bytes"] / 1024 + 8 * 1024, (peak, result, control)


def test_deep_nesting_is_refused_with_its_own_message(tmp_path):
    path = _hostile(tmp_path, "deep.ipynb", b'"metadata": {\n', b'"x": ' + b"[" * 200 + b"]" * 200 + b",\n")
    assert _read_in_child(path)["out"].startswith("the notebook nests deeper than 128 levels")


def _structure(value) -> tuple[int, int, int]:
    """(depth, objects and arrays, strings with keys) of a parsed JSON value, by walking it."""
    if isinstance(value, (list, dict)):
        items = list(value.values()) if isinstance(value, dict) else value
        inner = [_structure(v) for v in items]
        return (1 + max((d for d, _, _ in inner), default=0), 1 + sum(c for _, c, _ in inner),
                (len(value) if isinstance(value, dict) else 0) + sum(s for _, _, s in inner))
    return 0, 0, int(isinstance(value, str))


def _random_value(rng: random.Random, depth: int = 0):
    tricky = ['"', "\\", '\\"', 'a\\\\"[{', "}]", "", ",,", "\u00e9\u4e2d", "x" * 40]
    roll = rng.random()
    if depth > 6 or roll < 0.3:
        return rng.choice([1, -2.5e3, None, True, False, *tricky])
    if roll < 0.65:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(tricky) + str(i): _random_value(rng, depth + 1) for i in range(rng.randint(0, 4))}


@pytest.mark.parametrize("piece_bytes", [7, 256 * 1024])
def test_shape_is_the_structure_json_loads_builds(monkeypatch, piece_bytes):
    """Random JSON full of quotes, backslashes and brackets inside strings: the shape read from the bytes is
    the structure walked in what ``json.loads`` returns, whether the text is read in one piece or in pieces
    of 7 bytes (every cut then falls next to a string)."""
    import autograder.contract.jsonshape

    monkeypatch.setattr(autograder.contract.jsonshape, "_PIECE_BYTES", piece_bytes)
    rng = random.Random(39)
    for _ in range(500):
        text = json.dumps(_random_value(rng), ensure_ascii=rng.random() < 0.5).encode()
        got = shape(text)
        assert (got.depth, got.containers, got.strings) == _structure(json.loads(text)), text
        assert got.values >= got.containers


def test_shape_refuses_past_each_bound():
    with pytest.raises(TooLarge, match="nests deeper than 3 levels"):
        shape(b'[[[["[[[[[["]]]]', max_depth=3)
    assert shape(b'[[["[[[[[["]]]', max_depth=3).depth == 3
    with pytest.raises(TooLarge, match="nests deeper than 100 levels"):   # json.loads recursed down it all
        shape(b"[" * 30_000, max_depth=100)
    with pytest.raises(TooLarge, match="more than 2 values"):
        shape(b"[1, 2, 3]", max_values=2)
