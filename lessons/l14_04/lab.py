"""The lab-edit check: only ``active_sequences`` may change (8 -> 16), and the lab must say so.

Three sub-questions, one point each (:data:`~autograder.assignment.LAB_QUESTIONS`):

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
lab at 8) is run once per batch by :func:`lab_baseline`.
"""

from __future__ import annotations

import ast
import hashlib
import math
import sys
from pathlib import Path
from typing import Callable

from course_lib.errors import CourseInputError
from course_lib.labfile import KNOB, edit_knob, knob_assignments, parse_output
from course_lib.scenario import LAB_ACTIVE_SEQUENCES as RELEASED_VALUE
from course_lib.scenario import LAB_EDITED_SEQUENCES as EDITED_VALUE

from autograder.assignment import LAB_QUESTIONS
from autograder.results import FAILED, NOT_RUN, PASSED, QuestionResult
from autograder.sandbox import Sandbox, scratch_dir


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
    except SyntaxError as e:
        return False, False, f"the lab file does not parse (line {e.lineno}: {e.msg})", None
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
    return True, False, f"{KNOB} = {value}: the lab asks for the whole number {EDITED_VALUE}", value


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
    except SyntaxError:
        return None


def run_lab_sandboxed(lab_text: str, lab_name: str, new_sandbox: Callable[[Path], Sandbox], timeout: float = 60) -> dict:
    """Run a lab script in a fresh sandbox (its own scratch copy) and parse what it printed."""
    with new_sandbox(scratch_dir("side")) as sandbox:   # the sandbox removes its folder as it closes
        lab = sandbox.work / lab_name
        lab.write_text(lab_text, encoding="utf-8")
        rc, out, err = sandbox.run([sys.executable, "-P", "-s", str(lab)], cwd=sandbox.work, timeout=timeout)
    parsed = parse_output(out)
    parsed["returncode"] = rc
    parsed["stderr_tail"] = err.strip().splitlines()[-1][:300] if err.strip() else ""
    return parsed


def lab_baseline(released_text: str, lab_name: str, new_sandbox: Callable[[Path], Sandbox]) -> dict:
    """The released lab's output at 8 sequences (what "doubled" and "unchanged" compare with),
    and under ``"known"`` the outputs of the released and the reference-edited programs by
    :func:`program_key`, so that submissions running the very same program need no run of their own.
    """
    from concurrent.futures import ThreadPoolExecutor

    edited_text = edit_knob(released_text, EDITED_VALUE)
    with ThreadPoolExecutor(2) as pool:   # two sandboxes of their own, at once (0.24 -> 0.18 s)
        base, edited = pool.map(lambda text: run_lab_sandboxed(text, lab_name, new_sandbox),
                                (released_text, edited_text))
    if base["returncode"] != 0 or "parts_bytes" not in base or base.get("fits") is not True:
        raise RuntimeError(f"the released lab did not run as expected: {base}")
    known = {program_key(released_text): base, program_key(edited_text): edited}
    out = {k: base[k] for k in ("parts_bytes", "parts_gb", "fits") if k in base}
    out["known"] = known
    return out


def check_lab(submitted: Path | bytes | None, released_text: str, lab_name: str, baseline: dict,
              new_sandbox: Callable[[Path], Sandbox]) -> dict[str, QuestionResult]:
    """The three lab sub-questions for one submission (its lab file, or the bytes the grader read of it)."""
    ids = list(LAB_QUESTIONS)
    results: dict[str, QuestionResult] = {}

    def put(gid: str, ok: bool, message: str, status: str | None = None) -> None:
        pts = LAB_QUESTIONS[gid]
        results[gid] = QuestionResult(score=pts if ok else 0.0, max_score=pts,
                                      status=status or (PASSED if ok else FAILED), message=message)

    if submitted is None or (not isinstance(submitted, bytes) and not submitted.is_file()):
        for gid in ids:
            put(gid, False, f"the lab file {lab_name} is missing from the submission", NOT_RUN)
        return results
    try:
        raw = submitted if isinstance(submitted, bytes) else submitted.read_bytes()
        if len(raw) > 1_000_000:
            raise ValueError("over 1 MB")
        text = raw.decode("utf-8")
    except (OSError, ValueError) as e:
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

    got = baseline.get("known", {}).get(program_key(text)) or run_lab_sandboxed(text, lab_name, new_sandbox)
    if got["returncode"] != 0:
        why = "timed out" if got["returncode"] is None else f"failed: {got['stderr_tail'] or 'no output'}"
        for gid in ids[1:]:
            put(gid, False, f"the edited lab {why}")
        return results
    if got.get("fits") is False:
        put(ids[1], True, "correct")
    elif got.get("fits") is True:
        put(ids[1], False, f"the edited lab reports that the workload fits ({got.get('verdict', '')!r}); "
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
