"""Runtime versions: read "0.10.1.1", "v0.6.4.dev5+g4bba0922" or "0.19.0" and compare them.

A runtime's defaults change between releases (vLLM's ``gpu_memory_utilization`` went from 0.9 to
0.92, its V1 engine became the default in 0.8, CUDA graphs moved inside the memory budget in
0.21), so every default here is keyed by a :class:`Version`.

>>> parse_version("0.10.1.1")
Version(major=0, minor=10, patch=1)
>>> parse_version("v0.6.4.dev5+g4bba0922") < parse_version("0.8.2")
True
>>> parse_version("0.1.dev7548+gbaba038") is None      # a development build says nothing
True
"""

from __future__ import annotations

import re
from typing import NamedTuple



class Version(NamedTuple):
    """A release as (major, minor, patch); compares as a tuple."""

    major: int
    minor: int
    patch: int = 0

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


_VERSION = re.compile(r"^\s*v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?")


def parse_version(text: str | Version | None) -> Version | None:
    """The release ``text`` names, or None for a development build ("0.1.devN") or nothing readable."""
    if text is None or isinstance(text, Version):
        return text
    match = _VERSION.match(str(text))
    if not match:
        return None
    major, minor, patch = int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
    if (major, minor) == (0, 1) and ".dev" in str(text)[:12]:
        return None
    return Version(major, minor, patch)
