"""L14.4's lab-edit check, a side check: only ``active_sequences`` may change (8 -> 16), and the lab must say so.

Three sub-questions, two points in all (:data:`QUESTIONS`: the edit 1, its two effects half a point each):

``lab_edit_only_active_sequences``
    The submitted lab, compared with the released one at the AST level (comments and
    spacing are free), differs only in the value of ``active_sequences``, which is 16.
``lab_reports_not_fit``
    Run in a sandbox, the edited lab prints ``verdict: the workload does not fit``.
``lab_only_kv_doubled``
    Its ``parts_bytes`` (else ``parts_gb``) has ``kv_cache`` twice the released lab's and
    every other part unchanged.

The last two run only when the file differs from the release in ``active_sequences``
alone: a lab rewritten elsewhere could print anything. The baseline (the released
lab at 8) is run once per batch (:meth:`LabEdit.prepare`). The notebook reads the lab's
output, so it runs beside the released lab with the one intended edit (8 -> 16,
:meth:`LabEdit.beside`): a wrong edit then costs only the lab points, which
:meth:`LabEdit.score` awards from the learner's own file.
"""

from __future__ import annotations

import ast
import hashlib
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from course_lib.errors import CourseInputError
from course_lib.lessons.l14_04.labfile import KNOB, edit_knob, knob_assignments, parse_output
from course_lib.serving.scenario import LAB_ACTIVE_SEQUENCES as RELEASED_VALUE
from course_lib.serving.scenario import LAB_EDITED_SEQUENCES as EDITED_VALUE

from autograder.contract.lesson import RunResult, Runner, SideCheck
from autograder.contract.results import FAILED, NOT_RUN, PASSED, QuestionResult
from autograder.contract.text import one_line

#: The three sub-questions and their points.
QUESTIONS = {
    "lab_edit_only_active_sequences": 1.0,
    "lab_reports_not_fit": 0.5,
    "lab_only_kv_doubled": 0.5,
}
TITLES = {
    "lab_edit_only_active_sequences": "Lab: only active_sequences changed, to 16",
    "lab_reports_not_fit": "Lab: the edited lab reports that the workload does not fit",
    "lab_only_kv_doubled": "Lab: only kv_cache doubled",
}
#: The largest lab file read (the released lab is ~3 KB).
MAX_LAB_BYTES = 1_000_000


def compare_lab(released: str, submitted: str) -> tuple[bool, bool, str, object]:
    """(only_knob_changed, correct_edit, message, value) from an AST comparison.

    ``only_knob_changed``: the files differ at most in the value of ``active_sequences``.
    ``correct_edit``: that, and the value is the literal 16.
    """
    try:
        want = ast.parse(released)
    except SyntaxError as e:  # pragma: no cover - the instructor's file
        raise ValueError(f"the released lab does not parse: {e}") from None
    try:
        got = ast.parse(submitted)
        return _compare(want, got)
    except SyntaxError as e:
        return False, False, f"the lab file does not parse (line {e.lineno}: {e.msg})", None
    except (RecursionError, MemoryError):   # 20,000 terms in one expression: Python's parser, or ast.dump, recursed
        return False, False, ("the lab file nests too deeply for Python to read it; change only the line "
                              f"'{KNOB} = {RELEASED_VALUE}'"), None


def _compare(want: ast.Module, got: ast.Module) -> tuple[bool, bool, str, object]:
    knobs = knob_assignments(got)
    if len(knobs) != 1:
        return False, False, (f"the lab should assign {KNOB} exactly once at the top level, as released; "
                              f"found {len(knobs)} such lines"), None
    value_node = knobs[0].value
    value = ast.literal_eval(value_node) if isinstance(value_node, ast.Constant) else ast.unparse(value_node)
    knobs[0].value = ast.Constant(RELEASED_VALUE)
    if ast.dump(got) != ast.dump(want):
        where = _first_difference(want, got)
        return False, False, (f"the lab was changed outside {KNOB} ({where}); change only the line "
                              f"'{KNOB} = {RELEASED_VALUE}'"), value
    if type(value) is int and value == EDITED_VALUE:
        return True, True, "correct", value
    if type(value) is int and value == RELEASED_VALUE:
        return True, False, f"{KNOB} is still {RELEASED_VALUE}: the lab asks you to change it to {EDITED_VALUE}", value
    return True, False, f"{KNOB} = {_quoted(value)}: the lab asks for the whole number {EDITED_VALUE}", value


#: The most characters of the learner's lab a message quotes (the README's 200, as autograder.run.scoring.LEARNER_CHARS).
QUOTED_CHARS = 200


def _quoted(text: object) -> str:
    """Learner text as a message quotes it: one line, at most :data:`QUOTED_CHARS` characters.

    >>> len(_quoted("1 + " * 200 + "1"))
    200
    """
    return one_line(text, QUOTED_CHARS)


def _first_difference(want: ast.Module, got: ast.Module) -> str:
    for i, (a, b) in enumerate(zip(want.body, got.body)):
        if ast.dump(a) != ast.dump(b):
            return f"line {getattr(b, 'lineno', '?')}"
    if len(got.body) > len(want.body):
        return f"added code at line {got.body[len(want.body)].lineno}"
    if len(got.body) < len(want.body):
        return "code was removed"
    return "a statement differs"


def program_key(lab_text: str) -> str | None:
    """Same key, same program: the AST without comments or layout (None if it does not parse)."""
    try:
        return hashlib.sha256(ast.dump(ast.parse(lab_text)).encode()).hexdigest()
    except (SyntaxError, RecursionError, MemoryError):
        return None


def run_lab(lab_text: str, lab_name: str, run: Runner) -> dict:
    """Run a lab script in a fresh sandbox (``run``) and parse what it printed."""
    got: RunResult = run(lab_name, lab_text)
    parsed = parse_output(got.stdout)
    parsed["returncode"] = got.returncode
    parsed["stderr_tail"] = got.stderr.strip().splitlines()[-1][:300] if got.stderr.strip() else ""
    return parsed


def lab_baseline(released_text: str, lab_name: str, run: Runner) -> dict:
    """The released lab's output at 8 sequences (what "doubled" and "unchanged" compare with),
    and under ``"known"`` the outputs of the released and the reference-edited programs by
    :func:`program_key`, so that submissions running the very same program need no run of their own.
    """
    edited_text = edit_knob(released_text, EDITED_VALUE)
    with ThreadPoolExecutor(2) as pool:   # two sandboxes of their own, at once (0.24 -> 0.18 s)
        base, edited = pool.map(lambda text: run_lab(text, lab_name, run), (released_text, edited_text))
    if base["returncode"] != 0 or "parts_bytes" not in base or base.get("fits") is not True:
        raise RuntimeError(f"the released lab did not run as expected: {base}")
    known = {program_key(released_text): base, program_key(edited_text): edited}
    out = {k: base[k] for k in ("parts_bytes", "parts_gb", "fits") if k in base}
    out["known"] = known
    return out


def check_lab(submitted: bytes | None, released_text: str, lab_name: str, baseline: dict,
              run: Runner) -> dict[str, QuestionResult]:
    """The three lab sub-questions for one submission (the bytes the grader read of its lab file)."""
    ids = list(QUESTIONS)
    results: dict[str, QuestionResult] = {}

    def put(gid: str, ok: bool, message: str, status: str | None = None) -> None:
        pts = QUESTIONS[gid]
        results[gid] = QuestionResult(score=pts if ok else 0.0, max_score=pts,
                                      status=status or (PASSED if ok else FAILED), message=message)

    if submitted is None:
        for gid in ids:
            put(gid, False, f"the lab file {lab_name} is missing from the submission", NOT_RUN)
        return results
    try:
        if len(submitted) > MAX_LAB_BYTES:
            raise ValueError("over 1 MB")
        text = submitted.decode("utf-8")
    except ValueError as e:
        for gid in ids:
            put(gid, False, f"the lab file cannot be read ({e})", NOT_RUN)
        return results

    only_knob, correct, message, value = compare_lab(released_text, text)
    put(ids[0], correct, message)
    if not only_knob:
        for gid in ids[1:]:
            put(gid, False, "not run: the lab was changed outside active_sequences, so its output proves nothing",
                NOT_RUN)
        return results
    if value == RELEASED_VALUE:
        put(ids[1], False, "the lab is unchanged, and at 8 sequences the workload fits; edit it and rerun")
        put(ids[2], False, "the lab is unchanged, so kv_cache has not doubled")
        return results

    got = baseline.get("known", {}).get(program_key(text)) or run_lab(text, lab_name, run)
    if got["returncode"] != 0:
        why = "timed out" if got["returncode"] is None else f"failed: {_quoted(got['stderr_tail']) or 'no output'}"
        for gid in ids[1:]:
            put(gid, False, f"the edited lab {why}")
        return results
    if got.get("fits") is False:
        put(ids[1], True, "correct")
    elif got.get("fits") is True:
        put(ids[1], False, f"the edited lab reports that the workload fits ({_quoted(repr(got.get('verdict', '')))}); "
                           f"with {EDITED_VALUE} sequences it should not")
    else:
        put(ids[1], False, "the edited lab printed no 'verdict:' line")
    put(ids[2], *_kv_doubled(got, baseline))
    return results


def _kv_doubled(got: dict, baseline: dict) -> tuple[bool, str]:
    for key, exact in (("parts_bytes", True), ("parts_gb", False)):
        parts, base = got.get(key), baseline.get(key)
        if not isinstance(parts, dict) or not isinstance(base, dict):
            continue
        if set(parts) != set(base):
            return False, f"{key} should have the parts {sorted(base)}, got {sorted(parts)}"

        def same(a, b):
            if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
                return False
            return a == b if exact else math.isclose(a, b, rel_tol=2e-3, abs_tol=1e-3)

        changed = [k for k in base if k != "kv_cache" and not same(parts[k], base[k])]
        if changed:
            return False, f"{', '.join(changed)} changed; only kv_cache should grow with active sequences"
        if not same(parts["kv_cache"], 2 * base["kv_cache"]):
            ratio = parts["kv_cache"] / base["kv_cache"] if base["kv_cache"] else float("nan")
            return False, f"kv_cache grew {ratio:.3g}x from the released lab; doubling the sequences doubles it"
        return True, "correct"
    return False, "the edited lab printed no parts_bytes or parts_gb line"


def reference_lab(released_text: str) -> str | None:
    """The released lab with only the intended edit (active_sequences 8 -> 16); None if it has no such knob.

    >>> reference_lab("active_sequences = 8   # knob")
    'active_sequences = 16   # knob'
    >>> reference_lab("n = 8") is None
    True
    """
    try:
        return edit_knob(released_text, EDITED_VALUE)
    except CourseInputError:
        return None


@dataclass(frozen=True)
class LabEdit(SideCheck):
    """The lab-edit check as the engine calls it, for the lab file named ``file``."""

    file: str = "l14-04-model-memory.py"
    name: str = "lab"

    def questions(self) -> dict[str, float]:
        return dict(QUESTIONS)

    def titles(self) -> dict[str, str]:
        return dict(TITLES)

    def prepare(self, released: bytes, run: Runner) -> dict:
        return lab_baseline(released.decode("utf-8"), self.file, run)

    def beside(self, released: bytes, handed_in: bytes | None) -> bytes | None:
        reference = reference_lab(released.decode("utf-8"))
        if reference is not None:
            return reference.encode("utf-8")
        return handed_in

    def score(self, handed_in: bytes | None, released: bytes, prepared: dict, run: Runner) -> dict[str, QuestionResult]:
        return check_lab(handed_in, released.decode("utf-8"), self.file, prepared, run)
