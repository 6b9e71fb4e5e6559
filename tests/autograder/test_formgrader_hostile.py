"""A hostile submission opened in nbgrader's formgrader, in Chromium: nothing the learner wrote runs there.

The learner's written answer, a markdown cell of their own, a raw cell and a cell's outputs carry
every way we know to run script in a page nbconvert renders: ``<script>``, ``<img onerror>``,
``<svg onload>``, a ``javascript:`` iframe and link, ``text/html``, ``text/markdown``,
``image/svg+xml``, ``application/javascript`` and ``text/latex`` outputs, a PNG whose "base64" breaks
out of the ``src`` attribute, and cell tags. Each payload, if it ran, would set a ``window`` flag,
write ``pwned-<n>.txt`` through the Jupyter contents API of the instructor's session, and give the
learner full marks on the written answer through formgrader's own API (all three worked on the
grader before its instructor copy, ``autograder/publish/inert.py``). A second student's folder is named
like an HTML tag: it is refused, in one line that names it, and the class is graded all the same.
Screenshot: test-artifacts/browser/formgrader-hostile.png.
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "files" / "autograder"))
import hostile  # noqa: E402

from autograder.source.assignment import load_source  # noqa: E402
from autograder.publish.gradebook import manual_scores  # noqa: E402

HTML_ID = '"><img src=x onerror=window.__pwned_id=1>'


def payload(n: int) -> str:
    """JavaScript that, where it runs, leaves three traces: a flag, a file, and a grade."""
    return ("(async()=>{window.__pwned_%d=1;" % n
            + "const x=(document.cookie.match(/_xsrf=([^;]*)/)||[])[1]||'';"
              "const h={'Content-Type':'application/json','X-XSRFToken':x,'X-CSRFToken':x};"
              "await fetch('/api/contents/pwned-%d.txt',{method:'PUT',headers:h,credentials:'same-origin',"
              "body:JSON.stringify({type:'file',format:'text',content:'pwned'})});" % n
            + "if(window.submission_id){const r=await fetch('/formgrader/api/grades?submission_id='+submission_id,"
              "{headers:h,credentials:'same-origin'});for(const g of await r.json()){if(g.max_score){"
              "g.manual_score=g.max_score;await fetch('/formgrader/api/grade/'+g.id,{method:'PUT',headers:h,"
              "credentials:'same-origin',body:JSON.stringify(g)});}}}})()")


def _attr(js: str) -> str:
    return js.replace("&", "&amp;").replace('"', "&quot;")


def hostile_markdown(first: int) -> str:
    return "\n\n".join([
        "My written answer: the weights are fixed; the KV cache grows with active sequences.",
        f"<script>{payload(first)}</script>",
        f'<img src="x" onerror="{_attr(payload(first + 1))}">',
        f'<svg onload="{_attr(payload(first + 2))}"></svg>',
        f'<iframe src="javascript:{_attr(payload(first + 3))}"></iframe>',
        f"<details open ontoggle=\"{_attr(payload(first + 4))}\"><summary>x</summary></details>",
        "$$\\href{javascript:alert(1)}{x}$$",
        MATH_CSS,
    ])


#: MathJax 3's \unicode[FONT]{...} writes FONT into a style attribute: learner CSS that fetches an outside
#: image and lays a click-anywhere box over the page (issue 34), inline, displayed and as an environment.
OUTSIDE = "http://outside.invalid/beacon.png"
MATH_CSS = (f"Math: $\\unicode[Arial; background: url({OUTSIDE}); position: fixed; inset: 0]{{x41}}$ and "
            f"$$\\unicode[x; background: url({OUTSIDE}?display)]{{x42}}$$ and \\(x^2\\) and "
            "\\begin{equation}y^2\\end{equation}")


def _outputs_cell() -> str:
    """A code cell whose outputs carry script in every type nbconvert's HTML exporter renders."""
    img = '<img src=x onerror="%s">'
    svg = '<svg xmlns="http://www.w3.org/2000/svg" onload="%s"/>'
    lines = ["from IPython.display import display, HTML, Javascript, Markdown",
             "display(HTML(%r))" % (img % _attr(payload(20))),
             "display(Javascript(%r))" % payload(21),
             "display(Markdown(%r))" % (img % _attr(payload(22))),
             "display({'image/svg+xml': %r}, raw=True)" % (svg % _attr(payload(23))),
             "display({'image/png': %r, 'text/plain': 'png'}, raw=True)" % ('"><' + (img % _attr(payload(24)))[1:]),
             "display({'text/latex': %r, 'text/plain': 'latex'}, raw=True)" % "$\\href{javascript:alert(1)}{x}$",
             "display(HTML(%r))" % MATH_CSS,
             "display(Markdown(%r))" % MATH_CSS,
             "display({'text/html': '<b>kept</b>', 'text/plain': 'b'}, raw=True, "
             "metadata={'image/png': {'width': '\"><script>x</script>'}})"]
    return "\n".join(lines) + "\n"


def hostile_notebook() -> nbformat.NotebookNode:
    nb = hostile.learner_notebook()
    written = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "explain_budget")
    written.source = hostile_markdown(1)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(hostile_markdown(10)))
    nb.cells[1].metadata["tags"] = ['"><img src=x onerror=window.__pwned_30=1>']   # no comma: nbformat's rule
    raw = nbformat.v4.new_raw_cell(f"<script>{payload(31)}</script>")
    raw.metadata["raw_mimetype"] = "text/html"
    nb.cells.insert(2, raw)
    hostile.insert_after(nb, "test_kv_per_token", _outputs_cell())
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from autograder.batch.autograde import main as autograde

    base = tmp_path_factory.mktemp("formgrader-hostile")
    submitted, results = base / "submitted", base / "results"
    for sid, nb in (("ref", hostile.learner_notebook()), ("xss", hostile_notebook()), (HTML_ID, hostile_notebook())):
        folder = submitted / sid / hostile.ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / hostile.NOTEBOOK)
        (folder / hostile.LAB.name).write_text(hostile.lab_text(16))
    instructor = base / "instructor" / hostile.NOTEBOOK
    instructor.parent.mkdir()
    shutil.copy(hostile.FIXTURE, instructor)
    assignment = hostile.assignment(instructor)
    batch = autograde(submitted, out=results, workers=2, progress=False, assignment=assignment,
                      cell_timeout=60, notebook_timeout=300)
    return {"base": base, "results": results, "batch": batch, "assignment": assignment}


def test_an_html_student_id_is_refused_in_one_line_and_the_class_is_graded(graded):
    batch = graded["batch"]
    assert sorted(batch.students) == ["ref", "xss"], sorted(batch.students)
    lines = [w for w in batch.warnings if "skipped the folder" in w]
    assert len(lines) == 1 and repr(HTML_ID) in lines[0] and "'\"'" in lines[0] and "\n" not in lines[0], lines
    assert batch.students["xss"].status == "graded" and batch.students["xss"].score == 5 + hostile.LAB_POINTS


def test_the_autograded_copy_carries_no_script(graded):
    """What a renderer turns into HTML (markdown, raw cells, outputs) holds no handler, script or js: URL;
    the code itself is there as text (every renderer escapes source code)."""
    import json

    nb = nbformat.read(graded["results"] / "autograded" / "xss" / hostile.ASSIGNMENT / hostile.NOTEBOOK, as_version=4)
    rendered = [c.source for c in nb.cells if c.cell_type in ("markdown", "raw")]
    rendered += [json.dumps(o) for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    rendered += [json.dumps(c.metadata) for c in nb.cells]
    for text in rendered:
        for needle in ("onerror", "onload", "ontoggle", "<script", "<svg", "<iframe"):
            assert needle not in text.lower(), (needle, text[:300])
        assert not re.search(r"=\\?[\"']?\s*javascript:", text, re.I), text[:300]   # as text it is inert
    formula = next(c.source for c in nb.cells if "href{javascript" in c.source and c.cell_type == "markdown")
    assert "tex2jax_ignore" in formula   # MathJax 2 leaves the learner's formulas as text
    # and no renderer finds math in them at all (MathJax 3 does not read tex2jax_ignore): no $ or \ left
    learner = [c.source for c in nb.cells if c.cell_type == "markdown" and "course-grade-learner-markdown" in c.source]
    learner += [o["data"]["text/html"] for c in nb.cells if c.cell_type == "code" for o in c.outputs
                if "text/html" in (o.get("data") or {})]
    assert len(learner) >= 4 and not [t for t in learner if "$" in t or "\\" in t], learner
    assert sum("unicode[Arial" in t for t in learner) == 4   # the written answer, a markdown cell, two outputs
    mimes = {m for c in nb.cells if c.cell_type == "code" for o in c.outputs for m in (o.get("data") or {})}
    assert not mimes & {"application/javascript", "image/svg+xml", "text/latex", "text/markdown", "image/png"}, mimes
    assert "My written answer" in next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get(
        "grade_id") == "explain_budget")


@pytest.mark.browser
def test_formgrader_runs_nothing_of_a_hostile_submission_and_its_grade_stays_unset(graded):
    from browser_support import ARTIFACTS, JupyterLab, chromium_page, playwright_module

    sync_api = playwright_module()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    results, a = graded["results"], graded["assignment"]
    spec = load_source(a)
    assert manual_scores(results, a, spec).get("xss") is None
    dialogs: list[str] = []
    lab = JupyterLab(results, graded["base"] / "home", ARTIFACTS / "formgrader-hostile.log", formgrader=True)
    try:
        lab.wait_ready(120)
        with chromium_page(sync_api, graded["base"] / "chromium-profile") as page:
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(lab.url("formgrader"))   # logs in: the pages' API calls carry the session's cookie
            page.locator("tr", has_text=hostile.ASSIGNMENT).wait_for(timeout=60_000)
            page.goto(lab.url(f"formgrader/gradebook/{hostile.ASSIGNMENT}/{Path(hostile.NOTEBOOK).stem}"))
            page.wait_for_function("n => document.querySelectorAll('tbody tr td a').length >= n", arg=2,
                                   timeout=60_000)
            page.get_by_text("Show All Names").click()
            page.locator("tbody tr td a >> visible=true", has_text="xss").click()
            page.locator("#explain_budget").wait_for(timeout=60_000)
            page.wait_for_load_state("networkidle")
            page.get_by_text("My written answer").first.wait_for(timeout=10_000)   # the answer is there to grade
            time.sleep(3)   # any payload's fetches would have landed by now
            flags = page.evaluate("Object.keys(window).filter(k => k.startsWith('__pwned'))")
            page.locator("#explain_budget").scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "formgrader-hostile.png"))
            assert "kept" in page.locator("body").inner_text()   # sanitised HTML output still shows
    finally:
        lab.stop()
    assert flags == [] and dialogs == [], (flags, dialogs)
    assert not list(results.glob("pwned-*.txt")), sorted(p.name for p in results.glob("pwned-*"))
    assert manual_scores(results, a, spec).get("xss") is None, "the learner's script graded their own answer"



@pytest.mark.browser
def test_the_instructor_copy_opened_in_jupyterlab_typesets_no_learner_math(graded):
    """Issue 34: opened in JupyterLab (formgrader's "Open live notebook", or the README's ``jupyter lab`` in
    results/), the learner's $...$ was typeset by MathJax 3, and \\unicode[FONT] put learner CSS into the page:
    an outside image fetched, a click-anywhere box. The copy carries no math MathJax finds: no MathJax
    element, no request beyond the server, the formulas shown as text. Screenshot:
    test-artifacts/browser/inert-copy-jupyterlab.png."""
    from browser_support import ARTIFACTS, JupyterLab, chromium_page, playwright_module

    sync_api = playwright_module()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    results = graded["results"]
    notebook = f"autograded/xss/{hostile.ASSIGNMENT}/{hostile.NOTEBOOK}"
    assert (results / notebook).is_file()
    lab = JupyterLab(results, graded["base"] / "home-math", ARTIFACTS / "inert-copy-jupyterlab.log", formgrader=True)
    outside: list[str] = []
    try:
        lab.wait_ready(120)
        host = lab.url("").split("/")[2]
        with chromium_page(sync_api, graded["base"] / "chromium-profile-math") as page:
            page.on("request", lambda r: outside.append(r.url) if r.url.split("/")[2] != host else None)
            page.goto(lab.url(f"lab/tree/{notebook}"))
            page.locator(".jp-Notebook").first.wait_for(timeout=90_000)
            rendered = page.locator(".jp-RenderedHTMLCommon")   # markdown cells and HTML outputs as shown
            rendered.filter(has_text="unicode[Arial").first.wait_for(timeout=60_000)
            rendered.filter(has_text="kept").first.wait_for(timeout=60_000)   # the outputs are rendered too
            time.sleep(3)   # MathJax typesets after rendering
            typeset = page.evaluate("document.querySelectorAll('mjx-container, .MathJax, .MathJax_Display').length")
            styled = page.evaluate("[...document.querySelectorAll('[style]')].filter("
                                   "e => e.getAttribute('style').includes('outside.invalid')).length")
            shown = "\n".join(rendered.all_inner_texts())
            rendered.filter(has_text="My written answer").first.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "inert-copy-jupyterlab.png"))
    finally:
        lab.stop()
    assert (typeset, styled, outside) == (0, 0, []), (typeset, styled, outside)
    assert shown.count("$\\unicode[Arial; background") >= 3, "the learner's formulas show as text"
