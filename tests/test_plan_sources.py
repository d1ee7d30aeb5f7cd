"""Plans of a claim file (``check FILE --plan``) and of a kernel (``plan --kernel``), and the
pilots' time cap.

That a run at the planned size has the planned power is shown by simulation in
tests/test_power.py; here what each row is planned as, the family it is planned at, the forms
and the limits.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

import varcheck
from varcheck.checks.plan_render import render_plan
from varcheck.errors import VarcheckError

KERNELS = Path(__file__).resolve().parents[1] / "examples" / "attention_kernels.py"

CLAIMS = f"""
[defaults]
seed = 3

[[claim]]
name = "textbook"
dk = [16, 64]
claim = "dk"

[[claim]]
name = "banded"
dk = 32
claim = "dk"
tolerance = 0.05

[[claim]]
name = "kernel-scale"
probe = "{KERNELS}:noisy"
dk = 16
layout = "bhnd"
queries = 8
keys = 8
args = {{ noise = 0.3 }}
"""


@pytest.fixture(scope="module")
def claims(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plan") / "claims.toml"
    path.write_text(CLAIMS)
    return path


@pytest.fixture(scope="module")
def planned(claims: Path) -> varcheck.PlanResult:
    return varcheck.plan(file=claims, detect=0.05)


def test_a_claim_file_is_planned_one_row_per_test_at_the_files_family(planned) -> None:
    """Four tests of variance (two d_k), a tolerance and a kernel of two heads: five in Holm's
    family; the tolerance row is planned for a true claim to pass, the kernel's in calls."""
    assert [(r.name, r.dk, r.unit) for r in planned.rows] == [
        ("textbook", 16, "products"),
        ("textbook", 64, "products"),
        ("banded", 32, "products"),
        ("kernel-scale", 16, "calls"),
    ]
    assert planned.family == 5 and planned.seed == 3 and planned.file is not None
    textbook, _, banded, kernel = planned.rows
    assert textbook.detectable_error <= 0.05 and textbook.floor == "power"
    assert banded.power_at_claim == pytest.approx(0.9, abs=0.03)
    assert kernel.blocks >= 200 and kernel.samples == kernel.blocks
    # the file's samples is the largest variance test's need; the kernel keeps its own calls
    assert planned.samples == max(r.samples for r in planned.rows[:3])


def test_each_file_row_is_sized_at_its_share_of_the_family(planned) -> None:
    """A variance row's blocks catch the error at alpha / family, not at alpha alone: the
    detectable error recomputed from the row's own spread at the file's family of 5 is within
    the target, and at a family of 1 (a row sized alone) clearly below it, so a plan that
    forgot the family (or used it twice) would fail one side."""
    from varcheck.core.power import detectable_error

    row = planned.rows[0]
    common = {"blocks": row.blocks, "skewness": row.skewness, "alpha": planned.alpha}
    se = row.spread / np.sqrt(row.blocks)
    at_family = detectable_error(1.0, se, family=planned.family, **common).error
    alone = detectable_error(1.0, se, family=1, **common).error
    assert at_family == pytest.approx(row.detectable_error, rel=1e-9)
    # the floor "power" sets the size, so the target is met with little to spare (ceil of blocks)
    assert row.floor == "power" and 0.95 * 0.05 < at_family <= 0.05
    # z at alpha/10 over z at alpha/2 (Holm's first step, two-sided) is about 2.81/1.96
    assert alone < 0.9 * at_family


def test_check_plan_prints_the_file_plan_in_every_format(run_cli, claims: Path, planned) -> None:
    out = run_cli("check", str(claims), "--plan", "--detect", "0.05", "--format", "json")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["command"] == "plan" and doc["file"] == str(claims) and doc["family"] == 5
    assert [r["name"] for r in doc["rows"]] == [r.name for r in planned.rows]
    for fmt in ("csv", "markdown"):
        text = run_cli("check", str(claims), "--plan", "--detect", "0.05", "--format", fmt).output
        assert "kernel-scale" in text and "samples" in text
    buf = io.StringIO()
    render_plan(planned, "table", Console(file=buf, width=80, color_system=None))
    assert max(len(line) for line in buf.getvalue().splitlines()) <= 80
    text = " ".join(buf.getvalue().split())
    assert f"--samples {planned.samples}" in text and "kernel-scale" in text


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--plan",), "--detect 0.03"),
        (("--detect", "0.05"), "add --plan"),
        (("--plan", "--detect", "0.05", "--samples", "5000"), "drop --samples"),
        (("--plan", "--detect", "0.05", "--junit-xml", "x.xml"), "drop --junit-xml"),
        (("--plan", "--detect", "2"), "--detect"),
        (("--plan", "--detect", "0.05", "--max-seconds", "-1"), "--max-seconds"),
    ],
)
def test_check_plan_refuses_what_it_cannot_honour(run_cli, claims, args, said: str) -> None:
    out = run_cli("check", str(claims), *args)
    assert out.exit_code == 2
    assert len(out.stderr.strip().splitlines()) == 1 and said in out.stderr


def test_a_kernel_is_planned_in_calls_with_each_head_a_test(run_cli) -> None:
    """Two d_k of a two-head layout: four tests; the run line is probe's, with the options."""
    res = varcheck.plan(
        "16,32",
        kernel=f"{KERNELS}:noisy",
        probe_options={"layout": "bhnd", "queries": 8, "keys": 8, "args": {"noise": 0.3}},
        detect=0.01,
        seed=1,
    )
    assert res.kernel and res.family == 4 and [r.unit for r in res.rows] == ["calls"] * 2
    assert res.rows[0].floor == "power" and res.rows[0].detectable_error <= 0.01
    assert res.run_command.startswith("varcheck probe ")
    assert f"--samples {res.samples}" in res.run_command and "--queries 8" in res.run_command
    out = run_cli("plan", "--dk", "16", "--queries", "8", "--detect", "0.01")
    assert out.exit_code == 2 and "describes a --kernel" in out.stderr
    out = run_cli("plan", "--dk", "16", "--kernel", "k.py:f", "--claim", "1", "--detect", "0.01")
    assert out.exit_code == 2 and "--expect" in out.stderr


def _slow(rng: np.random.Generator, dk: int) -> np.ndarray:
    """A sampler that takes 10 ms a call."""
    time.sleep(0.01)
    return rng.standard_normal(16)


def test_a_slow_samplers_pilot_stops_at_the_time_cap() -> None:
    """200 calls would take 2 s: under a 0.5 s cap the pilot plans from the calls it made
    (at least 20, with the larger factor their spread needs); under 0.1 s it is refused."""
    res = varcheck.plan(16, sampler=_slow, claim=1, detect=0.2, seed=1, max_seconds=0.5)
    row = res.rows[0]
    assert 20 <= row.pilot_blocks < 200 and row.inflation > 1.02
    with pytest.raises(VarcheckError, match="raise max_seconds"):
        varcheck.plan(16, sampler=_slow, claim=1, detect=0.2, seed=1, max_seconds=0.1)


def test_a_file_plan_names_the_claim_a_refusal_is_about(tmp_path: Path) -> None:
    path = tmp_path / "claims.toml"
    path.write_text('[[claim]]\nname = "heavy"\ndk = 8\ndist = "t:df=3"\nclaim = "dk"\n')
    with pytest.raises(VarcheckError, match="claim 'heavy' at d_k=8: no valid interval"):
        varcheck.plan(file=path, detect=0.05)


def test_a_signal_during_a_file_plan_keeps_the_rows_planned(monkeypatch, claims: Path) -> None:
    """Ctrl-C during the second test's pilot: the first row stays, exit 130."""
    from varcheck.checks import plan_file as planning

    made = planning._row
    calls: list[int] = []

    def second_interrupted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return made(*args, **kwargs)

    monkeypatch.setattr(planning, "_row", second_interrupted)
    res = varcheck.plan(file=claims, detect=0.05)
    assert res.interrupted and [(r.name, r.dk) for r in res.rows] == [("textbook", 16)]
    assert res.to_dict()["exit_code"] == 130 and "Interrupted" in str(res)


def test_a_files_own_time_cap_that_would_cut_a_planned_test_is_named(tmp_path: Path) -> None:
    """The file's max_seconds (per test) below a planned test's predicted time: a caution
    naming the test, in the table and the JSON."""
    path = tmp_path / "claims.toml"
    path.write_text(
        '[defaults]\nmax_seconds = 1e-6\n[[claim]]\nname = "gate"\ndk = 16\nclaim = "dk"\n'
    )
    res = varcheck.plan(file=path, detect=0.05, seed=1)
    assert len(res.notes) == 1 and "gate at d_k=16" in res.notes[0]
    assert res.to_dict()["notes"] == list(res.notes) and "Caution: the file's" in str(res)
