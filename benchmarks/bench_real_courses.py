"""Stock ``nbgrader autograde`` vs ``course-grade autograde`` on public nbgrader courses, cell by cell.

    .venv/bin/python benchmarks/bench_real_courses.py                               # every course, assignment, hand-in
    .venv/bin/python benchmarks/bench_real_courses.py --course cs1302 --kinds solution,blank
    .venv/bin/python benchmarks/bench_real_courses.py --write benchmarks/results/real-courses.md

``tests/files/real_courses/<course>/`` holds a few assignments of a public course (its ``source/``, its
licence, and ``course.json``: where it came from, the stock settings it needs, and hand-written wrong
answers). For every course x assignment, five hand-ins are built from the course's own files:

- ``solution``: the instructor's notebooks as they are in ``source/`` (what nbgrader's docs grade too);
- ``blank``: the release stock ``nbgrader generate_assignment`` makes, handed back untouched;
- ``wrong``: the solution with hand-written wrong answers (``course.json``'s ``wrong`` edits);
- ``loop``: the solution with an endless loop at the end of its first answer cell;
- ``flood``: the solution whose first answer cell also prints 1.5 MiB (past course-grade's 1 MiB cap)
  and still passes.

Stock nbgrader grades the hand-ins in a course folder of its own (``generate_assignment`` first, untimed,
as an instructor would have it; then ``nbgrader autograde --force``, timed, into a real gradebook);
``course-grade autograde --source`` grades the same hand-ins into an empty results folder (timed, every
hardening on). Both gradebooks are read with nbgrader's API: a cell is *equal* when every hand-in's
(notebook, grade id) has the same autograded score in both (a hand-in course-grade did not grade at all
counts as all of its cells unequal). Stock's per-cell limit is its default (30 s wall); course-grade is
given ``--cell-timeout 30`` (CPU seconds) so the endless loop ends alike. Not a test: run it by hand;
``tests/autograder/test_real_courses.py`` runs a small part of it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COURSES = REPO / "tests" / "files" / "real_courses"
KINDS = ("solution", "blank", "wrong", "loop", "flood")
#: The flood: 1,536 lines of 1,024 bytes, 1.5 MiB of stdout in a cell that still passes.
FLOOD = '\nprint(("x" * 1023 + "\\n") * 1536, end="")\n'
LOOP = "\nwhile True:\n    pass\n"


def course_info(course: str) -> dict:
    return json.loads((COURSES / course / "course.json").read_text())


def all_courses() -> list[str]:
    return sorted(p.parent.name for p in COURSES.glob("*/course.json"))


def nbgrader_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # nbgrader runs alembic
    env.pop("PYTHONPATH", None)
    return env


def _nbgrader(root: Path, *args: str, timeout: int = 3600) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, env=nbgrader_env(),
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed in {root}:\n{proc.stderr[-3000:]}")
    return proc


def stock_course(root: Path, course: str, assignment: str) -> Path:
    """A stock nbgrader course folder at ``root`` with ``source/<assignment>/`` and its release built."""
    info = course_info(course)
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(COURSES / course / "source" / assignment, root / "source" / assignment, dirs_exist_ok=True)
    (root / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(root)!r}\n"
        + "".join(line + "\n" for line in info.get("stock_config", [])))
    _nbgrader(root, "generate_assignment", assignment, "--force")
    return root / "release" / assignment


def _edit_notebook(path: Path, edit) -> None:
    import nbformat

    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    edit(nb)
    nbformat.write(nb, path)


def _first_answer_cell(nb):
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            return cell
    raise ValueError("no answer cell")


def _apply_wrong(nb, edits: list[list[str]], where: str) -> None:
    for old, new in edits:
        hits = [c for c in nb.cells if old in c.source and c.get("metadata", {}).get("nbgrader", {}).get("solution")]
        if not hits:
            raise ValueError(f"{where}: the wrong-answer edit {old!r} matches no answer cell")
        for cell in hits:
            cell.source = cell.source.replace(old, new)


def build_handins(course: str, assignment: str, release: Path, submitted: Path,
                  kinds: tuple[str, ...] = KINDS) -> list[str]:
    """``submitted/<kind>/<assignment>/`` for each kind (the student id is the kind); returns the ids."""
    source = COURSES / course / "source" / assignment
    wrong = course_info(course).get("wrong", {}).get(assignment, {})
    notebooks = sorted(p.name for p in release.glob("*.ipynb"))
    for kind in kinds:
        folder = submitted / kind / assignment
        shutil.copytree(release, folder, dirs_exist_ok=True)   # every file the learner fetched
        if kind == "blank":
            continue
        for name in notebooks:
            shutil.copyfile(source / name, folder / name)
        if kind == "wrong":
            if not wrong:
                raise ValueError(f"{course}/{assignment}: course.json has no wrong answers")
            for name, edits in wrong.items():
                _edit_notebook(folder / name, lambda nb, e=edits, n=name: _apply_wrong(nb, e, f"{course}/{n}"))
        elif kind in ("loop", "flood"):
            first = next(n for n in notebooks if _has_answer(source / n))
            extra = LOOP if kind == "loop" else FLOOD
            _edit_notebook(folder / first, lambda nb: setattr(_first_answer_cell(nb), "source",
                                                              _first_answer_cell(nb).source + extra))
    return list(kinds)


def _has_answer(path: Path) -> bool:
    import nbformat

    try:
        _first_answer_cell(nbformat.read(path, as_version=4))
        return True
    except ValueError:
        return False


def cells(db: Path, assignment: str) -> dict[str, dict[tuple[str, str], float | None]]:
    """Every hand-in's autograded score per (notebook, grade id), from an nbgrader gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(db)) as gb:
        return {s.student.id: {(nb.name, g.name): g.auto_score for nb in s.notebooks for g in nb.grades}
                for s in gb.assignment_submissions(assignment)}


@dataclass
class Comparison:
    course: str
    assignment: str
    equal_cells: int = 0
    all_cells: int = 0
    stock_s: float = 0.0
    ours_s: float = 0.0
    differing: list[str] = field(default_factory=list)   # "kind notebook/grade_id: stock X, ours Y"
    stock_totals: dict[str, float] = field(default_factory=dict)   # hand-in -> stock's autograded points

    def row(self) -> str:
        return (f"| {self.course} | {self.assignment} | {self.equal_cells}/{self.all_cells} | "
                f"{self.stock_s:.1f} | {self.ours_s:.1f} |")


def compare(course: str, assignment: str, work: Path, kinds: tuple[str, ...] = KINDS,
            cell_timeout: int = 30, stock_timeout: int | None = None, grader: Path = REPO) -> Comparison:
    """Grade ``kinds`` of hand-ins of one assignment with stock nbgrader and with course-grade (the
    checkout at ``grader``: this one, or another to measure it before a change)."""
    stock = work / "stock"
    release = stock_course(stock, course, assignment)
    if stock_timeout is not None:
        with open(stock / "nbgrader_config.py", "a") as f:
            f.write(f"c.Execute.timeout = {stock_timeout}\n")
    submitted = work / "submitted"
    ids = build_handins(course, assignment, release, submitted, kinds)
    shutil.copytree(submitted, stock / "submitted", dirs_exist_ok=True)
    t0 = time.perf_counter()
    _nbgrader(stock, "autograde", assignment, "--force")
    stock_s = time.perf_counter() - t0
    results = work / "results"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "autograder", "autograde", str(submitted), "--out", str(results),
                           "--source", str(COURSES / course / "source"), "--assignment", assignment,
                           "--cell-timeout", str(cell_timeout), "--no-progress"],
                          cwd=grader, env={**os.environ, "PYTHONPATH": str(grader)}, capture_output=True, text=True,
                          timeout=3600)
    ours_s = time.perf_counter() - t0
    theirs = cells(stock / "gradebook.db", assignment)
    ours = cells(results / "gradebook.db", assignment) if (results / "gradebook.db").is_file() else {}
    out = Comparison(course, assignment, stock_s=stock_s, ours_s=ours_s)
    for sid in ids:
        out.stock_totals[sid] = sum(v or 0 for v in theirs.get(sid, {}).values())
        for key, score in sorted(theirs.get(sid, {}).items()):
            out.all_cells += 1
            mine = ours.get(sid, {}).get(key, "not graded")
            if mine == score:
                out.equal_cells += 1
            else:
                out.differing.append(f"{sid} {key[0]}/{key[1]}: stock {score}, ours {mine}")
    if proc.returncode != 0:
        out.differing.append(f"course-grade exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--course", action="append", help="a folder of tests/files/real_courses (default: all)")
    parser.add_argument("--assignment", action="append", help="only these assignments")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"hand-ins to build (default: {','.join(KINDS)})")
    parser.add_argument("--write", metavar="MD", help="write the figures to this Markdown page")
    parser.add_argument("--grader", default=str(REPO), help="the checkout whose course-grade runs (default: this one)")
    parser.add_argument("--label", default="", help="a line for the page saying what was measured (the branch)")
    args = parser.parse_args(argv)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    rows: list[Comparison] = []
    for course in args.course or all_courses():
        for assignment in course_info(course)["assignments"]:
            if args.assignment and assignment not in args.assignment:
                continue
            with tempfile.TemporaryDirectory(prefix=f"real-{course}-") as tmp:
                row = compare(course, assignment, Path(tmp), kinds, grader=Path(args.grader).resolve())
            rows.append(row)
            print(row.row(), " stock points:", row.stock_totals, flush=True)
            for line in row.differing:
                print("    differs:", line, flush=True)
    equal, total = sum(r.equal_cells for r in rows), sum(r.all_cells for r in rows)
    stock_s, ours_s = sum(r.stock_s for r in rows), sum(r.ours_s for r in rows)
    handins = len(rows) * len(kinds)
    agreeing = handins - len({(r.course, r.assignment, d.split()[0]) for r in rows for d in r.differing})
    summary = (f"{equal}/{total} cells equal; {agreeing}/{handins} hand-ins equal in every cell; "
               f"stock {stock_s:.1f} s, course-grade {ours_s:.1f} s")
    print(summary)
    if args.write:
        page = Path(args.write)
        lines = [f"- {args.label or 'this run'} ({time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}, "
                 f"{os.cpu_count()} CPUs): **{summary}**", "",
                 "| course | assignment | equal cells / all | stock s | course-grade s |", "|---|---|---|---|---|",
                 *[r.row() for r in rows], ""]
        for r in rows:
            lines += [f"  - {r.course}/{r.assignment} differs: {d}" for d in r.differing]
        with page.open("a") as f:
            f.write("\n".join(lines) + "\n\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
