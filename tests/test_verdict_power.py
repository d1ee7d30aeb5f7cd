"""Every verdict states what it could have caught, in every format, with core.power's figure.

The runs are small fixed budgets shared by the module (each about a tenth of a second); the
calibration of the figure itself is tests/test_power.py's.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

import varcheck
from varcheck.checks.render import check_to_junit, render_check, render_sweep, render_verify
from varcheck.core.estimation import MIN_BLOCKS
from varcheck.core.power import detectable_of
from varcheck.kernels.render import render_probe, render_probe_row
from varcheck.output.formats import DETECTABLE_KEYS, detectable_cell, percent_up

ALPHA = 1 - 0.95  # as the runs compute it from their confidence
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import attention_kernels as ak  # noqa: E402

FILE = """
[defaults]
seed = 3
samples = 4000

[[claim]]
name = "textbook"
dk = "8,16"
claim = "dk"

[[claim]]
name = "scaled"
dk = 16
claim = "1"
scaled = true
tolerance = 0.5
"""


def _written(render, result, fmt_name: str, width: int = 150) -> str:  # noqa: ANN001
    out = io.StringIO()
    render(result, fmt_name, Console(file=out, width=width, color_system=None))
    return out.getvalue()


@pytest.fixture(scope="module")
def swept() -> varcheck.SweepResult:
    return varcheck.sweep(dk=[8, 16, 32], claim="dk", samples=4000, seed=3)


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> varcheck.CheckResult:
    path = tmp_path_factory.mktemp("claims") / "claims.toml"
    path.write_text(FILE)
    return varcheck.check(path)


def test_an_assert_states_its_detectable_error_in_json_and_its_paragraph() -> None:
    """The figure is core.power's for the run's own estimate at α (one test), rounded up."""
    res = varcheck.verify(16, claim="dk", samples=5000, seed=3)
    det = res.detectable
    assert det == detectable_of(res.raw, alpha=ALPHA)
    assert det.family == 1 and det.alpha == pytest.approx(ALPHA) and det.power == 0.9
    data = json.loads(_written(render_verify, res, "json"))
    assert data["detectable_error"] == pytest.approx(max(det.above, det.below))
    assert data["detectable_error_above"] == pytest.approx(det.above)
    assert data["power_at_claim"] is None
    text = _written(render_verify, res, "table")
    above, below = percent_up(det.above), percent_up(det.below)
    said = f"≥ {above} either way" if above == below else f"≥ +{above} / −{below}"
    assert f"would have caught an error of {said} with 90% power" in text


def test_a_weak_tolerance_test_says_how_often_a_true_claim_passes_and_what_would_lift_it() -> None:
    """1000 products cannot pass a 2% band: the TOST's power at the claim is about 0, below
    0.8, and the paragraph says so with a tolerance and a size that would do."""
    res = varcheck.verify(64, claim="dk", samples=1000, tolerance=0.02, seed=1)
    assert res.detectable.power_at_claim < 0.01
    assert res.detectable.above > 0.02 and res.detectable.below > 0.02  # beyond the band
    text = _written(render_verify, res, "table")
    assert "a true claim passes this test with probability 0 (below 0.8: use a tolerance" in text


def test_a_run_without_a_valid_test_states_no_figure() -> None:
    res = varcheck.verify(64, claim="dk", dist="t:df=3", samples=1000, seed=1)
    assert res.outcome in ("unreliable", "infinite") and res.detectable is None
    data = json.loads(_written(render_verify, res, "json"))
    assert all(data[key] is None for key in DETECTABLE_KEYS)
    assert "would have caught" not in _written(render_verify, res, "table")


def test_sweep_rows_are_sized_at_their_share_of_the_family_in_every_format(swept) -> None:  # noqa: ANN001
    """m = 3 rows with a valid test: each row's figure is core.power's at α/3."""
    for row in swept.rows:
        assert row.detectable == detectable_of(row.estimate, alpha=ALPHA, family=3)
    rows = json.loads(_written(render_sweep, swept, "json"))["rows"]
    assert [r["detectable_family"] for r in rows] == [3, 3, 3]
    assert rows[0]["detectable_alpha"] == pytest.approx(ALPHA / 3)
    lines = _written(render_sweep, swept, "csv-meta").splitlines()
    records = list(csv.DictReader(line for line in lines if not line.startswith("#")))
    assert float(records[2]["detectable_error"]) == pytest.approx(swept.rows[2].detectable.error)
    assert "detectable_error_below" in _written(render_sweep, swept, "markdown")
    table = _written(render_sweep, swept, "table")
    assert "detects" in table and detectable_cell(swept.rows[1].detectable) in table


def test_the_detects_column_is_the_first_left_out_at_80_columns(swept) -> None:  # noqa: ANN001
    table = _written(render_sweep, swept, "table", width=80)
    assert "not shown at 80 columns:" in table and "detects" in table.split("not shown")[1]
    assert "verdict" in table and "consistent" in table
    assert max(len(line) for line in table.splitlines()) <= 80


def test_check_rows_are_sized_at_the_files_family_in_every_format(checked) -> None:  # noqa: ANN001
    """Three tests in the file's Holm family; the tolerance row also has its TOST power."""
    rows = [r for co in checked.claims for r in co.results]
    assert checked.family_size == 3
    for r in rows:
        assert r.detectable == detectable_of(r.raw, alpha=ALPHA, family=3, tolerance=r.tolerance)
    assert rows[-1].detectable.power_at_claim > 0.99  # a 50% band at 4000 products
    data = json.loads(_written(render_check, checked, "json"))
    tests = [t for c in data["claims"] for t in c["tests"]]
    assert [t["detectable_family"] for t in tests] == [3, 3, 3]
    assert tests[-1]["power_at_claim"] == pytest.approx(rows[-1].detectable.power_at_claim)
    assert "detectable_approximate" in _written(render_check, checked, "csv-meta").splitlines()[1]
    assert "power_at_claim" in _written(render_check, checked, "markdown")
    assert detectable_cell(rows[0].detectable) in _written(render_check, checked, "table")
    junit = ET.fromstring(check_to_junit(checked))
    props = {
        p.get("name"): p.get("value")
        for p in junit.findall(".//testcase[@name='textbook']/properties/property")
    }
    assert float(props["d_k=16 detectable_error"]) == rows[1].detectable.error
    assert props["d_k=8 detectable_approximate"] in ("true", "false")


def test_a_probe_states_its_weakest_heads_figure_in_the_scale() -> None:
    """Every head of every d_k is one test of the Holm family; the row states the weakest
    head's figure, in its JSON, CSV and paragraph."""
    noisy = functools.partial(ak.noisy, noise=0.3)
    res = varcheck.probe_sweep(noisy, [8, 16], queries=16, keys=16, samples=MIN_BLOCKS, seed=1)
    family = sum(len(row.per_head) for row in res.rows)
    for row in res.rows:
        heads = [h.detectable for h in row.per_head]
        assert {d.family for d in heads} == {family}
        assert row.detectable == max(heads, key=lambda d: d.error)
    data = json.loads(_written(render_probe, res, "json"))["rows"]
    assert data[1]["detectable_error"] == pytest.approx(res.rows[1].detectable.error)
    assert data[1]["per_head"][0]["detectable_alpha"] == pytest.approx(ALPHA / family)
    assert "detectable_error" in _written(render_probe, res, "csv-meta").splitlines()[1]
    one = varcheck.probe(noisy, 16, queries=16, keys=16, samples=MIN_BLOCKS, seed=1)
    above, below = percent_up(one.detectable.above), percent_up(one.detectable.below)
    said = f"≥ {above} either way" if above == below else f"≥ +{above} / −{below}"
    assert f"would have caught a scale error of {said}" in _written(render_probe_row, one, "table")


def test_a_claim_files_probe_row_states_its_weakest_heads_figure(tmp_path: Path) -> None:
    """A probe claim's heads are tests of the file's Holm family (with the variance claim)."""
    kernel = Path(ak.__file__).resolve()
    path = tmp_path / "claims.toml"
    path.write_text(
        f'[defaults]\nseed = 1\nsamples = 4000\n\n[[claim]]\nname = "v"\ndk = 8\n'
        f'claim = "dk"\n\n[[claim]]\nname = "noisy"\nprobe = "{kernel}:noisy"\ndk = 16\n'
        "args = { noise = 0.3 }\nqueries = 16\nkeys = 16\n"
    )
    res = varcheck.check(path)
    variance, probe = (co.results[0] for co in res.claims)
    assert variance.detectable.family == probe.detectable.family == res.family_size
    assert "would have caught a scale error of" in check_to_junit(res)
