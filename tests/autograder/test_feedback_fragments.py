"""Feedback fragments are rendered once per worker, but a learner's huge cell is not kept."""

from autograder.publish import feedback


def test_short_fragments_are_reused_and_long_ones_are_not_kept():
    feedback.markdown_html.cache_clear()
    feedback.code_html.cache_clear()
    short = "**GB** is 10^9 bytes"
    assert feedback.markdown_html(short) == "<p><strong>GB</strong> is 10^9 bytes</p>\n"
    feedback.markdown_html(short)
    assert feedback.markdown_html.cache_info().hits == 1

    huge = "a learner's cell " * 2_000  # 34,000 characters, over FRAGMENT_CACHE_MAX_CHARS
    assert len(huge) > feedback.FRAGMENT_CACHE_MAX_CHARS
    page = feedback.markdown_html(huge)
    assert page.startswith("<p>a learner's cell a learner's cell"), page[:40]
    assert feedback.markdown_html.cache_info().currsize == 1, "the huge cell must not stay in the cache"
    assert feedback.code_html("x = 1" + " " * 20_000).startswith(
        '<span class="n">x</span> <span class="o">=</span> <span class="mi">1</span>')
    assert feedback.code_html.cache_info().currsize == 0


def _result(sid="amy"):
    from autograder.contract.results import StudentResult
    return StudentResult(student_id=sid, status="graded", score=0.0, max_score=0.0, manual_max_score=0.0,
                         needs_manual_grading=False, questions={})


def test_a_cell_past_the_render_limit_is_plain_escaped_text():
    huge = "<b>" + "*a* " * (feedback.RENDER_MAX_CHARS // 4) + "</b>"
    assert feedback.markdown_html(huge).startswith('<pre class="plain">&lt;b&gt;*a* *a*')
    assert feedback.code_html("x = '<'" + " " * feedback.RENDER_MAX_CHARS) .startswith("x = &#x27;&lt;&#x27;")


def test_the_render_time_limit_holds_in_a_worker_thread(tmp_path):
    # Dask workers grade in threads, where no SIGALRM can end a slow render: the page checks its
    # deadline between cells. 400 cells of 200 KB of Python take minutes to highlight; the limit is 0.5 s.
    import threading
    import time

    import nbformat
    source = "x = [" + "1, " * 66_000 + "]"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for _ in range(400)])
    got, start = {}, time.monotonic()
    worker = threading.Thread(target=lambda: got.update(why=feedback.write_feedback_within(
        tmp_path, _result(), nb, "a1", "a1.ipynb", seconds=0.5)))
    worker.start()
    worker.join(120)
    assert not worker.is_alive() and time.monotonic() - start < 60, "the render ran on past its limit"
    assert "rendering ran past its time limit" in got["why"]
    page = (tmp_path / "feedback" / "amy" / "a1" / "a1.html").read_text()
    assert len(page) < 100_000, "the page shows the scores only (one highlighted cell is over 1 MB)"


def test_course_grade_feedback_never_parses_an_autograded_notebook_no_grader_wrote(tmp_path):
    # A 260 MB notebook once took `course-grade feedback` 223 s and 1.57 GB. One over the cap (here
    # a small notebook padded past it, which JSON allows) is not read: its page shows the scores only.
    import json
    import sys
    from pathlib import Path

    import nbformat

    from autograder.publish.layout import autograded_path, batch_assignment, record_path, write_batch
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "files" / "autograder"))
    import hostile

    a = hostile.assignment()
    write_batch(tmp_path, batch_assignment(a))
    for sid in ("amy", "bob"):
        record_path(tmp_path, sid).parent.mkdir(parents=True, exist_ok=True)
        record_path(tmp_path, sid).write_text(json.dumps(_result(sid).to_json()))
        path = autograded_path(tmp_path, sid, a)
        path.parent.mkdir(parents=True)
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"{sid} wrote this")])
        path.write_text(nbformat.writes(nb))
    with open(autograded_path(tmp_path, "bob", a), "a") as f:
        for _ in range(65):
            f.write(" " * 2**20)   # whitespace after the JSON: a notebook nbformat reads, 65 MiB of it
    done = feedback.main(tmp_path)
    assert done.failed == ["bob"]
    pages = {sid: (tmp_path / "feedback" / sid / a.name / f"{Path(a.notebook_name).stem}.html").read_text()
             for sid in ("amy", "bob")}
    assert "amy wrote this" in pages["amy"] and "bob wrote this" not in pages["bob"]


def test_a_markdown_table_renders_as_a_table_that_survives_the_allow_list():
    """A course's markdown table (the lesson had one until issue 41's trim; the browser test read it there): mistune's
    table plugin, then the sanitizer's allow-list, keep the header and cells as elements, escaped text inside."""
    page = feedback.markdown_html("| dtype | bytes per value |\n|---|---|\n| bf16 | 2 |\n| <b onclick=x()>fp8</b> | 1 |\n")
    assert "<table>" in page and "<th>bytes per value</th>" in page and "<td>bf16</td>" in page, page
    assert "onclick" not in page, page
