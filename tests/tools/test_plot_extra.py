"""One matplotlib extra: the soak's plot and the bench chart import matplotlib the
same way, say the same thing without it, and setup.py offers it as one extra, `plot`."""

from __future__ import annotations

import ast
import os
import sys

import pytest

from acp_green.tools.bench.chart import write_chart
from acp_green.tools.rig import soak
from acp_green.tools.rig.plot import MISSING, PlotUnavailable
from tests.helpers import REPO

ROOT = str(REPO)


def test_without_matplotlib_the_soak_and_the_bench_chart_give_the_one_message(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    reported: list[str] = []
    assert soak._plot([], str(tmp_path), reported.append) is None
    with pytest.raises(PlotUnavailable) as caught:
        write_chart({"agents": [], "results": {}}, tmp_path / "chart.png")
    assert reported == [f"no plot: {MISSING}"]
    assert str(caught.value) == MISSING
    assert "pip install 'acp-green[plot]'" in MISSING


def _extras() -> dict[str, list[str]]:
    tree = ast.parse(open(os.path.join(ROOT, "setup.py"), encoding="utf-8").read())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "extras_require":
            return {k.value: [e.value for e in v.elts] for k, v in zip(node.value.keys, node.value.values)
                    if isinstance(v, ast.List)}
    raise AssertionError("setup.py has no extras_require")


def test_matplotlib_is_one_extra_named_plot_and_both_scripts_install_it():
    with_matplotlib = {name for name, requirements in _extras().items()
                       if any(r.startswith("matplotlib") for r in requirements)}
    assert with_matplotlib == {"plot"}
    for script in ("soak.sh", "bench.sh"):
        assert "'.[rig,plot]'" in open(os.path.join(ROOT, "scripts", script), encoding="utf-8").read(), script
