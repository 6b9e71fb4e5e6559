"""The runtime lab's last section: a real vLLM to check a prediction against (issue 35 item 8).

Without ``vllm`` in the kernel (the course's own venv has none), the run recorded with the course's own code on
vLLM 0.32's CPU build is read back with from-log, labelled as recorded; its logged figures are vLLM's, and
course_lib's prediction must equal them (the oracle's exact agreement, here on the learner's page).
"""

from __future__ import annotations

import pytest

from course_lib.lessons.l14_04.demos import show_real_vllm
from course_lib.runtimes import oracle


def test_without_vllm_the_recorded_run_is_shown_labelled_and_matches_the_prediction(monkeypatch, capsys):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr(oracle, "vllm_importable", lambda python=None: False)
    got = show_real_vllm(kv_cache_memory_bytes="12MiB", max_model_len=1000, your_kv_cache_tokens=12_288,
                         your_max_concurrency=12.29)
    out = capsys.readouterr().out
    assert got["live"] is False and out.startswith("RECORDED on ") and "not a run on your machine" in out
    # vLLM's own lines in the recorded log: 96 blocks of 128 tokens, 8 a 1,000-token request: 12.00x, 12,000 tokens
    assert got["logged"]["kv_cache_tokens"] == 12_000 and got["logged"]["max_concurrency"] == 12.0
    assert got["predicted"] == {"kv_cache_tokens": 12_000, "max_concurrency": 12.0}
    assert "you predicted" in out and "12,288" in out


def test_other_figures_than_the_recording_say_which_are_shown(monkeypatch, capsys):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr(oracle, "vllm_importable", lambda python=None: False)
    got = show_real_vllm(kv_cache_memory_bytes="24MiB", max_model_len=2000)
    assert "the recorded run is at 12,582,912 B and max_model_len 1000" in capsys.readouterr().out
    assert got["max_model_len"] == 1000


def test_skipped_while_grading(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert show_real_vllm() is None
    assert "skipped while grading" in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["12 parsecs", -1])
def test_a_bad_pool_is_one_clear_error(bad, monkeypatch):
    from course_lib.errors import CourseInputError
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    with pytest.raises(CourseInputError):
        show_real_vllm(kv_cache_memory_bytes=bad)
