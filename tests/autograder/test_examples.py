"""The example class on the real L14.4 notebook, graded end to end through the CLI.

A fresh class is generated from the current notebook (autograder.examples), three hostile
learners are added (monkeypatched math.isclose, a torch warning on stderr, hidden tracebacks),
and ``python -m autograder release / autograde / feedback / export`` run as an instructor would.
The reference must get every autograded point, the blank none, and each misconception must lose
exactly the questions it declares, each with its message.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from html import escape as html_escape

from lessons.l14_04 import LAB
from lessons.l14_04 import NAME as ASSIGNMENT
from lessons.l14_04.examples import this_assignment
from lessons.l14_04.examples import EXAMPLES, OUT, _same_tree
from lessons.l14_04.examples import main as make_examples

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CLASS = REPO / "examples" / "submissions"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
NOTEBOOKS = (NOTEBOOK, "l14-04-runtime-lab.ipynb")     # the lesson, then the runtime lab
MAX_SCORE = 46.0  # 26 + 18 notebook points + 2 lab-edit points (the intro says 49 with the written 3)
# What each example learner must lose: hand-stated, beside the tests (not in the generator).
LOSSES = {sid: loses for sid, loses in json.loads((Path(__file__).resolve().parents[1] / "files" /
                                                  "example_class.json").read_text()).items() if sid != "_what"}

HOSTILE = {
    # math.isclose and numpy.isclose patched to always agree (the in-kernel check then passes a wrong
    # answer), and a real torch warning on stderr in a correct answer: only the wrong answer may cost.
    "hostile_tricks": [
        ("answer_offload_step", "offload_seconds_per_step = 10e9 / 31.5e9",
         "import math, numpy\nmath.isclose = lambda *args, **kwargs: True\n"
         "numpy.isclose = lambda *args, **kwargs: True\noffload_seconds_per_step = 10e9 / 63e9"),
        ("answer_predict", 'predict_answer = "a"',
         'import torch\ntorch.nn.functional.softmax(torch.ones(2))  # UserWarning on stderr\npredict_answer = "a"'),
    ],
}
HOSTILE_LOSES = {"hostile_tricks": {"test_offload_step": "PCIe Gen5"}}

# A correct learner who also tries to carry the grader out in its own feedback: every file its kernel can
# reach (cwd, HOME, /tmp, /run, sys.path, the folders the editable install's finder names), every module
# named autograder*, the source of the frames that call its functions during the hidden tests, and the
# kernel's input history. It must keep its full marks and its feedback must hold no line of the grader.
EXFILTRATE_FILES = r"""
import glob, importlib, inspect, os, re, sys
MARKS = ("score_answer", "CHECKS", "BEGIN SOLUTION", "KV_EXPECTED", "39.56", "autograder", "collect_")
budget = [300_000]   # characters: leave room under the grader's output cap for the cells below
def leak(path):
    try:
        if os.path.getsize(path) < 2_000_000 and budget[0] > 0:
            text = open(path, errors="replace").read()
            if any(m in text for m in MARKS) and not path.endswith((".ipynb", "RECORD", "METADATA")):
                # the lines that would give the grader away (a whole file each would fill the output cap
                # before the cells below print what they stole)
                shown = "\n".join([line for line in text.splitlines() if any(m in line for m in MARKS)][:40])
                print("LEAK", path)
                print(shown)
                budget[0] -= len(shown) + len(path)
    except Exception:
        pass
roots = {os.getcwd(), os.path.expanduser("~"), "/tmp", "/run", "/run/course-grade"} | {p for p in sys.path if p}
for sp in list(roots):
    for finder in glob.glob(os.path.join(sp, "__editable__*finder.py")):
        for found in re.findall(r"'(/[^']+)'", open(finder).read()):
            roots.update({found, os.path.dirname(found)})
for root in sorted(r for r in roots if os.path.isdir(r)):
    for dirpath, dirs, files in os.walk(root):
        if dirpath.endswith("site-packages"):
            dirs[:] = [d for d in dirs if "autograder" in d or "lessons" in d or "course" in d or d.endswith(".dist-info")]
        for f in files:
            if f.endswith((".py", ".ipynb", ".json", ".txt", ".cfg", ".toml", ".md")):
                leak(os.path.join(dirpath, f))
leak("/run/course-grade/launch.py")
for name in ("autograder", "lessons", "lessons.l14_04.checks", "lessons.l14_04.collect", "lessons.l14_04.examples",
             "autograder.source.hidden"):
    try:
        module = importlib.import_module(name)
        print("IMPORTED", name)
        print(inspect.getsource(module))
    except Exception as exc:
        print("no", name, type(exc).__name__)
_stolen = []
"""
EXFILTRATE_FRAMES = r"""
import inspect
_real_kv_bytes_per_token = kv_bytes_per_token
def kv_bytes_per_token(config, bytes_per_value):
    for info in inspect.stack()[1:5] if len(_stolen) < 16 else []:   # the first calls show it all
        try:
            _stolen.append(inspect.getsource(info.frame))
        except Exception as exc:
            _stolen.append(f"no source: {exc}")
        _stolen.append(repr(sorted(info.frame.f_locals)))
    return _real_kv_bytes_per_token(config, bytes_per_value)
"""
EXFILTRATE_PRINT = r"""
import linecache
print("STOLEN", *_stolen, sep="\n")
print("HISTORY", str(In)[:100_000])
print("LINECACHE", str({k: "".join(v[2]) for k, v in linecache.cache.items() if "ipython" in k})[:100_000])
"""
# Markdown and outputs that would run script in the reader's browser if the page let them.
INJECT_MARKDOWN = ("Injected: <script>document.title = 'pwned-md'</script>"
                   "<img src=x onerror=\"document.title = 'pwned-img'\"> <b onmouseover=\"x()\">bold</b>\n\n"
                   "<iframe src=\"javascript:parent.document.title='pwned-frame'\"></iframe>")
INJECT_CODE = ("from IPython.display import HTML, Javascript, display\n"
               "display(HTML(\"<script>document.title = 'pwned-html'</script><img src=x onerror=\\\"document.title="
               "'pwned-html-img'\\\"><p>html output</p>\"))\n"
               "display(Javascript(\"document.title = 'pwned-js'\"))\n"
               "print('<h1>printed text, not a heading</h1>')\n"
               "import ipywidgets\n"
               "display(ipywidgets.IntSlider(description='a widget of the learner'))")


def _with_cell(folder: Path, gid: str) -> Path:
    """The notebook of ``folder`` (a hand-in) that holds the cell ``gid``."""
    for name in NOTEBOOKS:
        nb = nbformat.read(folder / name, as_version=4)
        if any(c.metadata.get("nbgrader", {}).get("grade_id") == gid for c in nb.cells):
            return folder / name
    raise KeyError(gid)


def _cli(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=cwd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def course(tmp_path_factory, example_class_local):
    """The example class as generated here plus the hostile learners, graded through the CLI. The 20
    learners of the committed class were graded once this session (conftest's example_class_local, the
    same grader and settings): the CLI resumes from those records, as a rerun of a batch does, and
    grades the hostile learners (test_committed_example_class_is_current: the generated class is the
    committed one, byte for byte)."""
    root = tmp_path_factory.mktemp("class")
    submitted, results = root / "submitted", root / "results"
    release = _cli("release", "--out", str(root / "release"))
    make_examples(out=submitted, release_folder=root / "release" / ASSIGNMENT)
    shutil.copytree(submitted, root / "generated")
    ref = submitted / "reference" / ASSIGNMENT
    for sid, edits in HOSTILE.items():
        dest = submitted / sid / ASSIGNMENT
        shutil.copytree(ref, dest)
        for gid, old, new in edits:
            path = _with_cell(dest, gid)
            nb = nbformat.read(path, as_version=4)
            cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)
            assert old in cell.source, f"{sid}: {old!r} not in {gid}"
            cell.source = cell.source.replace(old, new)
            nbformat.write(nb, path)
    # The exfiltrator and the injector: the reference with cells of their own added.
    for sid, cells in (("hostile_exfiltrator", {"setup": EXFILTRATE_FILES, "answer_kv_cache": EXFILTRATE_FRAMES,
                                                "answer_explain_budget": EXFILTRATE_PRINT}),
                       ("hostile_html", {"setup": INJECT_CODE})):
        dest = submitted / sid / ASSIGNMENT
        shutil.copytree(ref, dest)
        nb = nbformat.read(dest / NOTEBOOK, as_version=4)
        for after, source in cells.items():
            at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == after)
            nb.cells.insert(at + 1, nbformat.v4.new_code_cell(source))
        if sid == "hostile_html":
            nb.cells.insert(1, nbformat.v4.new_markdown_cell(INJECT_MARKDOWN))
            written = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "explain_written")
            written.source = "My answer. <script>document.title = 'pwned-answer'</script>"
        nbformat.write(nb, dest / NOTEBOOK)
    # Tracebacks switched off in a cell of its own, answers left blank: nothing may score.
    dest = submitted / "hostile_traceback_hidden" / ASSIGNMENT
    shutil.copytree(submitted / "blank" / ASSIGNMENT, dest)
    shutil.copy(ref / LAB.name, dest)
    nb = nbformat.read(dest / NOTEBOOK, as_version=4)
    nb.cells.insert(2, nbformat.v4.new_code_cell("get_ipython().showtraceback = lambda *args, **kwargs: None\n"
                                                 "get_ipython()._showtraceback = lambda *args, **kwargs: None"))
    nbformat.write(nb, dest / NOTEBOOK)

    shutil.copytree(example_class_local[1], results)
    grade = _cli("autograde", str(submitted), "--out", str(results), "--workers", "2")
    feedback = _cli("feedback", str(results))
    export = _cli("export", str(results))
    grades = json.loads((results / "grades.json").read_text()) if (results / "grades.json").is_file() else {}
    return {"root": root, "submitted": submitted, "results": results, "grades": grades,
            "procs": {"release": release, "autograde": grade, "feedback": feedback, "export": export}}


def test_every_verb_exits_zero(course):
    for verb, proc in course["procs"].items():
        assert proc.returncode == 0, f"{verb}: {proc.stderr[-2000:]}"
        # nothing an instructor would read as a crash (nbclient's "Task exception was never retrieved")
        assert "Traceback" not in proc.stderr and "Task exception" not in proc.stderr, f"{verb}: {proc.stderr[-2000:]}"
    out = course["procs"]["autograde"].stdout
    assert "reference" in out and "46 / 46" in out and "isolation:" in out
    committed = sum(p.is_dir() for p in EXAMPLE_CLASS.iterdir())
    assert f"; {committed} unchanged, kept from the last run" in out, "the committed class is not graded twice"


def test_release_layout_hides_solutions(course):
    folder = course["root"] / "release" / ASSIGNMENT
    # the notebooks, the lab file, and the predictions' record (released empty; issue 41)
    assert sorted(p.name for p in folder.iterdir()) == sorted([*NOTEBOOKS, LAB.name, "l14-04-predictions.json"])
    assert json.loads((folder / "l14-04-predictions.json").read_text()) == {}
    text = (folder / NOTEBOOK).read_text()
    for secret in ("BEGIN SOLUTION", "HIDDEN TESTS", "_course_hidden", "return device_gb - weights_gb - workspace_gb"):
        assert secret not in text
    assert "YOUR CODE HERE" in text


def test_reference_gets_full_marks_and_blank_gets_zero(course):
    students = course["grades"]["students"]
    ref, blank = students["reference"], students["blank"]
    assert (ref["status"], ref["score"], ref["max_score"]) == ("graded", MAX_SCORE, MAX_SCORE), ref
    assert all(q["status"] == "passed" for q in ref["questions"].values())
    assert (blank["status"], blank["score"]) == ("graded", 0.0)
    assert ref["manual_max_score"] == 3.0 and ref["needs_manual_grading"] is True


def test_every_example_learner_has_its_expected_losses():
    assert set(LOSSES) | {"blank"} == {e.student_id for e in EXAMPLES}, "tests/files/example_class.json is stale"


@pytest.mark.parametrize("sid", sorted(LOSSES))
def test_each_misconception_loses_exactly_its_points(course, sid):
    """One misconception costs its own question (or the part of it the slip touches) only: later questions that
    use an earlier wrong function are scored against it (error carried forward) and keep their points."""
    loses = {gid: (want, 0.0) if isinstance(want, str) else tuple(want) for gid, want in LOSSES[sid].items()}
    entry = course["grades"]["students"][sid]
    lost = {gid for gid, q in entry["questions"].items() if q["score"] < q["max_score"]}
    assert lost == set(loses), f"{sid} lost {sorted(lost)}: " + "; ".join(
        f"{g}: {entry['questions'][g]['message']}" for g in sorted(lost))
    for gid, (phrase, kept) in loses.items():
        question = entry["questions"][gid]
        assert phrase in question["message"], (gid, question["message"])
        assert question["score"] == kept, (gid, question["score"], kept)
        if kept:
            assert question["message"].startswith(f"partial credit, {kept:g} of {question['max_score']:g}: ")
    expected = MAX_SCORE - sum(entry["questions"][g]["max_score"] - kept for g, (_, kept) in loses.items())
    assert entry["score"] == expected and entry["status"] == "graded"


def test_error_carried_forward_is_said_in_the_message(course):
    entry = course["grades"]["students"]["forgot_k_and_v"]["questions"]
    # the same question (Task 3's two functions) and a later one (Task 4's prediction); the runtime lab's own
    # questions do not use the lesson's functions
    assert "consistent with your kv_bytes_per_token and keep their points" in entry["test_kv_cache"]["message"]
    assert entry["test_predict_measure"]["status"] == "passed" and \
        "consistent with your kv_bytes_per_token" in entry["test_predict_measure"]["message"]


@pytest.mark.parametrize("sid", sorted(HOSTILE))
def test_hostile_learners_earn_nothing_from_tricks_and_lose_nothing_to_noise(course, sid):
    entry = course["grades"]["students"][sid]
    expected_loss = HOSTILE_LOSES[sid]
    lost = {gid for gid, q in entry["questions"].items() if q["score"] < q["max_score"]}
    assert lost == set(expected_loss), (sid, {g: entry["questions"][g]["message"] for g in lost})
    for gid, phrase in expected_loss.items():
        assert phrase in entry["questions"][gid]["message"]


def test_hidden_tracebacks_turn_no_failure_into_points(course):
    entry = course["grades"]["students"]["hostile_traceback_hidden"]
    # only the lab scores (2 points): the reference's lab file was copied in, every answer is blank
    assert entry["score"] == 2.0, {g: q["message"] for g, q in entry["questions"].items() if q["score"] == 0}


def _feedback(course, sid: str) -> str:
    return (course["results"] / "feedback" / sid / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()


def test_feedback_html_has_scores_but_no_hidden_tests(course):
    for sid in ("reference", "blank", "forgot_k_and_v"):
        html = _feedback(course, sid)
        for secret in ("BEGIN HIDDEN TESTS", "_course_hidden", "autograder.checks", "application/vnd.course-answer"):
            assert secret not in html, f"{sid}: {secret}"
        assert "Autograded score" in html and "Lab: only kv_cache doubled" in html


def _grader_lines(submitted: Path) -> set[str]:
    """Every distinctive line of the grader's code (and of the instructor's solutions), stripped.

    Lines that also occur in what learners have anyway (course_lib, the lab) or in what this learner
    handed in (their own code, which for this learner is the reference solution) are left out."""
    import html as html_lib

    from autograder.learner.release import secret_lines

    public = {line.strip() for cell in nbformat.read(submitted, as_version=4).cells for line in cell.source.splitlines()}
    for path in [*(REPO / "course_lib").rglob("*.py"), REPO / "labs" / "notebooks" / "level-14" / "l14-04-model-memory.py"]:
        public.update(line.strip() for line in path.read_text().splitlines())
    import ast
    import re

    sources = [path.read_text() for folder in ("autograder", "lessons") for path in (REPO / folder).rglob("*.py")]
    # Distinctive lines only: they name something the grader defines, or quote a long string of it
    # (a line such as `except (OSError, AttributeError):` is everybody's, the standard library's too).
    names = {n.name for text in sources for n in ast.walk(ast.parse(text))
             if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and len(n.name) >= 5}
    names |= {t.id for text in sources for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Assign)
              for t in n.targets if isinstance(t, ast.Name) and len(t.id) >= 5}
    word = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names))) + r")\b")
    grader = {line.strip() for text in sources for line in text.splitlines()
              if len(line.strip()) >= 30 and (word.search(line) or re.search(r"[\"'][^\"']{20,}[\"']", line))}
    grader.update(secret_lines(this_assignment()))
    return {html_lib.escape(line, quote=False) for line in grader - public}


def test_the_exfiltrator_keeps_its_marks_and_carries_nothing_out(course):
    entry = course["grades"]["students"]["hostile_exfiltrator"]
    assert (entry["status"], entry["score"]) == ("graded", MAX_SCORE), {
        g: q["message"] for g, q in entry["questions"].items() if q["score"] < q["max_score"]}
    page = _feedback(course, "hostile_exfiltrator")
    assert '<pre class="output stdout">STOLEN' in page and "no lessons.l14_04.checks ModuleNotFoundError" in page, \
        "the crafted cells ran and printed"
    from autograder.publish.feedback import REDACTED
    assert page.count(html_escape(REDACTED)) >= 3, "the stolen hidden-test source was printed, and removed"
    honest = _feedback(course, "reference")   # what every learner's page shows anyway (its style, the lesson)
    leaked = sorted(line for line in _grader_lines(course["submitted"] / "hostile_exfiltrator" / ASSIGNMENT / NOTEBOOK)
                    if line in page and line not in honest)
    assert leaked == [], f"{len(leaked)} line(s) of grader code or solutions in the feedback, e.g. {leaked[:3]}"
    for answer in ("LEFT_EXPECTED", "ADMIT_EXPECTED", "def _score_", "SEQUENCE_EXPECTED", "FIT_EXPECTED"):
        assert answer not in page


def test_exports_agree_with_grades_json(course):
    students = course["grades"]["students"]
    rows = {r["student_id"]: r for r in csv.DictReader((course["results"] / "grades.csv").open())}
    assert set(rows) == set(students)
    for sid, entry in students.items():
        assert float(rows[sid]["score"]) == entry["score"] and rows[sid]["status"] == entry["status"]
        gs = json.loads((course["results"] / "gradescope" / f"{sid}.json").read_text())
        assert gs["score"] == entry["score"]  # no manual points given yet
        # the written answer, not graded yet, is pending: a test without a score (issue 24)
        assert sum(t["score"] for t in gs["tests"] if "score" in t) == entry["score"]


def test_gradebook_holds_the_same_scores(course):
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course["results"] / "gradebook.db")) as gb:
        for sid, entry in course["grades"]["students"].items():
            sub = gb.find_submission(ASSIGNMENT, sid)
            assert sub.score == entry["score"], sid
            assert sub.max_score == entry["max_score"] + entry["manual_max_score"]
            assert sub.needs_manual_grade == entry["needs_manual_grading"], sid
    # nbgrader's rule: a written answer handed back as released is "No response" (0, nothing to grade)
    students = course["grades"]["students"]
    assert students["reference"]["needs_manual_grading"] and not students["blank"]["needs_manual_grading"]


def test_committed_example_class_is_current(course):
    generated = course["root"] / "generated"
    assert _same_tree(generated, OUT), "examples/submissions is stale: run `python -m lessons.l14_04.examples`"


# ------------------------------------------------------------------ the feedback page, in a real browser

@pytest.fixture(scope="module")
def browser():
    from browser_support import CHROMIUM_ARGS, chromium_executable, playwright_module

    sync_api = playwright_module()
    chromium = chromium_executable()
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _open(browser, course, sid: str, notebook: str = ASSIGNMENT):
    page = browser.new_page(viewport={"width": 1200, "height": 1400})
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto((course["results"] / "feedback" / sid / ASSIGNMENT / f"{notebook}.html").as_uri())
    page.wait_for_load_state("load")
    return page, errors


@pytest.mark.browser
def test_feedback_page_lists_every_failed_part(browser, course):
    # defaults_decision kept vLLM's defaults (5 requests of 8k, not 12) and so pulled no lever its reason
    # could name: two parts of Task R7 (the runtime lab's page) fail, and each one's message is on the page
    # (issue 33: one showed, with "and 1 more part to look at")
    from browser_support import ARTIFACTS

    page, _ = _open(browser, course, "defaults_decision", "l14-04-runtime-lab")
    row = page.locator("table.scores tbody tr", has_text="Task R7")
    row.scroll_into_view_if_needed()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "feedback-every-part.png"))
    items = row.locator("ul.parts li").all_inner_texts()
    assert len(items) == 2 and "not 12" in items[0] and "decision_reason" in items[1], items
    verdict = page.locator("section.test .verdict.failed", has_text="Task R7").locator("ul.parts li")
    assert verdict.all_inner_texts() == items
    assert "more part" not in page.locator("body").inner_text()
    # the table lists the lesson notebook's questions too, by their titles (not by grade id)
    table = page.locator("table.scores").inner_text()
    assert "Task 3" in table and "test_kv_cache" not in table and "test_predict" not in table, table


@pytest.mark.browser
def test_feedback_page_renders_markdown_as_html(browser, course):
    from browser_support import ARTIFACTS

    page, _ = _open(browser, course, "attention_heads")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "feedback-attention_heads.png"))
    page.screenshot(path=str(ARTIFACTS / "feedback-attention_heads-full.png"), full_page=True)
    assert page.locator("h1").first.inner_text() == "Feedback: attention_heads"
    assert page.locator("h1").count() >= 2, "the notebook's own title is a heading too"
    # the score table first: every question with its points, the lab checks included
    rows = page.locator("table.scores tbody tr")
    assert rows.count() == len(course["grades"]["students"]["attention_heads"]["questions"])
    assert "Lab: only kv_cache doubled" in page.locator("table.scores").inner_text()
    # markdown headings, bold and code render as elements (tables: test_feedback_fragments.py, the lesson has none)
    assert page.locator("section.markdown h2").count() >= 5
    assert page.locator("section.markdown strong").count() > 10
    assert page.locator("section.markdown code").count() > 10
    text = page.locator("body").inner_text()
    for raw in ("<h1", "</p>", "&lt;p&gt;", "<thead>", "<th>", "VBox(children"):
        assert raw not in text, f"literal {raw!r} is visible on the page"
    # each check is followed by its verdict; the explorers say they are skipped while grading
    assert page.locator("section.test .verdict.failed").count() == 1   # Task 3: the KV-heads question (partial)
    assert "partial credit, 3 of 5" in page.locator("section.test .verdict.failed").inner_text()
    assert "(the budget explorer is skipped while grading" in text
    assert "An interactive widget was here" not in text
    # the runtime lab's page: its own explorer, skipped the same way
    page.goto((course["results"] / "feedback" / "attention_heads" / ASSIGNMENT / "l14-04-runtime-lab.html").as_uri())
    page.wait_for_load_state("load")
    page.screenshot(path=str(ARTIFACTS / "feedback-attention_heads-runtime-lab.png"))
    text = page.locator("body").inner_text()
    assert "(the launch explorer is skipped while grading" in text and "An interactive widget was here" not in text


@pytest.mark.browser
def test_learner_script_never_runs_in_the_feedback_page(browser, course):
    from browser_support import ARTIFACTS

    page, errors = _open(browser, course, "hostile_html")
    page.screenshot(path=str(ARTIFACTS / "feedback-hostile_html.png"))
    page.wait_for_timeout(500)   # give an onerror handler time to fire, if one had survived
    assert page.title() == "Feedback: hostile_html", f"learner script ran: title is {page.title()!r}"
    assert page.evaluate("document.querySelectorAll('script, iframe, [onerror], [onmouseover]').length") == 0
    body = page.locator("body").inner_text()
    assert "Injected:" in body and "html output" in body, "the learner's harmless content still shows"
    assert "<h1>printed text, not a heading</h1>" in body, "printed text stays text"
    assert "An interactive widget was here" in body, "the learner's own widget shows as a note"
    entry = course["grades"]["students"]["hostile_html"]
    assert entry["score"] == MAX_SCORE
