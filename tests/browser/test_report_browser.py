"""The study report (`fabric report`) in headless Chromium: it renders, logs no error, every plot has data."""

from __future__ import annotations

import pytest

from fabric.viewer.report import PLOT_NAME
from tests.browser.test_viewer_browser import _open, _severe
from tests.cli.study_fixture import run_small_study

# every glyph renderer's data length, per plot named report-plot-<i>, and the table's rows
_PLOTS_JS = """
const doc = Bokeh.documents[0];
const out = [];
for (let i = 0; ; i++) {
  const plot = doc.get_model_by_name(arguments[0] + i);
  if (plot == null) break;
  const lengths = plot.renderers.filter(r => r.data_source !== undefined).map(r => r.data_source.get_length());
  out.push({title: plot.title ? plot.title.text : '', lengths: lengths});
}
const table = doc.get_model_by_name('report-table');
return {plots: out, table_rows: table ? table.source.get_length() : -1};
"""


@pytest.fixture(scope="module")
def report_page(tmp_path_factory):
    from cli.app import main

    out = run_small_study(tmp_path_factory.mktemp("study"))
    assert main(["report", str(out)]) == 0
    return out / "_report.html"


def test_report_renders_every_plot_with_data(browser, report_page, artifacts):
    state, seconds = _open(browser, report_page.as_uri())
    print(f"\nreport idle after {seconds:.1f} s")
    assert _severe(browser) == []
    got = browser.execute_script(_PLOTS_JS, PLOT_NAME)
    titles = [p["title"] for p in got["plots"]]
    # 3 Pareto fronts (waste, MFU, cross-ToR), waste curves, scope, component, tornado
    assert len(titles) == 7, titles
    assert sum(t.startswith("Pareto front") for t in titles) == 3 and any(t.startswith("Tornado") for t in titles)
    for p in got["plots"]:
        assert p["lengths"] and all(n > 0 for n in p["lengths"]), p
    assert got["table_rows"] == 3
    assert state["canvases"] >= len(titles)
    browser.save_screenshot(str(artifacts / "report.png"))
