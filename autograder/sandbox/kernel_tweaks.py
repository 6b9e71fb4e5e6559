"""The grading kernel's two shortcuts, each checked against IPython itself before it is taken.

The kernel fork server (``_zygote.py``) loads this file by path (it imports nothing of the
grader) and applies both to each kernel it forks, before any cell runs. Neither touches a
private attribute of ipykernel: one names IPython's own compiler through ipykernel's
``compiler_class`` trait, the other replaces IPython's token transforms only for text on which
IPython's four transforms are the identity, and only while the manager holds exactly those four
(``tests/autograder/test_zygote_tweaks.py`` holds it to IPython's TransformerManager).

>>> from IPython.core.inputtransformer2 import TransformerManager
>>> manager = TransformerManager()
>>> python_skips_token_transforms(manager)
>>> manager.transform_cell("x = %time 1") == TransformerManager().transform_cell("x = %time 1")
True
"""


def plain_compiler(app):
    """IPython's own compiler, not ipykernel's: that one names each cell's code for the debugger by a
    pure-Python murmur hash of its text (~10 ms for this notebook's 92 KB of code). Tracebacks read
    "Cell In[n]" with either, and no debugger attaches to a grading kernel. ipykernel's
    ``compiler_class`` is not configurable (a command-line option is ignored with a warning), so the
    kernel is a subclass that names the other class; nothing else of it differs."""
    try:
        from ipykernel.ipkernel import IPythonKernel
        from IPython.core.compilerop import CachingCompiler
        from traitlets import Type
    except ImportError:
        return
    if app.kernel_class is IPythonKernel and isinstance(IPythonKernel.class_traits().get("compiler_class"), Type):
        app.kernel_class = type("GradingKernel", (IPythonKernel,), {"compiler_class": Type(CachingCompiler)})


def python_skips_token_transforms(manager):
    """IPython looks for its own syntax (``%magic``, ``!cmd``, ``x = %cmd``, ``x = !cmd``, ``obj?``) by
    tokenizing the whole cell in pure Python: for this notebook's 92 KB of code, ~80 ms in a fresh
    process (every kernel is one) and ~30 ms warm, the costliest step a cell takes before it runs.
    Each of those four transforms starts at a token that valid Python cannot have there (a line
    beginning with ``! ? % , ; /``, ``= %`` or ``= !`` outside brackets, a line ending in ``?``), so
    text that already parses as Python (``ast.parse``, with top-level await: ~9 ms) comes out of them
    unchanged. That text skips them; any other text, or a manager whose token transforms are not
    exactly IPython's four (a learner may add one), takes IPython's own path. The cleanup and line
    transforms (prompts, indentation, ``%%`` cell magics) run as before, first.

    Whether a text parses is a property of the text alone, and ipykernel has IPython transform each
    cell twice (to decide whether it runs async, then to run it): the verdict on the last text is
    kept, so the second transform of a cell parses nothing."""
    import ast
    import warnings
    try:
        from IPython.core import inputtransformer2 as it
        standard = [it.MagicAssign, it.SystemAssign, it.EscapedCommand, it.HelpEnd]
    except (ImportError, AttributeError):
        return

    def only_ipythons():
        found = list(getattr(manager, "token_transformers", ()))
        return len(found) == len(standard) and all(a is b for a, b in zip(found, standard))

    do_token_transforms = getattr(manager, "do_token_transforms", None)
    if do_token_transforms is None or not only_ipythons():
        return
    flags = ast.PyCF_ONLY_AST | getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)

    last = ["", False]   # the last text asked about, and whether it parses

    def parses(text):
        if text != last[0]:
            try:
                with warnings.catch_warnings():   # IPython compiles the text again, and warns then
                    warnings.simplefilter("ignore")
                    compile(text, "<cell>", "exec", flags, dont_inherit=True)
                verdict = True
            except Exception:  # noqa: BLE001 - not Python as it stands: IPython's own path decides
                verdict = False
            last[:] = [text, verdict]
        return last[1]

    def token_transforms(lines):
        if only_ipythons() and parses("".join(lines)):
            return lines
        return do_token_transforms(lines)

    manager.do_token_transforms = token_transforms
