"""``course-grade gradescope``: an autograder bundle for Gradescope, which grades on its own machines.

Gradescope does not import results from elsewhere: it builds an image from a bundle (a zip with
``setup.sh`` and ``run_autograder`` at its root) and runs ``run_autograder`` in a fresh container
for each submission (https://gradescope-autograders.readthedocs.io/en/latest/specs/). What runs where::

    this machine   course-grade gradescope --out autograder.zip       builds the bundle
    Gradescope     setup.sh, once per bundle (Ubuntu image, as root)   installs what grading needs
    Gradescope     run_autograder, once per submission (as root)       grades it, writes results.json

The bundle holds::

    setup.sh          apt: python3, bubblewrap; a venv of the image's own Python (3.11 or newer, else
                      the distribution's python3.N from apt: no download), readable and runnable by an
                      unprivileged uid, the course package's wheel and its dependencies (no torch: grading
                      never needs it); then checks that such a uid runs it, that the installed grader is
                      the one the bundle was built with (its code; the Python's minor version may differ
                      and is reported), and that the image isolates learner code (the minimum:
                      autograder.sandbox.isolation)
    run_autograder    python -m autograder.batch.gradescope --root /autograder
    wheels/           the course package (course_lib + autograder), written by hand as release does
    instructor/       the instructor notebooks (solutions, hidden tests), the other files, a lesson file if any
    bundle.json       the assignment, the settings (timeouts, limits), the environment digests

``run_autograder`` grades ``ROOT/submission/`` with the same engine as ``course-grade autograde``
(grade.grade_submission: the hand-in read by the grader's rules, the same sandbox and limits; where
the container cannot isolate learner code -- Docker can forbid bubblewrap's namespaces and new
cgroups -- nothing is graded: the submission is a grader_error saying what is missing, never
graded with ``--insecure``) and writes ``ROOT/results/results.json`` with the
same tests and messages as ``course-grade export``'s Gradescope JSON: every autograded question
(hidden tests run, their code never shown) with what to look at, the written answer as a test
for Gradescope's manual grading, and the status. ``ROOT`` is ``/autograder``, or
``$COURSE_GRADE_GRADESCOPE_ROOT`` (tests unpack a bundle into a temporary root).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import logging
import os
import re
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ..run import sidecheck
from ..source.assignment import Assignment, default_assignment, load_lesson, load_source
from .autograde import grading_settings
from .distributed import Instructor
from .environment import PACKAGES, SOURCE_SUFFIXES, differences, digest, digest_bytes, environment
from ..errors import AutograderError
from ..publish.export import gradescope_json
from ..run.grade import blank_result, grade_submission
from ..run.handin import HandIn
from ..run.job import Batch, Job
from ..learner.learner_env import FIXED_TIME, write_wheel
from ..contract.results import GRADER_ERROR, write_json
from ..sandbox import Limits, probe, require_minimum
from ..contract.settings import Settings

log = logging.getLogger(__name__)
DIST = "course_model_memory"
PROJECT = "course-model-memory"
BUNDLE_JSON = "bundle.json"
ROOT_VARIABLE = "COURSE_GRADE_GRADESCOPE_ROOT"
DEFAULT_ROOT = "/autograder"
#: The package's own Requires-Python; pinned dependencies may need a newer one (:func:`min_python`).
MIN_PYTHON = (3, 10)
#: The newest python3.N setup.sh asks apt for when the image's python3 is too old.
NEWEST_MINOR = 14

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (its Ubuntu base image).
# Built by `course-grade gradescope` for {assignment}.
set -euo pipefail
ROOT="${{{root_variable}:-{default_root}}}"
SOURCE="$(cd "$(dirname "$0")" && pwd)"
# The instructor files (solutions, hidden tests) are root's alone: learner code never runs as root.
chmod -R go-rwx "$SOURCE"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# bubblewrap: the sandbox's namespaces, where the container allows them (else the grader says what it used)
apt-get install -y -qq python3 python3-venv bubblewrap util-linux >/dev/null
# The image's own python3 when it is {min_python} or newer (what the pinned dependencies need:
# {why}); else the distribution's own newer python3.N from apt (Ubuntu
# 22.04, Gradescope's default base image, has 3.10 as python3 and python3.11 in universe). No Python is
# downloaded from anywhere else, and a system Python under /usr is one an unprivileged uid can run.
PY=python3
new_enough() {{ "$1" -c 'import sys; sys.exit(sys.version_info < ({min_major}, {min_minor}))' 2>/dev/null; }}
if ! new_enough python3; then
    for minor in {minors}; do
        if apt-get install -y -qq "python3.$minor" "python3.$minor-venv" >/dev/null 2>&1 && new_enough "python3.$minor"; then
            PY="python3.$minor"
            break
        fi
    done
fi
if ! new_enough "$PY"; then
    echo "setup.sh: the base image's $(python3 -V 2>&1) is too old and apt has no python3.{min_minor} or newer: the" \
         "grader needs Python {min_python} or newer; choose the Ubuntu 22.04 (or newer) base image on Configure Autograder" >&2
    exit 1
fi
"$PY" -m venv "$ROOT/venv"
"$ROOT/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$SOURCE/wheels/{wheel}"
# Learner code runs as a throwaway unprivileged uid, which must be able to run the venv's Python.
chmod -R a+rX "$ROOT/venv"
chmod a+x "$ROOT"
# The grader's own code (trusted checks, expected answers) is root's alone: learner code never needs it.
for package in autograder lessons; do
  chmod -R go-rwx "$("$ROOT/venv/bin/python" -c "import $package, os; print(os.path.dirname($package.__file__))")"
done
# Fail the build, not a learner's submission, if an unprivileged uid cannot run the kernel's Python...
setpriv --reuid=65534 --regid=65534 --clear-groups "$ROOT/venv/bin/python" -c "import ipykernel, course_lib" \\
  || {{ echo "setup.sh: an unprivileged uid cannot run $ROOT/venv/bin/python" >&2; exit 1; }}
# ...or the installed grader is not the one built into this bundle, or this image cannot isolate learner code.
"$ROOT/venv/bin/python" -m autograder.batch.gradescope --root "$ROOT" --check
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this once per submission, as root, in a fresh container: it grades
# $ROOT/submission/ with the course grader and writes $ROOT/results/results.json.
set -euo pipefail
ROOT="${{{root_variable}:-{default_root}}}"
PYTHON="${{COURSE_GRADE_PYTHON:-$ROOT/venv/bin/python}}"
exec "$PYTHON" -m autograder.batch.gradescope --root "$ROOT"
"""


@dataclass
class BundleResult:
    """What ``gradescope`` wrote."""

    path: str
    """The bundle (a zip), to upload as the assignment's autograder on Gradescope."""
    files: list[str]
    """What it holds."""
    seconds: float = 0.0
    max_score: float = 0.0
    """What the autograder is worth in the assignment's outline (its tests' maxima)."""
    manual_max_score: float = 0.0
    """The written answer's points: a manually graded question of the outline on Gradescope."""


# ---- building the bundle (here) ---------------------------------------------------------------

def _requirements() -> list[str]:
    """The course package's run-time dependencies (its own metadata, extras left out)."""
    try:
        requires = importlib.metadata.requires(PROJECT) or []
    except importlib.metadata.PackageNotFoundError:
        raise AutograderError(f"the {PROJECT} package is not installed here (its dependencies go into the "
                              f"bundle); run `make venv` or `pip install -e .` first") from None
    return [r for r in requires if "extra ==" not in r]


def min_python() -> tuple[tuple[int, int], str]:
    """The oldest Python 3 the grader installs on, and why: the package's own Requires-Python, raised
    by the Requires-Python of each dependency pinned with ``==`` (that version or none). Ranges are
    left out: pip picks an older release that fits an older Python.

    >>> (major, minor), why = min_python()
    >>> (major, minor) >= MIN_PYTHON and why != ""
    True
    """
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    found, why = MIN_PYTHON, f"{PROJECT} itself: >={MIN_PYTHON[0]}.{MIN_PYTHON[1]}"
    for text in _requirements():
        req = Requirement(text)
        pinned = [s for s in req.specifier if s.operator == "=="]
        if not pinned:
            continue
        try:
            needs = SpecifierSet(importlib.metadata.metadata(req.name).get("Requires-Python") or "")
        except importlib.metadata.PackageNotFoundError:
            continue
        oldest = next(((3, m) for m in range(found[1], NEWEST_MINOR + 1) if f"3.{m}.0" in needs), found)
        if oldest > found:
            found, why = oldest, f"{req.name}{pinned[0]} has Requires-Python {needs}"
    return found, why


def _wheel_files() -> tuple[str, list[tuple[str, bytes]], str]:
    """(wheel name, files, dist-info folder) of the course package: course_lib and autograder as they are here."""
    version = importlib.metadata.version(PROJECT)
    info = f"{DIST}-{version}.dist-info"
    files = []
    for name, folder in PACKAGES.items():
        files += [(f"{name}/{p.relative_to(folder).as_posix()}", p.read_bytes())
                  for p in sorted(folder.rglob("*")) if p.is_file() and p.suffix in SOURCE_SUFFIXES
                  and "__pycache__" not in p.parts]
    try:
        scripts = importlib.metadata.distribution(PROJECT).read_text("entry_points.txt") or ""
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - checked by _requirements first
        scripts = ""
    metadata = "\n".join(["Metadata-Version: 2.1", f"Name: {PROJECT}", f"Version: {version}",
                          "Summary: the course library, its lessons and their grader.",
                          "Requires-Python: >=3.10", *(f"Requires-Dist: {r}" for r in _requirements()), ""])
    files += [(f"{info}/METADATA", metadata.encode()),
              (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: course-grade\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
              (f"{info}/entry_points.txt", scripts.encode()),
              (f"{info}/top_level.txt", "".join(f"{n}\n" for n in PACKAGES).encode())]
    return f"{DIST}-{version}-py3-none-any.whl", files, info


def main(out: str | Path = "autograder.zip", cell_timeout: float = Settings.cell_timeout,
         notebook_timeout: float = Settings.notebook_timeout, memory_limit: str | int = Limits.memory_bytes,
         assignment: Assignment | None = None) -> BundleResult:
    """Write the Gradescope autograder bundle for ``assignment`` (default: the installed lesson) to ``out``
    (a .zip); returns what it holds."""
    start = time.monotonic()
    assignment = assignment or default_assignment()
    out = Path(out)
    if out.suffix != ".zip":
        raise AutograderError(f"--out {out}: Gradescope takes the autograder as a .zip; name it e.g. autograder.zip")
    if out.is_dir():
        raise AutograderError(f"--out {out} is a folder; give the path of the .zip to write")
    settings = grading_settings(cell_timeout, notebook_timeout, memory_limit)
    spec = load_source(assignment)

    wheel, wheel_files, info = _wheel_files()
    env = environment()
    files = Instructor.of(assignment)
    instructor = {f"instructor/{name}": data for name, data in files.files}
    instructor.update({f"instructor/lesson/{name}": data for name, data in files.lesson_files})
    meta = {"assignment": assignment.name, "notebook": f"instructor/{assignment.notebook_name}",
            "notebooks": list(files.notebook_names), "files": [name for name, _ in files.files],
            "lesson": files.lesson, "lesson_is_file": bool(files.lesson_files), "settings": asdict(settings),
            "environment": env, "instructor_digest": digest_bytes(*(instructor[k] for k in sorted(instructor))),
            "max_score": spec.max_score, "manual_max_score": spec.manual_max_score}
    (major, minor), why = min_python()
    words = {"assignment": assignment.name, "root_variable": ROOT_VARIABLE, "default_root": DEFAULT_ROOT,
             "wheel": wheel, "min_python": f"{major}.{minor}", "min_major": major, "min_minor": minor, "why": why,
             "minors": " ".join(str(m) for m in range(minor, NEWEST_MINOR + 1))}
    with tempfile.TemporaryDirectory() as tmp:
        wheel_bytes = write_wheel(Path(tmp) / wheel, wheel_files, info).read_bytes()
    members = [("setup.sh", SETUP_SH.format(**words).encode(), 0o755),
               ("run_autograder", RUN_AUTOGRADER.format(**words).encode(), 0o755),
               (BUNDLE_JSON, (json.dumps(meta, indent=2) + "\n").encode(), 0o644),
               (f"wheels/{wheel}", wheel_bytes, 0o644),
               *((name, data, 0o600) for name, data in sorted(instructor.items()))]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_name(f".{out.name}.tmp")
    with zipfile.ZipFile(tmp_out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in members:
            entry = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            entry.external_attr = mode << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(entry, data)
    os.replace(tmp_out, out)
    return BundleResult(path=str(out), files=[m[0] for m in members], seconds=round(time.monotonic() - start, 2),
                        max_score=spec.max_score, manual_max_score=spec.manual_max_score)


# ---- running it (on Gradescope, once per submission) -----------------------------------------

def _bundle(root: Path) -> tuple[dict, Assignment, Settings]:
    source = root / "source"
    try:
        meta = json.loads((source / BUNDLE_JSON).read_text())
        folder = source / "instructor"
        lesson = str(folder / "lesson" / meta["lesson"]) if meta["lesson_is_file"] else meta["lesson"]
        assignment = Assignment(name=meta["assignment"], notebooks=tuple(folder / n for n in meta["notebooks"]),
                                files=tuple(folder / n for n in meta["files"] if n not in meta["notebooks"]),
                                lesson=lesson, root=folder)
        raw = dict(meta["settings"])
        # never graded below the isolation minimum, whatever the bundle says
        settings = Settings(**{**raw, "limits": Limits(**raw["limits"]), "insecure": False})
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise AutograderError(f"{source}/{BUNDLE_JSON} is missing or from another grader version ({e}); "
                              f"rebuild the bundle with `course-grade gradescope`") from None
    return meta, assignment, settings


def grader_differences(built: dict, here: dict) -> list[str]:
    """What differs in the grader's code (course_lib, autograder) between the bundle and this machine.

    The Python is the base image's own (3.10 or newer), so its version is not refused: :func:`python_note`
    says when it is not the builder's.

    >>> grader_differences({"course_lib": "a", "python": "3.11"}, {"course_lib": "a", "python": "3.10"})
    []
    """
    return differences({k: v for k, v in built.items() if k != "python"}, {k: v for k, v in here.items() if k != "python"})


def python_note(built: dict, here: dict) -> str:
    """A line saying the Python differs from the builder's, or "" when it does not.

    >>> python_note({"python": "3.11"}, {"python": "3.10"})
    'python 3.10 here; the bundle was built with 3.11'
    """
    if built.get("python") == here.get("python"):
        return ""
    return f"python {here.get('python')} here; the bundle was built with {built.get('python')}"


def check(root: Path) -> str:
    """The grader installed here is the one the bundle was built with (its code; the Python may differ), and
    this machine isolates learner code (else AutograderError)."""
    meta, _, _ = _bundle(root)
    differ = grader_differences(meta["environment"], environment())
    if differ:
        raise AutograderError(f"the grader installed here is not the one this bundle was built with: {'; '.join(differ)}; "
                              f"rebuild the bundle (course-grade gradescope) from the course package you grade with")
    require_minimum(probe())
    return digest(environment())


def _student_id(root: Path) -> str:
    """The submitter as Gradescope names them (submission_metadata.json), fit for a file name."""
    try:
        users = json.loads((root / "submission_metadata.json").read_text()).get("users") or []
        name = str(users[0].get("email") or users[0].get("name") or "")
    except (OSError, ValueError, AttributeError, IndexError, TypeError):
        name = ""
    name = re.sub(r"[^A-Za-z0-9._@-]", "_", name).strip("._")[:80]
    return name or "submission"


#: How deep under submission/ the hand-in is looked for (an upload of the folder, or of a zip of a zip).
MAX_HAND_IN_DEPTH = 8
#: Folders looked at, at most (an upload may hold a million empty ones).
MAX_HAND_IN_FOLDERS = 10_000


def _hand_in_folder(submission: Path, assignment: Assignment) -> Path:
    """Where in ``submission/`` the notebook is: at the top, or the shallowest folder that holds it
    (a learner may upload the folder, or a zip of it); the top when there is none. Links to folders
    are never followed (an uploaded zip may hold one to /autograder/source, where the solutions are);
    a link to a file is found, and refused by the grader's reader. The folders are walked level by
    level, no deeper than :data:`MAX_HAND_IN_DEPTH` and over no more than :data:`MAX_HAND_IN_FOLDERS`
    (os.walk recursed: a 1,200-folder-deep chain beside the hand-in ended in RecursionError).

    >>> import tempfile, types
    >>> top = Path(tempfile.mkdtemp()); (top / "d" / "e").mkdir(parents=True); (top / "hw").mkdir()
    >>> _ = (top / "hw" / "a.ipynb").write_text("{}"); _ = (top / "d" / "e" / "a.ipynb").write_text("{}")
    >>> _hand_in_folder(top, types.SimpleNamespace(notebook_names=["a.ipynb"])) == top / "hw"
    True
    """
    wanted, level, seen = set(assignment.notebook_names), [submission], 0
    for _ in range(MAX_HAND_IN_DEPTH + 1):
        found, below = [], []
        for folder in level:
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        if entry.name in wanted:
                            found.append(folder)
                        elif seen < MAX_HAND_IN_FOLDERS and entry.is_dir(follow_symlinks=False):
                            seen += 1
                            below.append(Path(entry.path))
            except OSError:
                continue
        if found:
            return min(found, key=str)
        level = below
    return submission


def run(root: str | Path) -> dict:
    """Grade ``root/submission/`` and write ``root/results/results.json``; returns what it wrote."""
    root = Path(root)
    start = time.monotonic()
    meta, assignment, settings = _bundle(root)
    results_json = root / "results" / "results.json"
    sid = _student_id(root)
    iso = probe()
    with tempfile.TemporaryDirectory(prefix=f"cg-{os.getpid()}-gradescope-") as tmp:
        scratch = Path(tmp)
        batch = Batch(assignment=assignment, settings=settings, prepared={}, fingerprint=meta["instructor_digest"],
                      results_dir=str(scratch / "results"))
        job = Job(student_id=sid, folder=str(scratch / "submitted" / sid / assignment.name), batch=batch,
                  hand_in=HandIn(), fingerprint="")
        differ = grader_differences(meta["environment"], environment())
        if differ:
            result = blank_result(job, load_source(assignment), GRADER_ERROR,
                                  f"the grader installed here is not the one this bundle was built with: {'; '.join(differ)}")
        elif iso.missing():
            result = blank_result(job, load_source(assignment), GRADER_ERROR,
                                  "this machine cannot isolate learner code, so nothing is graded; it lacks "
                                  + "; and ".join(iso.missing()))
        else:
            try:
                folder = _hand_in_folder(root / "submission", assignment)
                hand_in = HandIn.read(folder, assignment)
                laid_out = hand_in.lay_out(scratch / "submitted", sid, assignment.name)
                run = sidecheck.runner(settings, iso, load_lesson(assignment.lesson).preload)
                prepared = sidecheck.prepare(assignment, run)
                job = Job(student_id=sid, folder=str(laid_out), batch=dataclasses.replace(batch, prepared=prepared),
                          hand_in=hand_in, fingerprint=digest_bytes(meta["instructor_digest"].encode(), hand_in.sha.encode()))
                result = grade_submission(job)
            except Exception as e:  # noqa: BLE001 - whatever an upload does, results.json is written
                log.exception("grading this submission failed")
                result = blank_result(job, load_source(assignment), GRADER_ERROR,
                                      f"the grader failed on this submission ({type(e).__name__}); the instructor "
                                      f"can see why in the autograder's output")
    # hand-graded answers handed back as released are nbgrader's 0 ("No response"), as the local gradebook says
    data = gradescope_json(result, 0.0 if result.unanswered and not result.needs_manual_grading else None)
    # How this machine isolates learner code is the instructor's to know, not the learner's: it goes to the
    # autograder's output (stdout_visibility hidden) and extra_data, never to the output students read.
    notes = [*iso.warnings, *filter(None, [python_note(meta["environment"], environment())])]
    data["execution_time"] = round(time.monotonic() - start, 1)
    data["stdout_visibility"] = "hidden"
    data["extra_data"]["isolation"] = iso.summary()
    data["extra_data"]["notes"] = notes
    write_json(results_json, data)
    return data


def run_main(argv: list[str] | None = None) -> int:
    """``python -m autograder.batch.gradescope [--root R] [--check]``: what run_autograder and setup.sh call."""
    parser = argparse.ArgumentParser(prog="python -m autograder.batch.gradescope", description=run_main.__doc__)
    parser.add_argument("--root", default=os.environ.get(ROOT_VARIABLE, DEFAULT_ROOT),
                        help=f"Gradescope's root folder (default: ${ROOT_VARIABLE}, else {DEFAULT_ROOT})")
    parser.add_argument("--check", action="store_true", help="only check the installed grader against the bundle")
    args = parser.parse_args(argv)
    try:
        if args.check:
            digest_here = check(Path(args.root))
            note = python_note(_bundle(Path(args.root))[0]["environment"], environment())
            print(f"the installed grader matches the bundle (environment {digest_here[:12]}...)"
                  + (f"; {note}" if note else ""))
            return 0
        data = run(args.root)
    except AutograderError as e:
        print(f"course-grade gradescope: {e}", file=sys.stderr)
        return 2
    print(data["output"])
    print(f"isolation: {data['extra_data']['isolation']}", *(f"note: {n}" for n in data["extra_data"]["notes"]), sep="\n")
    print(f"score {data['score']:g}; wrote {Path(args.root) / 'results' / 'results.json'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run_main())
