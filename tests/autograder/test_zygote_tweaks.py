"""The grading kernel's shortcut in IPython's input path (autograder/sandbox/kernel_tweaks.py) gives exactly what
IPython itself gives: IPython's own TransformerManager is the oracle, on every code cell the grader
runs (the instructor notebook with its hidden tests, the learner release) and on cells written to
hit each of IPython's transforms."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("IPython")
from IPython.core.inputtransformer2 import TransformerManager  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

# Each line of IPython's special syntax, next to Python that looks like it, and text that is neither.
TRICKY = [
    "%time x = 1",
    "x = %time 1",
    "files = !ls -a",
    "!echo hi",
    "  !echo indented",
    "len?",
    "len??",
    "?len",
    "%%time\nx = 1",
    "%%capture out\nprint(1)",
    "/print 1",
    ",print a b",
    ";print a b",
    ">>> x = 1\n>>> print(x)",
    "In [1]: x = 1\n   ...: print(x)",
    "In[1]: int",                       # valid Python (an annotation); IPython strips the prompt
    "    x = 1\n    print(x)",          # leading indentation, removed by a cleanup transform
    "\n\n\nx = 1",
    "x = 5 % 3\ny = x != 2\nprint(f'{x=!r} {y!s:>5}')",
    "d = {'a': 1}\nd ['a']",
    "s = '''\n!ls\n%time\nlen?\n'''",
    "# what is this?\nx = 1  # and this?",
    "def f():\n    return 1\nf()?",
    "if True:\n    %time x = 1\n    y = !echo 2",
    "await asyncio.sleep(0)",
    "import asyncio\nasync def g():\n    return 1\nawait g()",
    "x = (1,\n     2)\n!echo continued",
    "print('\\d')",                     # an invalid escape: a warning, not an error
    "def broken(:\n    pass",           # a syntax error stays IPython's to report
    "x = 1 \\\n  + 2",
    "x = \\\n%time 1",
    "get_ipython().run_line_magic('time', 'x = 1')",
    "",
    "\n",
    "x = 1\r\ny = 2\r\n",
    "a = b = %time 1",
    "lst = [1, 2]\nlst[0] = %time 3",
    "%config InlineBackend.figure_format = 'png'",
    "lambda: (yield)",
    "match = 3\nmatch match:\n    case 3:\n        print('three')",
    "x = " + "1 + " * 20_000 + "1",      # deep enough that compiling it raises RecursionError
    "x = " + "(" * 300 + "1" + ")" * 300,  # too many nested parentheses for the parser
    "x = 1\0",                           # a null byte: compile() refuses the text
]


def _tweaks():
    """kernel_tweaks.py loaded by path, as the fork server loads it."""
    spec = importlib.util.spec_from_file_location("_tweaks_under_test", REPO / "autograder" / "sandbox" / "kernel_tweaks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _grader_cells() -> list[str]:
    from autograder.source.assignment import load_source
    from autograder.source.restore import read_submission, restore_cells
    from lessons.l14_04.examples import this_assignment

    a = this_assignment()
    spec = load_source(a).notebooks[0]
    reference = REPO / "examples" / "submissions" / "reference" / a.name / a.notebook_name
    restored, _ = restore_cells(read_submission(reference.read_bytes()), spec)
    cells = [c.source for nb in (spec.nb, restored) for c in nb.cells if c.cell_type == "code"]
    for path in sorted((REPO / "notebooks").rglob("*.ipynb")):
        cells += [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    return cells


def _managers():
    tweaks, stock, ours = _tweaks(), TransformerManager(), TransformerManager()
    slow = []
    original = ours.do_token_transforms
    ours.do_token_transforms = lambda lines: slow.append(1) or original(lines)
    tweaks.python_skips_token_transforms(ours)
    return stock, ours, slow


def _same(stock, ours, cell):
    try:
        expected = stock.transform_cell(cell)
    except Exception as e:  # noqa: BLE001 - then ours must fail the same way
        with pytest.raises(type(e)):
            ours.transform_cell(cell)
        return
    assert ours.transform_cell(cell) == expected, cell


def test_every_cell_the_grader_runs_transforms_as_ipython_transforms_it_and_skips_the_tokenizer():
    stock, ours, slow = _managers()
    cells = _grader_cells()
    assert len(cells) > 60 and sum(map(len, cells)) > 50_000, "the corpus is the notebooks, hidden tests included"
    for cell in cells:
        _same(stock, ours, cell)
    assert len(slow) < len(cells) / 10, f"{len(slow)} of {len(cells)} cells took the tokenizer"


@pytest.mark.parametrize("cell", TRICKY)
def test_ipython_syntax_and_python_that_looks_like_it_transform_as_ipython_transforms_them(cell):
    stock, ours, _ = _managers()
    _same(stock, ours, cell)


def test_a_token_transformer_a_learner_adds_is_honoured():
    stock, ours, slow = _managers()

    from IPython.core.inputtransformer2 import TokenTransformBase

    class Shout(TokenTransformBase):   # find() a place in the tokens, transform() the lines there
        @classmethod
        def find(cls, tokens_by_line):
            for line in tokens_by_line:
                for token in line:
                    if token.string == "quiet":
                        return cls(token.start)
            return None

        def transform(self, lines):
            return [line.replace("quiet", "LOUD") for line in lines]

    for manager in (stock, ours):
        manager.token_transformers.append(Shout)
    assert ours.transform_cell("print(quiet)") == stock.transform_cell("print(quiet)") == "print(LOUD)\n"
    assert slow, "with a transformer IPython does not ship, every cell takes IPython's own path"


def test_a_cell_transformed_twice_is_parsed_once():
    """ipykernel transforms each cell twice; whether its text parses is asked once, and again for a new text."""
    tweaks, manager = _tweaks(), TransformerManager()
    asked = []
    tweaks.compile = lambda text, *args, **kwargs: asked.append(text) or compile(text, *args, **kwargs)
    tweaks.python_skips_token_transforms(manager)
    for _ in range(2):
        assert manager.transform_cell("x = 1") == TransformerManager().transform_cell("x = 1")
    assert len(asked) == 1
    assert manager.transform_cell("y = %time 1") == TransformerManager().transform_cell("y = %time 1")
    assert manager.transform_cell("x = 1") == "x = 1\n" and len(asked) == 3
