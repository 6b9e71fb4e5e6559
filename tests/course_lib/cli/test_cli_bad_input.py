"""Regressions from the fuzzing pass: every refusal it found, as argv -> the phrase the one line must contain.

Each case runs ``course_lib.cli.main`` in process and checks the exact refusal: exit code 2, exactly
one line on stderr naming the value and its bound (or what is valid), no traceback, nothing on
stdout. Then: ``--help`` works for every verb, output paths are checked before any work starts,
the bounds themselves are valid input, and what the fuzzer found in the config reader (the families
branch's) is kept: every one fixed since.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib import bounds as B
from cli_support import run_cli
from course_lib.cli import build_parser

REPO = Path(__file__).resolve().parents[3]
TEN_ELEVEN = str(REPO / "examples" / "traces" / "ten_eleven.jsonl")
DIGITS = "9" * 5000


def run(argv, capsys):
    return run_cli(capsys, *argv)


def check_refusal(rc, out, err, argv, phrase):
    where = f"course-memory {' '.join(map(str, argv))[:120]}"
    assert rc == 2, f"{where}: exit code {rc}, expected 2; stderr: {err}"
    assert "Traceback" not in err, f"{where}: printed a traceback:\n{err}"
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), f"{where}: expected one line on stderr, got {len(lines)}:\n{err}"
    assert phrase in err, f"{where}: the line should contain {phrase!r}:\n{err}"
    assert out == "", f"{where}: a refusal prints nothing on stdout (it comes before any report), got:\n{out[:300]}"


# ------------------------------------------------------------------ files the cases read


def _request(**fields):
    req = {"id": "r0", "arrival_step": 0, "prompt_tokens": 10, "max_new_tokens": 5, "output_tokens": 5}
    req.update(fields)
    return json.dumps(req)


TRACES = {
    "huge_request.jsonl": _request(prompt_tokens=10**9),
    "huge_new_tokens.jsonl": _request(max_new_tokens=10**9, output_tokens=5),
    "context_sum.jsonl": _request(prompt_tokens=B.MAX_CONTEXT_TOKENS, max_new_tokens=1, output_tokens=1),
    "late.jsonl": _request(arrival_step=B.MAX_SIMULATED_STEPS + 1),
    "digits.jsonl": '{"id": "a", "arrival_step": 0, "prompt_tokens": ' + DIGITS + ', "max_new_tokens": 1, "output_tokens": 1}',
    "deep.jsonl": "[" * 100_000,
    "nan.jsonl": _request(prompt_tokens=float("nan")),
    "inf.jsonl": '{"id": "a", "arrival_step": 0, "prompt_tokens": 1e999, "max_new_tokens": 1, "output_tokens": 1}',
    "bool.jsonl": _request(prompt_tokens=True),
    # one request of 3 x 10^6 tokens on a cache that holds it: it would run 3 x 10^6 steps
    "long_run.jsonl": _request(max_new_tokens=3 * 10**6, output_tokens=3 * 10**6),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad-input")
    for name, text in TRACES.items():
        (root / name).write_text(text + "\n", encoding="utf-8")
    (root / "existing.txt").write_text("x", encoding="utf-8")
    (root / "plot.png").mkdir()
    llama = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256}
    (root / "head_dim.json").write_text(json.dumps({**llama, "head_dim": 10**4000}), encoding="utf-8")
    return root


def F(name):
    """A placeholder for a file of the `files` fixture, resolved per test."""
    return ("FILE", name)


# ------------------------------------------------------------------ the table

# (argv, the phrase the one line must contain)
REFUSALS = [
    # huge numbers: sizes (parse_bytes bounds every size at 1 PB) and counts (bounded before int())
    (["budget", "--gpu", "1e400GB"], "--gpu='1e400GB' is above the bound of 1 PB"),
    (["budget", "--gpu", "1e1000000GB"], "--gpu='1e1000000GB' is above the bound of 1 PB"),
    (["budget", "--gpu", "1e5000B"], "--gpu='1e5000B' is above the bound of 1 PB"),
    (["budget", "--gpu", DIGITS], "(5,000 characters) is above the bound of 1 PB"),
    (["budget", "--weights", "1e400GB"], "--weights='1e400GB' is above the bound of 1 PB"),
    (["budget", "--per-sequence", "1001TB"], "--per-sequence='1001TB' is above the bound of 1 PB"),
    (["budget", "--active-sequences", DIGITS], "--active-sequences=<a 5000-digit number> is above the bound 10,000,000"),
    (["budget", "--active-sequences", "-" + DIGITS], "--active-sequences=-<a 5000-digit number> is below the bound 0"),
    (["estimate", "--model", "gpt2", "--params", DIGITS], "--params=<a 5000-digit number> is above the bound 10,000,000,000,000"),
    (["estimate", "--model", "gpt2", "--params", str(B.MAX_PARAMS + 1)], "--params=10000000000001 is above the bound"),
    (["estimate", "--model", "gpt2", "--context-tokens", DIGITS], "--context-tokens=<a 5000-digit number> is above the bound 100,000,000"),
    (["estimate", "--model", "gpt2", "--context-tokens", "1e400"], "--context-tokens='1e400' is not a whole number"),
    (["estimate", "--model", "gpt2", "--gpu", "1e400GB"], "--gpu='1e400GB' is above the bound of 1 PB"),
    (["estimate", "--config", F("head_dim.json")], "head_dim=<a 4001-digit number> is above the bound 10,000,000"),
    (["offload", "--tokens", DIGITS], "--tokens=<a 5000-digit number> is above the bound 100,000,000"),
    (["offload", "--bytes", "1e400GB"], "--bytes='1e400GB' is above the bound of 1 PB"),
    (["offload", "--link", "1e400GB"], "--link='1e400GB' is above the bound of 1 PB"),
    (["offload", "--link", "999B"], "--link='999B' is 999 B/s, below the bound of 1,000 B/s"),
    (["rollout", "--storage", "1B"], "--storage='1B' is 1 B/s, below the bound of 1,000 B/s"),
    (["simulate", "--trace", TEN_ELEVEN, "--gpu", "1e400GB", "--json"], "--gpu='1e400GB' is above the bound of 1 PB"),
    (["simulate", "--trace", TEN_ELEVEN, "--kv-bytes-per-token", DIGITS], "--kv-bytes-per-token=<a 5000-digit number>"),
    # sizes that would exhaust memory or time
    (["trace", "--requests", "1000000000"], "--requests=1000000000 is above the bound 100,000"),
    (["rollout", "--replicas", "100000000"], "--replicas=100000000 is above the bound 100,000"),
    (["simulate", "--trace", TEN_ELEVEN, "--block-size", "1000000000"], "--block-size=1000000000 is above the bound 65,536"),
    (["simulate", "--trace", TEN_ELEVEN, "--max-num-seqs", "100000000"], "--max-num-seqs=100000000 is above the bound"),
    (["simulate", "--trace", TEN_ELEVEN, "--max-wait-steps", "10000000"], "--max-wait-steps=10000000 is above the bound 1,000,000"),
    (["simulate", "--trace", F("huge_request.jsonl")], "line 1: prompt_tokens=1000000000 is above the bound 100,000,000"),
    (["simulate", "--trace", F("huge_new_tokens.jsonl")], "line 1: max_new_tokens=1000000000 is above the bound 100,000,000"),
    (["simulate", "--trace", F("context_sum.jsonl")], "= 100,000,001 tokens is above the bound 100,000,000"),
    (["simulate", "--trace", F("late.jsonl")], "line 1: arrival_step=1000001 is above the bound 1,000,000"),
    (["simulate", "--trace", F("digits.jsonl")], "line 1: holds a number of more than 4,300 digits"),
    (["simulate", "--trace", F("deep.jsonl")], "line 1: nested too deeply to read"),
    (["simulate", "--trace", F("nan.jsonl")], "line 1: prompt_tokens=nan is not a whole number"),
    (["simulate", "--trace", F("inf.jsonl")], "line 1: prompt_tokens=inf is not a whole number"),
    (["simulate", "--trace", F("bool.jsonl")], "line 1: prompt_tokens=True is not a whole number"),
    (["simulate", "--trace", F("long_run.jsonl"), "--kv-bytes-per-token", "1"],
     "the simulation reached step 1,000,000, the most steps it runs here"),
    (["trace", "--requests", "3", "--prompt-max", "100000000", "--max-new-tokens", "1"],
     "--prompt-max=100,000,000 + --max-new-tokens=1 is above the bound 100,000,000"),
    (["trace", "--requests", "3", "--prompt-min", "9", "--prompt-max", "3"], "--prompt-min=9 exceeds --prompt-max=3"),
    (["trace", "--requests", "3", "--seed", str(2**64)], "--seed=18446744073709551616 is above the bound"),
    # output paths, checked before any work
    (["trace", "--requests", "3", "--out", F("")], "is a folder; give a file path inside it"),
    (["trace", "--requests", "3", "--out", "/dev/full"], "--out='/dev/full' is not a regular file"),
    (["trace", "--requests", "3", "--out", "/proc/course-memory-test.jsonl"], "cannot be written"),
    (["trace", "--requests", "3", "--out", F("existing.txt/x.jsonl")], "is a file, not a folder"),
    (["trace", "--requests", "3", "--out", ""], "--out='' is empty"),
    (["simulate", "--trace", TEN_ELEVEN, "--plot", F("")], "has no image suffix; end it in .png, .svg, .pdf"),
    (["simulate", "--trace", TEN_ELEVEN, "--plot", F("plot.png")], "is a folder; give a file path inside it"),
    (["simulate", "--trace", TEN_ELEVEN, "--plot", "/proc/course-memory-test.png"], "cannot be written"),
    (["simulate", "--trace", TEN_ELEVEN, "--plot", "/dev/full"], "has no image suffix"),
    (["rollout", "--plot", F("x.bmp")], "has no image suffix; end it in .png, .svg, .pdf"),
    (["demo", "--out", F("existing.txt")], "is a file, not a folder; give a folder for the plots and results"),
    (["demo", "--out", F("existing.txt/sub")], "is a file, not a folder"),
    (["demo", "--out", "/proc/course-memory-test"], "cannot be written here"),
    (["simulate", "--trace", "/proc/self/mem"], "--trace='/proc/self/mem' cannot be read"),
    (["simulate", "--trace", F("")], "is not a file; give a JSONL trace"),
    (["estimate", "--config", F("")], "is a folder without config.json"),
    (["estimate", "--config", "/dev/null"], "--config='/dev/null' is not a regular file"),
    (["estimate", "--config", "/proc/self/mem"], "--config='/proc/self/mem' cannot be read"),
    # infinities and divisions: every float finite, every rate bounded away from 0
    (["offload", "--efficiency", "1e-320"], "--efficiency=1e-320 is below the bound 0.001"),
    (["offload", "--efficiency", "1e-320", "--json"], "--efficiency=1e-320 is below the bound 0.001"),
    (["offload", "--efficiency", "nan"], "--efficiency=nan is not a finite number"),
    (["offload", "--flops", "5e-324"], "--flops=5e-324 is below the bound 1,000,000"),
    (["offload", "--flops", "5e-324", "--mfu", "5e-324"], "--mfu=5e-324 is below the bound 0.001"),
    (["offload", "--flops", "inf"], "--flops='inf' is not a positive FLOP/s figure"),
    (["rollout", "--drain", "1e308"], "--drain=1e+308 is above the bound 10,000,000"),
    (["rollout", "--device-init", "inf"], "--device-init=inf is not a finite number"),
    (["rollout", "--efficiency", "1e-320"], "--efficiency=1e-320 is below the bound 0.001"),
    (["trace", "--requests", "3", "--arrival-rate", "5e-324"], "--arrival-rate=5e-324 is below the bound 1e-06"),
    (["trace", "--requests", "3", "--mean-output-tokens", "0"], "--mean-output-tokens=0 is below the bound 0"),
    (["simulate", "--trace", TEN_ELEVEN, "--watermark", "1"], "--watermark=1 is above the bound 1"),
    # silent nonsense
    (["estimate", "--model", "gpt2", "--tensor-parallel", "1000000"], "--tensor-parallel=1000000 is above the bound 4,096"),
    (["rollout", "--max-unavailable", "9"], "--max-unavailable=9 exceeds --replicas=4"),
    # the value named as typed
    (["budget", "--gpu", "-inf"], "--gpu='-inf' is not finite"),
    (["budget", "--gpu", "-nan"], "--gpu='-nan' is not finite"),
    (["budget", "--reserve", "1e400%"], "--reserve='1e400%' is outside 0%..100%"),
    (["estimate", "--config", ""], "--config='' is empty"),
    (["estimate", "--model", ""], "--model='' is not a preset"),
    (["estimate", "--model", "gpt2", "--kv-dtype", "fp12"], "--kv-dtype='fp12' is unknown"),
    (["estimate", "--model", "gpt2", "--state-dtype", "fp12"], "--state-dtype='fp12' is unknown"),
    (["estimate", "--model", "gpt2", "--dtype", "int4-g" + DIGITS], "--dtype='int4-g"),
    (["offload", "--bytes", "-1GB"], "--bytes='-1GB' is negative"),
    (["simulate", "--trace", TEN_ELEVEN, "--config", ""], "--config='' is empty"),
    (["budget", "--gpu", "24\nXB"], "--gpu='24\\nXB' has an unknown unit"),   # a line break stays one line
    (["budget", "--nosuch\nflag"], "unrecognized arguments"),
    ([], "the following arguments are required: COMMAND"),
    (["--json"], "the following arguments are required: COMMAND"),
    (["measure", "--model", "course-tiny", "--dtype", "int8"], "--dtype='int8' cannot be measured"),
    (["measure", "--model", "course-tiny", "--context-tokens", "2"], "--context-tokens=2 leaves no prompt"),
]
IDS = [" ".join(a if isinstance(a, str) else f"<{a[1]}>" for a in argv)[:70] or "<no arguments>" for argv, _ in REFUSALS]


@pytest.mark.parametrize("argv, phrase", REFUSALS, ids=IDS)
def test_refusal(argv, phrase, files, capsys, monkeypatch):
    import course_lib.cli.measure as measure_cli

    monkeypatch.setattr(measure_cli, "measure", _measure_must_not_start)
    argv = [str(files / a[1]) if isinstance(a, tuple) else a for a in argv]
    rc, out, err = run(argv, capsys)
    check_refusal(rc, out, err, argv, phrase)


def _measure_must_not_start(*args, **kwargs):
    raise AssertionError("the arguments were refused only after the measurement started")


# ------------------------------------------------------------------ output paths come first


def test_measure_plot_suffix_is_refused_before_measuring(capsys, monkeypatch, tmp_path):
    import course_lib.cli.measure as measure_cli

    monkeypatch.setattr(measure_cli, "measure", _measure_must_not_start)
    argv = ["measure", "--model", "course-tiny", "--plot", str(tmp_path / "x.bmp")]
    rc, out, err = run(argv, capsys)
    check_refusal(rc, out, err, argv, "has no image suffix")
    assert ".png" in err and ".jpg" in err, "it should list the formats matplotlib can write"


def test_simulate_plot_is_checked_before_the_report(capsys, tmp_path):
    """The report used to print in full, then the plot failed; now nothing prints."""
    argv = ["simulate", "--trace", TEN_ELEVEN, "--plot", str(tmp_path / "no" / "such" / "x.png")]
    rc, out, err = run(argv, capsys)
    check_refusal(rc, out, err, argv, "does not exist; create it first")


def test_trace_out_probe_leaves_nothing_behind(capsys, tmp_path):
    path = tmp_path / "t.jsonl"
    rc, out, _ = run(["trace", "--requests", "3", "--out", path, "--prompt-min", "9", "--prompt-max", "3"], capsys)
    assert rc == 2 and not path.exists(), "a refused trace must not leave its (empty) output file"
    rc, out, _ = run(["trace", "--requests", "3", "--out", path], capsys)
    assert rc == 0 and len(path.read_text().splitlines()) == 3


def test_demo_out_is_checked_before_any_section(capsys, monkeypatch, tmp_path):
    import course_lib.cli.demo as demo

    ran = []
    monkeypatch.setattr(demo, "SECTIONS", (lambda out: ran.append(out),))
    (tmp_path / "file").write_text("x")
    rc, _, err = run(["demo", "--out", tmp_path / "file"], capsys)
    assert rc == 2 and ran == [], err
    rc, out, _ = run(["demo", "--out", tmp_path / "new" / "out"], capsys)
    assert rc == 0 and ran == [tmp_path / "new" / "out"] and "demo done" in out


# ------------------------------------------------------------------ valid input at the bounds still works


@pytest.mark.parametrize("argv", [
    ["estimate", "--model", "gpt2", "--tensor-parallel", str(B.MAX_TENSOR_PARALLEL), "--json"],
    ["estimate", "--model", "gpt2", "--context-tokens", str(B.MAX_CONTEXT_TOKENS), "--active-sequences",
     str(B.MAX_SEQUENCES), "--json"],
    ["budget", "--gpu", "1000TB", "--weights", "999TB", "--json"],
    ["offload", "--efficiency", str(B.MIN_SHARE), "--mfu", str(B.MIN_SHARE), "--flops", "1e6", "--link", "1kB", "--json"],
    ["rollout", "--drain", str(B.MAX_SECONDS), "--storage", "1kB", "--weights", "1000TB", "--json"],
    ["trace", "--requests", "5", "--arrival-rate", str(B.MIN_ARRIVAL_RATE), "--mean-output-tokens", "1e8",
     "--max-new-tokens", "99998976"],
], ids=lambda argv: " ".join(argv)[:60])
def test_the_bounds_themselves_are_valid(argv, capsys):
    rc, out, err = run(argv, capsys)
    assert rc == 0, err
    if "--json" in argv:
        json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))


def test_a_run_of_exactly_the_step_bound_is_simulated(tmp_path, capsys):
    # prefill at step 0, one token at each of steps 1..N-1: N steps recorded, the most allowed
    trace = tmp_path / "bound.jsonl"
    n = B.MAX_SIMULATED_STEPS
    trace.write_text(_request(max_new_tokens=n - 1, output_tokens=n - 1) + "\n")
    rc, out, err = run(["simulate", "--trace", trace, "--kv-bytes-per-token", "1", "--gpu", "1000TB"], capsys)
    assert rc == 0, err
    assert f"{n:,} steps" in out, "the report should show the steps it ran"


def _many_at_once(path: Path) -> Path:
    lines = (json.dumps({"id": i, "arrival_step": 0, "prompt_tokens": 64, "max_new_tokens": 4, "output_tokens": 4})
             for i in range(B.MAX_TRACE_REQUESTS))
    path.write_text("\n".join(lines) + "\n")
    return path


# The costly bounds' worst cases, each once, under the fuzzer's guard (seconds here, a limit of 60 s and
# 3 GB there): the bound is what keeps them this small. Measured on 2 cores: 0.5 s, 6 s, 1.5 s, 2.5 s.
WORST_CASES = {
    "10^5 requests written": lambda tmp: ["trace", "--requests", B.MAX_TRACE_REQUESTS, "--out", tmp / "t.jsonl"],
    "10^5 requests simulated at once, both policies, JSON": lambda tmp: [
        "simulate", "--trace", _many_at_once(tmp / "many.jsonl"), "--kv-bytes-per-token", "1",
        "--max-num-seqs", B.MAX_SEQUENCES, "--compare", "--json"],
    "10^5 replicas, plotted": lambda tmp: ["rollout", "--replicas", B.MAX_REPLICAS, "--plot", tmp / "r.png", "--json"],
    "10^6 steps, JSON": lambda tmp: ["simulate", "--trace", _one_long(tmp / "long.jsonl"), "--kv-bytes-per-token",
                                     "1", "--gpu", "1000TB", "--json"],
}


def _one_long(path: Path) -> Path:
    path.write_text(_request(max_new_tokens=B.MAX_SIMULATED_STEPS - 1, output_tokens=B.MAX_SIMULATED_STEPS - 1) + "\n")
    return path


@pytest.mark.parametrize("case", list(WORST_CASES))
def test_the_worst_case_of_each_costly_bound(case, tmp_path, capsys, resource_guard):
    argv = WORST_CASES[case](tmp_path)
    with resource_guard(60, 3 * 2**30):
        rc, out, err = run(argv, capsys)
    assert rc == 0, err
    if "--json" in argv:
        json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))


# ------------------------------------------------------------------ --help for every verb


def _verbs() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sorted(sub.choices)


def test_every_verb_is_covered():
    assert _verbs() == sorted(["budget", "estimate", "presets", "demo", "simulate", "trace", "offload", "rollout",
                               "measure", "from-log"]), "a new verb: add it to the fuzzer (test_cli_fuzz.py) too"


@pytest.mark.parametrize("argv", [["--help"], *([verb, "--help"] for verb in _verbs())], ids=lambda a: " ".join(a))
def test_help_works_for_every_verb(argv, capsys):
    rc, out, err = run(argv, capsys)
    assert rc == 0 and err == "", f"course-memory {' '.join(argv)} failed: {err}"
    assert out.startswith("usage: course-memory"), out[:200]


# ------------------------------------------------------------------ the config reader (the families branch)
# The fuzzer found these in the config reader; the families branch (merged) now refuses them.

LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256}


@pytest.mark.parametrize("text, phrase", [
    ('{"model_type": "llama", "hidden_size": ' + DIGITS + "}", "holds a value Python refuses to read"),
    ("[" * 100_000 + "]" * 100_000, "nests JSON arrays or objects too deeply to read"),
], ids=["5000-digit number", "nested 100,000 deep"])
def test_config_reader_refuses_unreadable_json(text, phrase, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(text)
    rc, out, err = run(["estimate", "--config", path], capsys)
    check_refusal(rc, out, err, ["estimate", "--config", path], phrase)


def test_config_reader_bounds_the_layer_count(tmp_path, capsys, resource_guard):
    """10^8 layers used to build 10^8 per-layer entries (minutes, gigabytes) before any bound was checked."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, "num_hidden_layers": 10**8}))
    with resource_guard(3, 2**29):
        rc, out, err = run(["estimate", "--config", path], capsys)
    check_refusal(rc, out, err, ["estimate", "--config", path], "num_hidden_layers=100000000 is above the bound")


def test_dtype_reader_refuses_a_5000_digit_group_size():
    """The CLI refuses dtype names over 40 characters itself; the library's reader refuses it too."""
    from course_lib.dtypes import get_dtype
    from course_lib.errors import CourseInputError

    with pytest.raises(CourseInputError):
        get_dtype("int4-g" + DIGITS)
