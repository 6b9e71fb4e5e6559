"""The README and its pages under docs/: a newcomer's first screen, links that lead somewhere, commands that parse.

The README's first screen holds the two commands (``make demo``, ``make test``), what the package is, and
its three faces (learner, instructor, library), each linking on. The instructor's long sections (Dask and
TLS, Gradescope, how grading works and what stays secret) are pages of their own under ``docs/``, each
linked from the README. Every relative link in these files names a file that exists and, with a
``#fragment``, a heading GitHub makes that anchor for. Every ``course-grade`` line in their ``bash``
blocks is parsed by course-grade's own parser (a flag renamed in the code and not on the page fails here);
the Dask page's lines also run as written in ``tests/autograder/test_readme_dask.py``, and the Gradescope
bundle is built by that command in ``tests/autograder/test_gradescope.py``.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from autograder.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = sorted((REPO / "docs").glob("*.md"))
#: The benchmarks' index and its pages, one per topic (issue 40).
RESULTS_INDEX = REPO / "benchmarks" / "RESULTS.md"
RESULTS_PAGES = sorted((REPO / "benchmarks" / "results").glob("*.md"))
#: The pages the README's instructor sections moved to (issue 34).
INSTRUCTOR_PAGES = ("docs/dask.md", "docs/gradescope.md", "docs/security.md")
#: A first screen: what a browser shows of the README before any scrolling, at most.
FIRST_SCREEN_LINES = 30
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, markup and punctuation dropped, spaces to hyphens.

    >>> slug("What it teaches: budget the whole GPU, pool by pool")
    'what-it-teaches-budget-the-whole-gpu-pool-by-pool'
    >>> slug("The lab edit and hand grading (formgrader)")
    'the-lab-edit-and-hand-grading-formgrader'
    """
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a markdown file (headings inside code blocks are not headings)."""
    found, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"^#{1,6} ", line):
            found.add(slug(line.lstrip("#")))
    return found


def links(path: Path) -> list[str]:
    return LINK.findall(path.read_text(encoding="utf-8"))


def test_the_first_screen_has_the_two_commands_and_the_three_faces():
    first = "\n".join(README.read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN_LINES])
    for command in ("make demo", "make test"):
        assert re.search(rf"^{command}\b", first, re.MULTILINE), f"the README's first screen has no `{command}` line"
    for face, target in (("Learners", "#for-learners"), ("Instructors", "#for-instructors"),
                         ("The library", "#the-command-line")):
        assert re.search(rf"^- \*\*{face}\*\*:.*?\]\({re.escape(target)}\)", first, re.MULTILINE | re.DOTALL), \
            f"the README's first screen does not introduce the {face.lower()} with a link to {target}"


@pytest.mark.parametrize("page", INSTRUCTOR_PAGES)
def test_each_instructor_page_exists_and_is_linked_from_the_readme(page):
    assert (REPO / page).is_file(), f"{page} is missing"
    assert page in links(README), f"the README does not link to {page}"


@pytest.mark.parametrize("path", [README, *PAGES, RESULTS_INDEX, *RESULTS_PAGES],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_leads_somewhere(path):
    broken = []
    for target in links(path):
        if re.match(r"^[a-z]+:", target):            # https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target}: no file {linked}")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading with the anchor #{fragment} in {linked.name}")
    assert not broken, f"{path.relative_to(REPO)}: " + "; ".join(broken)


def test_every_results_page_is_listed_in_the_benchmarks_index():
    listed = {(RESULTS_INDEX.parent / target.partition("#")[0]).resolve() for target in links(RESULTS_INDEX)}
    missing = [p.name for p in RESULTS_PAGES if p.resolve() not in listed]
    assert RESULTS_PAGES, "benchmarks/results/ has no page"
    assert not missing, f"benchmarks/RESULTS.md lists no line for {missing}: add one with the page's headline figure"


def _course_grade_lines(path: Path) -> list[str]:
    """The ``course-grade ...`` command lines of a file's bash blocks: prompt, program path and comment cut."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = line.strip() == "```bash" if not fenced else False
            continue
        found = re.match(r"^(?:\w+\$\s+)?(?:\.venv/bin/)?course-grade\s+(.*?)(?:\s+#.*)?$", line) if fenced else None
        if found:
            lines.append(found.group(1))
    return lines


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: str(p.relative_to(REPO)))
def test_every_course_grade_line_parses(path):
    commands = _course_grade_lines(path)
    if path.name in ("dask.md", "gradescope.md"):
        assert commands, f"{path.relative_to(REPO)} gives no course-grade command"
    parser = build_parser()
    for command in commands:
        argv = shlex.split(re.sub(r"\$(\w+)", "10.0.0.1", command))     # $SCHEDULER_IP and the like
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"{path.relative_to(REPO)}: `course-grade {command}` does not parse (exit {exc.code})")
