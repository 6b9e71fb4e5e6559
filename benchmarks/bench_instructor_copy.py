"""The instructor's copy of a hand-in of ``$`` and ``\\`` (issue 39, round 5): its size, and nbconvert's time on it.

    .venv/bin/python benchmarks/bench_instructor_copy.py                 # 2.9 MB hand-in, as in the issue
    .venv/bin/python benchmarks/bench_instructor_copy.py --chars 480000 --no-nbconvert

The hand-in is one markdown cell and one raw cell of ``$\\`` repeated (``--chars`` pairs each) and an ordinary
answer; the copy is :func:`autograder.publish.inert.instructor_copy`'s, written by nbformat as the grader writes it;
nbconvert renders it with its classic template (formgrader's template extends it). CPU seconds and the
process's peak RSS. Not a test: run it by hand; results/instructor-copy.md has today's figures.
"""

from __future__ import annotations

import argparse
import resource
import time

import nbformat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=480_000, help="pairs of $ and \\ in each learner cell")
    parser.add_argument("--no-nbconvert", action="store_true", help="size only")
    args = parser.parse_args()
    from autograder.publish.inert import instructor_copy

    text = "$\\" * args.chars
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text), nbformat.v4.new_raw_cell(text),
                                         nbformat.v4.new_markdown_cell("An answer: $\\sum_i i^2$, **bold**.")])
    hand_in = nbformat.writes(nb).encode()
    start = time.process_time()
    copy = nbformat.writes(instructor_copy(nb)).encode()
    made = time.process_time() - start
    print(f"hand-in {len(hand_in):,} B; instructor copy {len(copy):,} B ({len(copy) / len(hand_in):.2f}x), "
          f"made in {made:.2f} CPU s")
    if not args.no_nbconvert:
        from nbconvert import HTMLExporter

        start = time.process_time()
        body, _ = HTMLExporter(template_name="classic").from_notebook_node(nbformat.reads(copy.decode(), 4))
        print(f"nbconvert (classic template): {time.process_time() - start:.1f} CPU s, page {len(body):,} B, "
              f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
