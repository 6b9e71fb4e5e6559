"""The figures' fixed margins (course_lib/views/plots.py): nothing drawn falls off the canvas or onto another label.

The layout is set in inches rather than solved by matplotlib, so these check what the solver used to
guarantee: every piece of text lies inside the figure, and the legend below the panels overlaps no x label.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
from matplotlib.figure import Figure

from course_lib.lessons.l14_04 import demos as lesson
from course_lib.serving.loading import readiness_timeline, rollout_plan
from course_lib.views.plots import plot_rollout, plot_simulation
from course_lib.simulate import simulate


@pytest.fixture
def drawn(monkeypatch):
    """The Figures the plot functions save, in order (each is drawn again by _renderer for measuring)."""
    figures = []
    save = Figure.savefig

    def spy(self, *args, **kwargs):
        save(self, *args, **kwargs)
        figures.append(self)

    monkeypatch.setattr(Figure, "savefig", spy)
    return figures


def _renderer(fig):
    """An Agg renderer of ``fig``, drawn at the dpi the plot functions save with."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        fig.set_dpi(110)
        FigureCanvasAgg(fig).draw()
    return fig.canvas.get_renderer()


def _inside(fig):
    """What is drawn outside the canvas: each panel with its tick labels, labels and title
    (``get_tightbbox`` counts only the ticks drawn), the figure's title and its legends."""
    renderer, canvas = _renderer(fig), fig.bbox
    boxes = [(f"panel {ax.get_title()!r}", ax.get_tightbbox(renderer)) for ax in fig.axes]
    boxes += [(t.get_text(), t.get_window_extent(renderer)) for t in fig.texts if t.get_text().strip()]
    boxes += [("legend", legend.get_window_extent(renderer)) for legend in fig.legends]
    return [(name, box) for name, box in boxes
            if box.x0 < canvas.x0 - 1 or box.y0 < canvas.y0 - 1 or box.x1 > canvas.x1 + 1 or box.y1 > canvas.y1 + 1]


def test_simulation_figures_keep_every_label_on_the_canvas(drawn, tmp_path):
    trace = lesson.comparison_trace()
    paged = simulate(trace, lesson.lesson_config("paged"))
    reserve = simulate(trace, lesson.lesson_config("reserve-max"))
    plot_simulation(paged, tmp_path / "one.png")
    plot_simulation([("reserve-max: reserve prompt + max_new_tokens", reserve),
                     ("paged: 16-token blocks on demand", paged)], tmp_path / "two.png",
                    title="A chat-like load: reserve-max holds memory for tokens that never come")
    assert len(drawn) == 2
    for fig in drawn:
        assert _inside(fig) == []
        renderer = _renderer(fig)
        legend = fig.legends[0].get_window_extent(renderer)
        for ax in fig.axes:
            assert not legend.overlaps(ax.xaxis.label.get_window_extent(renderer)), "legend over an x label"
            assert not legend.overlaps(ax.get_window_extent(renderer)), "legend over a panel"


def test_rollout_figure_keeps_the_phase_names_on_the_canvas(drawn, tmp_path):
    timeline = readiness_timeline(13_480_000_000, storage="network-disk", link="pcie-gen4-x16")
    plan = rollout_plan(4, timeline.ready_s, max_unavailable=1, drain_s=10)
    plot_rollout(plan, timeline, tmp_path / "rollout.png")
    (fig,) = drawn
    assert _inside(fig) == []
    top, bottom = fig.axes[:2]
    renderer = _renderer(fig)
    assert top.xaxis.label.get_window_extent(renderer).y0 > bottom.title.get_window_extent(renderer).y1, \
        "the top panel's x label and the bottom panel's title overlap"
