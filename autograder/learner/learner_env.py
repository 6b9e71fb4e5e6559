"""The learner's install: a wheel of ``course_lib`` alone and a ``requirements.txt``, with no grader in it.

``course-grade release --out R`` writes both into ``R/`` (beside ``R/<assignment>/``). In that
folder, in a fresh virtual environment::

    python3 -m venv .venv && .venv/bin/pip install -r requirements.txt

gives a learner environment in which the released notebook runs top to bottom (JupyterLab,
widgets, plots, the lab) and ``import autograder`` fails: no file of it holds grader code or
expected answers. torch is left out (a machine with a GPU keeps its own CUDA build; the
measurement cells say how to add a CPU one).

The wheel also switches off, for the JupyterLab it is installed beside, nbgrader's instructor
tools (formgrader, create assignment, course list, assignment list: there is no exchange) and
the news pop-up, and keeps Validate. It is written by hand (a wheel is a zip with a RECORD),
byte for byte the same for the same sources, so a release is reproducible.

>>> name = wheel_name()
>>> name.startswith("l14_course_lib-") and name.endswith("-py3-none-any.whl")
True
"""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COURSE_LIB = REPO / "course_lib"
DIST = "l14_course_lib"
PROJECT = "l14-course-lib"
#: What the library needs at run time (torch stays optional: see the module docstring).
REQUIRES = ("ipykernel>=6.20", "ipywidgets>=8.0", "matplotlib>=3.7", "numpy>=1.24", "psutil>=5.9",
            "safetensors>=0.4", "tqdm>=4.60")
#: nbgrader's JupyterLab plugins a learner must not see (Validate, "@jupyter/nbgrader:validate-assignment", stays).
INSTRUCTOR_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                      "@jupyter/nbgrader:course-list", "@jupyter/nbgrader:assignment-list",
                      "@jupyter/nbgrader:menu", "@jupyterlab/apputils-extension:announcements")
INSTRUCTOR_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list",
                                "nbgrader.server_extensions.assignment_list")
FIXED_TIME = (2026, 1, 1, 0, 0, 0)

REQUIREMENTS = """\
# L14.4 Model Loading and Memory: the learner's environment (the course library; no grader inside).
# In this folder, in a fresh virtual environment:
#     python3 -m venv .venv && .venv/bin/pip install -r requirements.txt
# torch is left out on purpose: a machine with a GPU (Colab, a JupyterHub image) keeps its own CUDA
# build. The measurement cells need it; on a CPU-only machine add the CPU build with
#     .venv/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu
./{wheel}
jupyterlab>=4.0
nbgrader==0.9.6        # for the Validate button; its instructor panels are switched off by the wheel above
{requires}
"""


def version() -> str:
    for line in (COURSE_LIB / "__init__.py").read_text(encoding="utf-8").splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    raise RuntimeError("course_lib/__init__.py has no __version__")


def wheel_name() -> str:
    return f"{DIST}-{version()}-py3-none-any.whl"


def _files() -> list[tuple[str, bytes]]:
    """(path in the wheel, bytes) for every file of the wheel except RECORD, in a fixed order."""
    ver = version()
    info, data = f"{DIST}-{ver}.dist-info", f"{DIST}-{ver}.data/data"
    out = [(f"course_lib/{p.relative_to(COURSE_LIB).as_posix()}", p.read_bytes())
           for p in sorted(COURSE_LIB.rglob("*")) if p.is_file() and p.suffix in (".py", ".json", ".txt")
           and "__pycache__" not in p.parts]
    page_config = {"disabledExtensions": {name: True for name in INSTRUCTOR_PLUGINS}}
    server_config = {"ServerApp": {"jpserver_extensions": {name: False for name in INSTRUCTOR_SERVER_EXTENSIONS}}}
    out += [
        (f"{data}/etc/jupyter/labconfig/page_config.d/{PROJECT}.json",
         (json.dumps(page_config, indent=2) + "\n").encode()),
        # loaded after nbgrader.json (the folder is read in name order), so it wins
        (f"{data}/etc/jupyter/jupyter_server_config.d/zz-{PROJECT}.json",
         (json.dumps(server_config, indent=2) + "\n").encode()),
    ]
    metadata = "\n".join([
        "Metadata-Version: 2.1", f"Name: {PROJECT}", f"Version: {ver}",
        "Summary: L14.4 Model Loading and Memory: the course library for learners (no grader).",
        "Requires-Python: >=3.10", *(f"Requires-Dist: {r}" for r in REQUIRES), ""])
    out += [(f"{info}/METADATA", metadata.encode()),
            (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: course-grade\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
            (f"{info}/top_level.txt", b"course_lib\n")]
    return out


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(out_dir: str | Path) -> Path:
    """Write the learner wheel into ``out_dir``; returns its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return write_wheel(out_dir / wheel_name(), _files(), f"{DIST}-{version()}.dist-info")


def write_wheel(target: Path, files: list[tuple[str, bytes]], dist_info: str) -> Path:
    """Write a wheel: ``files`` (path in the wheel, bytes) and their RECORD in ``dist_info``, at fixed times."""
    record_path = f"{dist_info}/RECORD"
    record = "\n".join([*(_record_line(p, d) for p, d in files), f"{record_path},,", ""]).encode()
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path, data in [*files, (record_path, record)]:
            entry = zipfile.ZipInfo(path, date_time=FIXED_TIME)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(entry, data)
    return target


def write_learner_install(out_dir: str | Path) -> list[Path]:
    """The wheel and ``requirements.txt`` in ``out_dir`` (the release root); returns both paths."""
    out_dir = Path(out_dir)
    wheel = build_wheel(out_dir)
    requires = "\n".join(REQUIRES)
    requirements = out_dir / "requirements.txt"
    requirements.write_text(REQUIREMENTS.format(wheel=wheel.name, requires=requires), encoding="utf-8")
    return [wheel, requirements]
