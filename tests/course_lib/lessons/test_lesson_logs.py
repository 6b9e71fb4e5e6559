"""The lesson's three logs are what was published: every excerpt line is in the source file, every figure in a line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from course_lib.lessons.l14_04.logs import LOGS
from course_lib.runtimes.log_lines import clean_log

FILES = {"t4": "vllm-llama32-3b-t4-v0", "a100": "vllm-qwen2-7b-a100-80-u025", "mi300x": "vllm-llama31-8b-tp8-mi300x-v0"}
LOG_DIR = Path(__file__).resolve().parents[2] / "files" / "runtime_logs" / "logs"


@pytest.mark.parametrize("key", sorted(LOGS))
def test_every_excerpt_line_is_in_the_published_log(key):
    text = "\n".join(clean_log((LOG_DIR / f"{FILES[key]}.txt").read_text()))
    for line in LOGS[key].lines:
        for fragment in re.split(r"\s*\.\.\. \[abridged\]|\s*\.\.\.\s*,?", line):
            fragment = fragment.strip(" ,")
            if fragment:
                assert fragment in text, f"{key}: {fragment!r} is not in {FILES[key]}"


@pytest.mark.parametrize("key", sorted(LOGS))
def test_every_figure_is_printed_in_the_excerpt(key):
    log = LOGS[key]
    text = " ".join(log.lines).replace(",", "")
    derived = {"total_gib", "utilization", "block_size", "tensor_parallel", "vllm_version"}   # from title or launch
    for name, value in log.figures.items():
        if name in derived and name not in ("utilization",):
            continue
        printed = f"{value:g}" if isinstance(value, float) else str(value)
        assert printed in text or f"{value:.2f}" in text, f"{key}: {name}={value} not printed in the excerpt"
