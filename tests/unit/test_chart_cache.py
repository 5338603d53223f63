"""registry.chart.memo_png: a chart drawn once is read back byte for byte, and other inputs draw another."""

from __future__ import annotations

from registry import chart


def test_a_chart_is_read_back_as_drawn_and_other_inputs_draw_another(tmp_path, monkeypatch):
    monkeypatch.setattr(chart, "CACHE", tmp_path)
    drawn: list[str] = []

    def render(series, title):
        drawn.append(title)
        return chart.line_chart_png(series, title, "x", "y")

    series = [("a", [0, 1, 2], [1.0, 0.5, 0.25])]
    first = chart.memo_png(render, series, "t")
    again = chart.memo_png(render, series, "t")
    assert first == again == chart.line_chart_png(series, "t", "x", "y") and drawn == ["t"]
    assert len(list(tmp_path.glob("*.png"))) == 1
    other = chart.memo_png(render, [("a", [0, 1, 2], [1.0, 0.5, 0.125])], "t")
    assert other != first and drawn == ["t", "t"] and len(list(tmp_path.glob("*.png"))) == 2


def test_an_unwritable_cache_still_draws(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setattr(chart, "CACHE", blocked / "charts")
    series = [("a", [0, 1], [1.0, 2.0])]
    assert chart.memo_png(chart.line_chart_png, series, "t", "x", "y") == chart.line_chart_png(series, "t", "x", "y")
