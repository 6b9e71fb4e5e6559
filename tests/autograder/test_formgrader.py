"""Hand grading in nbgrader's own formgrader, in Chromium, on a folder ``course-grade autograde`` wrote.

Three students of the example class are graded; the instructor's JupyterLab is started in the
results folder (``cd results && jupyter lab``, as the README says) and formgrader must list all three
as handed in and graded (nbgrader counts ``submitted/<id>/<assignment>/`` folders). A score and two
comments are then typed into formgrader's own boxes for one student, and ``course-grade export``
must carry them into grades.json, grades.csv, that student's Gradescope JSON and their feedback page,
read in Chromium. The server is started by ``course-grade formgrader``'s command line (as root it adds
``--allow-root``), and the one answer to grade by hand must be reachable from the first screen.
Screenshots: test-artifacts/browser/formgrader-*.png, feedback-hand-graded.png.
"""

from __future__ import annotations

import csv
import json
import shutil
import time
from pathlib import Path

import pytest

from autograder.source.assignment import load_source
from lessons.l14_04.examples import this_assignment

ASSIGNMENT = "l14-04-model-memory"
from autograder.publish.gradebook import HandComments, manual_comments, manual_scores

REPO = Path(__file__).resolve().parents[2]
STUDENTS = ("reference", "blank", "gb_gib_mixup")
VIEWPORT = (1400, 1000)
#: formgrader's page for one submission: 61,673 px with the restored hidden tests (issue 34); without them,
#: 30,959 px (measured: 1400 x 1000 viewport, Debian Chromium); the bound leaves room for the lesson's edits.
PAGE_HEIGHT_MAX = 40_000
WRITTEN_COMMENT = "Names all five pools; say which two grow with requests."
OTHER_COMMENT = "Show the factor 2 for K and V."


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from autograder.batch.autograde import main as autograde

    base = tmp_path_factory.mktemp("formgrader")
    for sid in STUDENTS:
        shutil.copytree(REPO / "examples" / "submissions" / sid, base / "submitted" / sid)
    batch = autograde(base / "submitted", out=base / "results", workers=2, progress=False)
    assert all(r.status == "graded" for r in batch.students.values()), batch.counts()
    return base


def test_every_graded_submission_is_in_submitted_as_handed_in(graded):
    results = graded / "results"
    for sid in STUDENTS:
        folder = results / "submitted" / sid / ASSIGNMENT
        handed_in = graded / "submitted" / sid / ASSIGNMENT
        assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in handed_in.iterdir())
        for p in folder.iterdir():
            assert p.read_bytes() == (handed_in / p.name).read_bytes()
        assert not (folder / "timestamp.txt").exists(), "formgrader would compare it with the gradebook's (none)"


@pytest.mark.browser
def test_formgrader_lists_every_submission_and_its_comments_reach_the_exports(graded):
    from browser_support import ARTIFACTS, JupyterLab, chromium_page, playwright_module

    sync_api = playwright_module()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    results, a = graded / "results", this_assignment()
    lab = JupyterLab(results, graded / "home", ARTIFACTS / "formgrader.log", formgrader=True)
    try:
        lab.wait_ready(120)
        with chromium_page(sync_api, graded / "chromium-profile", viewport=VIEWPORT) as page:
            page.goto(lab.url("formgrader"))
            row = page.locator("tr", has_text=ASSIGNMENT)
            row.wait_for(timeout=60_000)
            page.screenshot(path=str(ARTIFACTS / "formgrader-assignments.png"))
            headers = [h.strip() for h in page.locator("thead th").all_inner_texts()]
            cells = [c.strip() for c in row.locator("td").all_inner_texts()]
            assert cells[headers.index("# Submissions")] == str(len(STUDENTS)), dict(zip(headers, cells))

            page.goto(lab.url(f"formgrader/gradebook/{ASSIGNMENT}/{Path(a.notebook_name).stem}"))
            listed = page.locator("tbody tr")
            page.wait_for_function("n => document.querySelectorAll('tbody tr td a').length >= n",
                                   arg=len(STUDENTS), timeout=30_000)
            page.get_by_text("Show All Names").click()      # formgrader hides names behind "Submission #n"
            listed.locator("td a >> visible=true", has_text="reference").wait_for(timeout=10_000)
            names = sorted(t.strip() for t in listed.locator("td a >> visible=true").all_inner_texts() if t.strip())
            page.screenshot(path=str(ARTIFACTS / "formgrader-submissions.png"))
            assert names == sorted(STUDENTS), names

            listed.locator("td a >> visible=true", has_text="reference").click()
            written = page.locator("#explain_written")
            written.wait_for(timeout=60_000)
            spec = load_source(a)
            page.wait_for_load_state("networkidle")
            # The hand-graded answer is easy to reach (issue 34): no hidden-test code on the page (it was
            # 2,039 lines, a 61,673 px page with the answer 98% down), and a link in the first screen
            # that brings its score box into view.
            text = page.locator("body").inner_text()
            assert "_course_hidden" not in text and "def _course" not in text, "hidden-test code on the page"
            height = page.evaluate("document.documentElement.scrollHeight")
            print(f"formgrader submission page: {height} px")
            page.evaluate("window.scrollTo(0, 0)")
            link = page.get_by_role("link", name=f"{spec.manual[0].grade_id} (3 points)")
            box = link.bounding_box()
            assert box is not None and box["y"] + box["height"] <= VIEWPORT[1], (box, height)
            page.screenshot(path=str(ARTIFACTS / "formgrader-top.png"))
            link.click()
            page.wait_for_function("() => { const r = document.getElementById('explain_written')"
                                   ".getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight; }",
                                   timeout=10_000)
            page.screenshot(path=str(ARTIFACTS / "formgrader-after-link.png"))
            assert height < PAGE_HEIGHT_MAX, f"the submission page is {height} px"

            def comments() -> HandComments:
                return manual_comments(results, a, spec).get("reference", HandComments())

            def until(done, what: str) -> None:
                # formgrader saves a box when it loses focus, asynchronously: wait for each save to land
                # before the next box (a box typed while the last save is in flight can be lost)
                deadline = time.monotonic() + 30
                while not done():
                    assert time.monotonic() < deadline, f"formgrader never saved {what}"
                    time.sleep(0.3)

            page.wait_for_load_state("networkidle")   # formgrader binds its save handlers once its models load
            page.locator(f"#{spec.manual[0].grade_id}-comment").fill(WRITTEN_COMMENT)
            page.keyboard.press("Tab")
            until(lambda: comments().written == WRITTEN_COMMENT, "the written answer's comment")
            page.locator("#answer_kv_cache-comment").fill(OTHER_COMMENT)
            page.keyboard.press("Tab")
            until(lambda: comments().cells.get("answer_kv_cache") == OTHER_COMMENT, "the other comment")
            written.fill("2")
            page.keyboard.press("Tab")
            until(lambda: manual_scores(results, a, spec).get("reference") == 2.0, "the score")
            written.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "formgrader-written-answer.png"))
    finally:
        lab.stop()

    from autograder.publish.export import main as export
    export(results)
    # what the learner reads: the written answer with its points and the comment typed in formgrader
    with chromium_page(sync_api, graded / "chromium-profile-learner") as page:
        page.goto((results / "feedback" / "reference" / ASSIGNMENT / f"{ASSIGNMENT}.html").as_uri())
        answer = page.locator(f"#{spec.manual[0].grade_id}")
        answer.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "feedback-hand-graded.png"))
        shown = answer.inner_text()
        assert "Graded by hand: 2 / 3" in shown and WRITTEN_COMMENT in shown, shown
        head = page.locator("header").inner_text()
        assert "not included above" not in head and "Graded by hand: 2 / 3" in head and "Total: 48 / 49" in head, head
        other = page.locator("#answer_kv_cache").inner_text()
        assert OTHER_COMMENT in other, other
    grades = json.loads((results / "grades.json").read_text())["students"]["reference"]
    assert (grades["manual_score"], grades["total_score"], grades["needs_manual_grading"]) == (2.0, 48.0, False)
    rows = {r["student_id"]: r for r in csv.DictReader((results / "grades.csv").open())}
    assert rows["reference"]["manual_score"] == "2.0" and rows["reference"]["total_score"] == "48.0"
    assert rows["reference"]["comments"] == (f"written answer: {WRITTEN_COMMENT}\n"
                                             f"answer_kv_cache: {OTHER_COMMENT}")
    # blank handed the written answer back as released: nbgrader's "No response" is 0, not "to grade"
    assert rows["blank"]["comments"] == "" and rows["blank"]["manual_score"] == "0.0"
    data = json.loads((results / "gradescope" / "reference.json").read_text())
    written = data["tests"][-1]
    assert written["score"] == 2.0 and written["max_score"] == 3.0 and WRITTEN_COMMENT in written["output"]
    assert OTHER_COMMENT in data["output"] and data["score"] == 48.0 == sum(t["score"] for t in data["tests"])



def test_formgrader_verb_refuses_a_folder_autograde_did_not_write(tmp_path, capsys):
    from autograder.cli import main

    assert main(["formgrader", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"course-grade formgrader: {tmp_path} has no gradebook.db; run `course-grade autograde "
                   f"SUBMITTED_DIR --out {tmp_path}` first"]


@pytest.mark.parametrize("euid, added", [(0, True), (1000, False)])
def test_formgrader_command_adds_allow_root_for_root_only(euid, added):
    # JupyterLab started by root without --allow-root exits at once ("Running as root is not recommended")
    from autograder.publish.formgrader import command

    argv, notes = command("results", euid=euid)
    assert ("--ServerApp.allow_root=True" in argv) is added and bool(notes) is added
    assert "--ServerApp.root_dir=results" in argv and "--ServerApp.default_url=/formgrader" in argv
