"""The kernel each notebook names (its kernelspec), and the one course-grade grades it in.

Stock nbgrader runs a notebook in the kernel its metadata names (nbgrader 0.9.6
nbgrader/preprocessors/execute.py is nbclient's ExecutePreprocessor, whose kernel name is
``metadata.kernelspec.name``) and fails when no kernel of that name is installed. course-grade reads
the name from the instructor's notebook (a learner cannot pick the kernel) and:

- a **Python** kernel (``language`` python in ``kernelspec`` or ``language_info``), whatever its name
  (``xpython``, ``conda-env-py``): graded in course-grade's own Python kernel (ipykernel, forked into
  the sandbox), with one line to the instructor when the name is not ``python3``;
- a kernel of **another language** (R, Julia): its installed kernelspec's command, run in the sandbox
  (a fresh process under bubblewrap, as any kernel the fork server cannot make). The sandbox shows the
  system (``/usr``, ``/etc``...) and the Pythons, not ``/opt`` or a home folder: a kernel installed there
  (a Julia depot in ``~/.julia``) does not start, and its hand-ins say the kernel died;
- such a kernel that is **not installed**: the batch is refused before anything is graded, in one line
  naming it and the installed kernels.

>>> python = {"kernelspec": {"name": "xpython", "language": "python", "display_name": "Python (XPython)"}}
>>> k = grading_kernel("ps1.ipynb", python, installed={"python3": {"language": "python", "argv": []}})
>>> k.argv is None, k.note
(True, "ps1.ipynb names the kernel 'xpython' (language python): graded in course-grade's Python kernel (ipykernel)")
>>> grading_kernel("hw.ipynb", {"kernelspec": {"name": "ir", "language": "R"}}, installed={"python3": {}})
Traceback (most recent call last):
...
autograder.errors.AutograderError: hw.ipynb runs the kernel 'ir' (language R), which is not installed here (installed kernels: python3); install it (`jupyter kernelspec list` shows it then) or grade where it is
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..errors import AutograderError

#: The kernel names that are course-grade's own Python kernel without a word said.
PLAIN_PYTHON = ("python3", "python")


@dataclass(frozen=True)
class GradingKernel:
    """The kernel a notebook is graded in."""

    name: str
    """The kernelspec name the notebook gives (``python3`` where it gives none)."""
    language: str
    """Its language (``python`` where the notebook says none)."""
    argv: tuple[str, ...] | None = None
    """None: course-grade's Python kernel; else the installed kernelspec's command (``{connection_file}`` in it)."""
    note: str = ""
    """One line for the instructor, or ""."""


def named_kernel(metadata: Mapping) -> tuple[str, str]:
    """(kernelspec name, language) of a notebook's metadata; ``python3`` and ``python`` where it says none.

    >>> named_kernel({"kernelspec": {"name": "julia-1.10", "language": "julia"}})
    ('julia-1.10', 'julia')
    >>> named_kernel({"language_info": {"name": "python"}})
    ('python3', 'python')
    """
    spec = metadata.get("kernelspec") or {}
    info = metadata.get("language_info") or {}
    spec = spec if isinstance(spec, Mapping) else {}
    info = info if isinstance(info, Mapping) else {}
    name = str(spec.get("name") or "python3")
    language = str(spec.get("language") or info.get("name") or "python").strip()
    return name, language


def installed_kernels() -> dict[str, dict]:
    """The kernelspecs Jupyter finds here (``jupyter kernelspec list``): name -> its kernel.json."""
    from jupyter_client.kernelspec import KernelSpecManager

    found = {}
    for name, entry in KernelSpecManager().get_all_specs().items():
        spec = dict(entry.get("spec") or {})
        resources = str(entry.get("resource_dir") or "")
        spec["argv"] = [str(a).replace("{resource_dir}", resources) for a in spec.get("argv") or []]
        found[name] = spec
    return found


def grading_kernel(notebook: str, metadata: Mapping, installed: Mapping[str, Mapping] | None = None) -> GradingKernel:
    """The kernel ``notebook`` (its name, for messages) is graded in, from its ``metadata``; raises
    AutograderError (one line) when it names a kernel of another language that is not installed."""
    name, language = named_kernel(metadata)
    if language.lower() == "python":
        note = "" if name in PLAIN_PYTHON else (f"{notebook} names the kernel {name!r} (language python): graded "
                                                f"in course-grade's Python kernel (ipykernel)")
        return GradingKernel(name=name, language=language, note=note)
    installed = installed_kernels() if installed is None else installed
    spec = installed.get(name)
    if spec is None or not spec.get("argv"):
        raise AutograderError(f"{notebook} runs the kernel {name!r} (language {language}), "
                              f"which is not installed here (installed kernels: {', '.join(sorted(installed)) or 'none'}); "
                              f"install it (`jupyter kernelspec list` shows it then) or grade where it is")
    return GradingKernel(name=name, language=language, argv=tuple(str(a) for a in spec["argv"]),
                         note=f"{notebook} runs the kernel {name!r} (language {language}): its installed "
                              f"command, in the sandbox")


def grading_kernels(notebooks: Mapping[str, Mapping]) -> dict[str, GradingKernel]:
    """Each notebook's grading kernel, by notebook name (``notebooks``: name -> metadata)."""
    installed: dict | None = None
    out = {}
    for notebook, metadata in notebooks.items():
        _, language = named_kernel(metadata)
        if language.lower() != "python" and installed is None:
            installed = installed_kernels()
        out[notebook] = grading_kernel(notebook, metadata, installed)
    return out


def instructor_metadata(paths) -> dict[str, Mapping]:
    """Each instructor notebook's metadata by file name, read as JSON (one that cannot be read is left to
    :func:`autograder.source.assignment.load_source`, which says why)."""
    import json
    from pathlib import Path

    out = {}
    for path in paths:
        try:
            metadata = json.loads(Path(path).read_bytes()).get("metadata")
        except (OSError, ValueError, AttributeError):
            continue
        out[Path(path).name] = metadata if isinstance(metadata, Mapping) else {}
    return out
