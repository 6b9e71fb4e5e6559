"""Feedback fragments are rendered once per worker, but a learner's huge cell is not kept."""

from autograder import feedback


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
