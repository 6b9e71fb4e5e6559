"""What every machine that grades must share with the one that started the batch: the grader's code.

A Dask worker (:mod:`autograder.batch.distributed`) and a Gradescope container
(:mod:`autograder.batch.gradescope`) grade with the course package installed *there*. A grade is
only the grade the client would give if that package is the client's, so before a machine
grades anything its :func:`environment` is compared with the client's, part by part, and a
machine whose parts differ is refused with a message naming the part and both digests.

The parts: a digest of every source file of ``course_lib`` (the code learners call, whose
answers the checks compare against), of ``autograder`` (the engine) and of ``lessons`` (the
trusted checks), and the Python version (another minor version can print and round otherwise).
The instructor's notebooks and files are not installed files: they travel with the batch, and
:func:`digest_bytes` names them.

>>> env = environment()
>>> sorted(env)
['autograder', 'course_lib', 'lessons', 'python']
>>> differences(env, env)
[]
>>> differences(env, dict(env, course_lib="0" * 64))[0].startswith("course_lib differs")
True
"""

from __future__ import annotations

import functools
import hashlib
import sys
from pathlib import Path

import course_lib

PACKAGES = {"course_lib": Path(course_lib.__file__).resolve().parent,
            "autograder": Path(__file__).resolve().parents[1],
            "lessons": Path(__file__).resolve().parents[2] / "lessons"}
#: Which files of a package make it what it is: its code and the data it reads.
SOURCE_SUFFIXES = (".py", ".json", ".txt")


def tree_digest(folder: Path) -> str:
    """sha256 over every source file below ``folder`` (relative path and bytes), in path order."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file()
                       and "__pycache__" not in p.parts):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def environment() -> dict[str, str]:
    """This process's grading environment, part by part (computed once per process)."""
    env = {name: tree_digest(folder) for name, folder in PACKAGES.items()}
    env["python"] = f"{sys.version_info.major}.{sys.version_info.minor}"
    return env


def digest(env: dict[str, str]) -> str:
    """One digest for a whole environment (names and values, in name order)."""
    return digest_bytes(*(f"{k}={v}".encode() for k, v in sorted(env.items())))


def digest_bytes(*parts: bytes) -> str:
    """sha256 over the parts, each length-prefixed (so no two lists of parts collide)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big") + part)
    return h.hexdigest()


def differences(client: dict[str, str], worker: dict[str, str]) -> list[str]:
    """What differs between the client's environment and a worker's, one phrase per part."""
    out = []
    for name in sorted(set(client) | set(worker)):
        mine, theirs = client.get(name), worker.get(name)
        if mine != theirs:
            out.append(f"{name} differs (there {_short(theirs)}, here {_short(mine)})")
    return out


def _short(value: str | None) -> str:
    if value is None:
        return "absent"
    return value[:12] + "..." if len(value) > 16 else value
