"""The course root a batch makes of RESULTS_DIR: a new one starts from the gradebook an earlier batch
built for the same instructor files (autograder.publish.course.template_path), and that copy is the gradebook
nbgrader's own preprocessors build, row for row."""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from pathlib import Path

from autograder.batch import autograde

from autograder.publish import course
from autograder.batch.autograde import _ensure_course
from lessons.l14_04.examples import this_assignment

L14 = this_assignment()


def _rows(db: Path) -> dict[str, list[str]]:
    """Every table's rows, the random row ids (uuid4 hex) masked."""
    with sqlite3.connect(db) as c:
        tables = [t for (t,) in c.execute("select name from sqlite_master where type='table'")]
        return {t: sorted(re.sub(r"[0-9a-f]{32}", "ID", repr(r)) for r in c.execute(f"select * from {t}"))
                for t in tables}


def test_a_new_results_dir_starts_from_the_template_and_it_is_what_nbgrader_builds(tmp_path, monkeypatch):
    monkeypatch.setenv(course.TEMPLATE_ENV, str(tmp_path / "cache"))
    built, copied = tmp_path / "built", tmp_path / "copied"
    _ensure_course(built, L14)
    templates = list((tmp_path / "cache" / "gradebooks").glob("*.db"))
    assert len(templates) == 1 and (templates[0].stat().st_mode & 0o777) == 0o600

    def no_build(*args):
        raise AssertionError("built again: the template was not used")

    with monkeypatch.context() as m:
        m.setattr(autograde, "build_gradebook", no_build)
        _ensure_course(copied, L14)
    assert _rows(copied / "gradebook.db") == _rows(built / "gradebook.db")
    assert (copied / "source" / L14.name / L14.notebook_name).read_bytes() == L14.notebooks[0].read_bytes()
    assert (copied / "nbgrader_config.py").read_text() == \
        (built / "nbgrader_config.py").read_text().replace(str(built), str(copied))

    monkeypatch.setenv(course.TEMPLATE_ENV, "off")   # the builder's own result, for comparison
    fresh = tmp_path / "fresh"
    _ensure_course(fresh, L14)
    assert _rows(fresh / "gradebook.db") == _rows(built / "gradebook.db")


def test_the_template_key_covers_the_names_and_an_unusable_cache_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv(course.TEMPLATE_ENV, str(tmp_path / "cache"))
    a = L14
    renamed = dataclasses.replace(L14, name="l14-04-renamed")
    assert course.template_path("k", a) != course.template_path("k", renamed) != course.template_path("k2", renamed)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(course.TEMPLATE_ENV, str(tmp_path / "file" / "below"))   # cannot be made
    assert course.template_path("k", a) is None
    _ensure_course(tmp_path / "r", a)   # still a course root, built in place
    assert (tmp_path / "r" / "gradebook.db").is_file()


def test_a_damaged_template_is_rebuilt_and_odd_folder_names_work(tmp_path, monkeypatch):
    monkeypatch.setenv(course.TEMPLATE_ENV, str(tmp_path / "cache"))
    odd = tmp_path / "results # ;'"   # ("?" and "%" are refused: autograde's --out check)
    _ensure_course(odd, L14)
    template, = (tmp_path / "cache" / "gradebooks").glob("*.db")
    expected = _rows(odd / "gradebook.db")
    template.write_bytes(b"not a database" * 100)
    again = tmp_path / "again"
    _ensure_course(again, L14)
    assert _rows(again / "gradebook.db") == expected
    assert _rows(template) == expected, "the damaged template was replaced by the new build"
