"""course_lib.measure.device: snapshots of what the OS and the CUDA driver say, checked against the OS itself."""

from __future__ import annotations

import doctest
import importlib

import pytest

from course_lib.errors import CourseInputError
from course_lib.measure import device as snap_mod
from course_lib.measure.device import (CpuSnapshot, CudaSnapshot, peak_rss_bytes, reset_peak_rss, resolve_device,
                                         rss_bytes, snapshot, snapshot_from_dict)
from course_lib.units import GiB, MiB

try:
    import torch
    HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover - torch is in the course venv
    HAS_CUDA = False

MEASURE_MODULES = ["course_lib.measure.device", "course_lib.measure.tiny_model", "course_lib.measure.run",
                   "course_lib.measure.loadtime", "course_lib.measure.bandwidth", "course_lib.measure.plot"]


@pytest.mark.parametrize("name", MEASURE_MODULES)
def test_measure_doctests(name):
    # test_import_light skips course_lib.measure (some examples there are slow); the fast ones run here.
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see output above)"


def test_rss_matches_psutil():
    # Two independent readers of the same kernel counter: /proc/self/status and psutil.
    psutil = pytest.importorskip("psutil")
    ours, theirs = rss_bytes(), psutil.Process().memory_info().rss
    assert abs(ours - theirs) < 8 * MiB, f"VmRSS {ours:,} vs psutil {theirs:,}: the RSS reader is off"


def test_rss_follows_a_touched_allocation_and_peak_resets():
    before = rss_bytes()
    buf = bytearray(64 * MiB)          # bytearray zero-fills: every page is touched
    grown = rss_bytes() - before
    assert 60 * MiB <= grown <= 72 * MiB, f"RSS grew {grown:,} B for a 64 MiB buffer"
    del buf
    if not reset_peak_rss():
        pytest.skip("this OS cannot reset the peak RSS (no /proc/self/clear_refs)")
    assert peak_rss_bytes() - rss_bytes() < 8 * MiB, "after a reset the peak should be the current RSS"


def test_cpu_snapshot_is_consistent():
    s = snapshot("cpu")
    assert isinstance(s, CpuSnapshot)
    assert 0 < s.rss_bytes <= s.peak_rss_bytes + 4 * MiB
    assert 0 < s.available_bytes <= s.total_bytes
    assert "system available" in s.describe() and "GiB" in s.describe()
    assert snapshot_from_dict(s.to_dict()) == s


def test_cuda_snapshot_arithmetic_by_hand():
    # A 24 GiB card with 2 GiB free; torch reserved 20 GiB, 19 GiB of it in tensors, 0.5 GiB split.
    s = CudaSnapshot(device="cuda:0", device_name="hand", total_bytes=24 * GiB, free_bytes=2 * GiB,
                     allocated_bytes=19 * GiB, reserved_bytes=20 * GiB, peak_allocated_bytes=19 * GiB,
                     peak_reserved_bytes=20 * GiB, inactive_split_bytes=GiB // 2)
    assert s.non_torch_bytes == 2 * GiB, "(24 - 2) - 20 GiB lies outside torch"
    assert s.cached_bytes == GiB, "20 - 19 GiB is reserved but in no tensor"
    d = s.to_dict()
    assert d["non_torch_bytes"] == 2 * GiB and d["cached_bytes"] == GiB
    assert snapshot_from_dict(d) == s
    assert "outside torch" in s.describe()


@pytest.mark.parametrize("bad", ["tpu", "", "gpu0"])
def test_resolve_device_refuses_unknown(bad):
    with pytest.raises(CourseInputError, match="auto, cpu or cuda"):
        resolve_device(bad)


@pytest.mark.skipif(HAS_CUDA, reason="checks the no-GPU message; this machine has a GPU")
def test_cuda_requested_without_gpu_says_so():
    with pytest.raises(CourseInputError, match="no CUDA GPU"):
        resolve_device("cuda")
    assert resolve_device("auto") == "cpu"


def test_threads_default_is_small():
    assert 1 <= snap_mod.threads_default() <= 2


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs an NVIDIA GPU with a CUDA build of torch")
def test_cuda_snapshot_sees_an_allocation():
    torch.cuda.synchronize()
    before = snapshot("cuda")
    x = torch.ones(256 * MiB, dtype=torch.uint8, device="cuda")
    after = snapshot("cuda")
    assert after.allocated_bytes - before.allocated_bytes == 256 * MiB, "the allocator should report the tensor exactly"
    assert after.reserved_bytes >= after.allocated_bytes
    assert after.total_bytes - after.free_bytes >= after.reserved_bytes, "the driver sees at least torch's reservation"
    assert after.non_torch_bytes > 0, "the CUDA context lives outside torch's pool"
    del x
