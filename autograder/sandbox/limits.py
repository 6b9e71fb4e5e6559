"""What one submission may use (:class:`Limits`), and the size options that set it, read with the
course's one size grammar (GB = 10^9, GiB = 2^30, ``course_lib.units``).

>>> Limits().summary()
'memory 2.15 GB (2.00 GiB), disk 536.87 MB (512 MiB) and 100,000 files, 256 processes, 64 MiB per file'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from course_lib.errors import CourseInputError
from course_lib.units import GiB, MiB, TiB, format_bytes, parse_bytes

from ..errors import AutograderError

#: The smallest memory cap a kernel can start under (ipykernel with numpy and matplotlib uses ~200 MB).
MIN_MEMORY_BYTES = 256 * MiB
#: The largest: a grading machine with more than 1 TiB for one notebook is not a grading machine.
MAX_MEMORY_BYTES = TiB
#: The smallest disk cap: a kernel writes ~1 MB (IPython's history, matplotlib's cache) before any cell.
MIN_DISK_BYTES = 16 * MiB
#: The largest: the scratch tmpfs lives in memory (and counts against the memory cap).
MAX_DISK_BYTES = 64 * GiB


def _size_option(flag: str, text: str | int, lo: int, hi: int, example: str) -> int:
    """Bytes from a size option, read with the course's one size grammar (GB = 10^9, GiB = 2^30)."""
    if isinstance(text, str) and re.fullmatch(r"\s*[-+]?(inf|infinity|nan)\s*[A-Za-z]*\s*", text, re.I):
        raise AutograderError(f"{flag}={text!r} is not a finite size; use a size from {both_units(lo)} to {both_units(hi)}, "
                              f"e.g. {example}")
    if isinstance(text, str) and re.fullmatch(r"\s*[\d.eE+]+\s*[KMGTkmgt]\s*", text):
        unit = text.strip()[-1].upper()
        raise AutograderError(f"{flag}={text!r}: the unit {unit!r} alone is ambiguous; write {unit}B (powers of "
                              f"1000) or {unit}iB (powers of 1024), e.g. {example}")
    try:
        value = parse_bytes(text, name=flag)
    except CourseInputError as e:
        raise AutograderError(str(e)) from None
    if not lo <= value <= hi:
        raise AutograderError(f"{flag}={text!r} is {format_bytes(value, 'auto')}; use a size from "
                              f"{both_units(lo)} to {both_units(hi)}, e.g. {example}")
    return value


def both_units(n: int) -> str:
    """A size in decimal and binary units, as messages print it.

    >>> both_units(256 * MiB), both_units(2 * 10**9)
    ('268.44 MB (256 MiB)', '2.00 GB (1.86 GiB)')
    """
    binary = f"{n / GiB:.2f} GiB" if n >= GiB else f"{n / MiB:.0f} MiB"
    return f"{format_bytes(n, 'auto')} ({binary})"


def memory_limit_bytes(text: str | int) -> int:
    """Bytes from ``--memory-limit``, read with the course's one size grammar (GB = 10^9, GiB = 2^30).

    >>> memory_limit_bytes("2GB"), memory_limit_bytes("2GiB"), memory_limit_bytes("512MiB")
    (2000000000, 2147483648, 536870912)
    """
    return _size_option("--memory-limit", text, MIN_MEMORY_BYTES, MAX_MEMORY_BYTES, "2GB or 2GiB")


def disk_limit_bytes(text: str | int) -> int:
    """Bytes from ``--disk-limit``, as :func:`memory_limit_bytes` reads them.

    >>> disk_limit_bytes("512MiB"), disk_limit_bytes("1GB")
    (536870912, 1000000000)
    """
    return _size_option("--disk-limit", text, MIN_DISK_BYTES, MAX_DISK_BYTES, "512MiB or 1GB")


@dataclass(frozen=True)
class Limits:
    """What one submission may use. Every field is enforced by the OS, not by Python."""

    memory_bytes: int = 2 * GiB
    """Memory cap: a cgroup limit (the kernel OOM-kills), else RLIMIT_AS. A kernel with torch uses ~0.5 GB."""
    max_processes: int = 256
    """Processes and threads together (pids cgroup and RLIMIT_NPROC); ipykernel runs ~10 threads."""
    max_file_bytes: int = 64 * MiB
    """RLIMIT_FSIZE: the largest file learner code may write."""
    disk_bytes: int = 512 * MiB
    """Everything the notebook may write, together: work/, $HOME, /tmp and the kernel's sockets and log.
    A size-capped tmpfs over the scratch folder (its pages count against the memory cap as well),
    else a watchdog on the folder's size (see :class:`autograder.sandbox.isolation.DiskCap`)."""
    max_files: int = 100_000
    """Files and folders the notebook may create (the tmpfs's inodes; the watchdog counts them too)."""
    max_open_files: int = 1024
    """RLIMIT_NOFILE."""
    cpu_seconds: int = 900
    """RLIMIT_CPU: a backstop behind the wall-clock timeouts."""
    tmp_bytes: int = 256 * MiB
    """Size of bubblewrap's private /tmp when the scratch folder cannot be capped (else /tmp lies in it)."""

    def memory_text(self) -> str:
        """The memory cap in both units, as messages print it: ``2.15 GB (2.00 GiB)``, ``536.87 MB (512 MiB)``."""
        return both_units(self.memory_bytes)

    def disk_text(self) -> str:
        """The disk cap in both units, as messages print it: ``536.87 MB (512 MiB)``."""
        return both_units(self.disk_bytes)

    def summary(self) -> str:
        """One line for the batch report: every limit, sizes in both units."""
        return (f"memory {self.memory_text()}, disk {self.disk_text()} and {self.max_files:,} files, "
                f"{self.max_processes} processes, {self.max_file_bytes // MiB} MiB per file")
