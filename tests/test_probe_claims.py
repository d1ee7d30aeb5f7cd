"""Probe claims in claim files: ``probe = "TARGET"`` rows, their Holm family, JUnit, bad input."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

import varcheck
from varcheck.checks.claim_file import check, load_check_file
from varcheck.checks.render import render_check_table
from varcheck.core.verdicts import holm_adjust

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "examples" / "attention_kernels.py"
EXAMPLE = ROOT / "examples" / "probe_claims.toml"


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "claims.toml"
    path.write_text(body, encoding="utf-8")
    return path


def _claim(name: str, kernel: str, extra: str = "", dk: str = "64") -> str:
    return f'[[claim]]\nname = "{name}"\nprobe = "{KERNELS}:{kernel}"\ndk = {dk}\n{extra}\n'


def test_example_file_passes_and_every_row_is_a_probe() -> None:
    spec = load_check_file(EXAMPLE)
    assert all(c.probe is not None for c in spec.claims) and spec.seed == 2024
    res = check(EXAMPLE)
    assert res.outcome == "pass" and res.exit_code == 0
    rows = [r for c in res.claims for r in c.results]
    assert len(rows) == res.family_size == 9
    exact, half = rows[:-1], rows[-1]  # the last claim's kernel computes in float16
    assert all(abs(r.estimate / r.claim_value - 1) < 1e-9 for r in exact)
    assert abs(half.estimate / half.claim_value - 1) < 0.01


def test_a_probe_claim_reads_what_varcheck_probe_reads() -> None:
    res = check(EXAMPLE, seed=11)
    row = res.claims[0].results[1]
    alone = varcheck.probe(f"{KERNELS}:attention", 64, seed=11)
    assert (row.dk, row.estimate, row.samples) == (64, alone.scale, alone.calls)
    assert tuple(row.confidence_interval) == tuple(alone.confidence_interval)


def test_wrong_scales_fail_and_the_family_is_holm_over_both_kinds(tmp_path: Path) -> None:
    body = "[defaults]\nprecision = 0.05\n" + "\n".join(
        [
            '[[claim]]\nname = "var"\ndk = [4, 16]\nclaim = "dk"\n',
            _claim("forgotten", "scale_forgotten"),
            _claim("heads", "alibi_heads", 'layout = "bhnd"'),
        ]
    )
    res = check(_write(tmp_path, body), seed=5)
    by_name = {c.spec.name: c for c in res.claims}
    assert by_name["forgotten"].outcome == "fail"
    assert by_name["var"].outcome == "pass" and by_name["heads"].outcome == "pass"
    assert res.family_size == 2 + 1 + 2  # two d_k, one head, two heads
    assert res.exit_code == 1
    forgotten = by_name["forgotten"].results[0]
    assert forgotten.p_value < 1e-10 and "excludes" in forgotten.reason
    assert forgotten.p_equivalence is None and forgotten.p_outside is None


def test_variance_rows_are_adjusted_over_the_whole_family(tmp_path: Path) -> None:
    var_only = _write(tmp_path, '[[claim]]\nname = "var"\ndk = [4, 16, 64]\nclaim = "dk"\n')
    alone = check(var_only, seed=3, precision=0.05)
    both = tmp_path / "both.toml"
    both.write_text(var_only.read_text() + _claim("k", "attention"), encoding="utf-8")
    joint = check(both, seed=3, precision=0.05)
    raw = [r.raw.p_value(r.claim_value) for r in alone.claims[0].results]
    assert [r.p_value for r in alone.claims[0].results] == pytest.approx(holm_adjust(raw))
    probe_raw = joint.claims[1].results[0].p_value  # the exact kernel: raw p is 1
    expected = holm_adjust([*raw, 1.0])
    got = [r.p_value for r in joint.claims[0].results] + [probe_raw]
    assert got == pytest.approx(expected)
    assert [r.estimate for r in joint.claims[0].results] == [
        r.estimate for r in alone.claims[0].results
    ]


def test_causal_claim_fails_without_the_mask_and_names_the_mask(tmp_path: Path) -> None:
    body = _claim("c", "attention", "causal = true") + _claim("d", "causal", "causal = true")
    res = check(_write(tmp_path, body), seed=2)
    c, d = res.claims
    assert c.outcome == "fail" and "causal mask was expected" in c.results[0].reason
    assert d.outcome == "pass"


def test_tolerance_is_the_tost_of_assert(tmp_path: Path) -> None:
    body = _claim("tight", "noisy", "tolerance = 0.02")
    row = check(_write(tmp_path, body), seed=4).claims[0].results[0]
    assert row.outcome == "pass" and "whole 90% interval" in row.reason
    lo, hi = row.equivalence_interval
    wide = row.confidence_interval
    assert wide.low < lo < hi < wide.high  # the 90% interval inside the 95% one
    assert row.p_equivalence < 0.05 and row.p_outside == 1.0 and not math.isnan(row.p_value)


def test_a_probe_row_inside_the_band_is_not_failed_by_its_point_p_value(tmp_path: Path) -> None:
    """A kernel whose scale is 1.5% above the expected one, T = 0.02 (the noisy kernel with
    logit noise 0.3, interval about ±1%): the point p-value excludes the expected scale, but the
    scale is inside the band, so the row never fails; Holm adjusts its p_outside (1: the
    estimate is inside the band), and the table's p column shows it."""
    extra = 'tolerance = 0.02\nexpect = "1/(1.015*sqrt(dk))"\nargs = { noise = 0.3 }'
    path = _write(tmp_path, "[defaults]\nprecision = 0.01\n" + _claim("in", "noisy", extra, "32"))
    rows = [check(path, seed=s).claims[0].results[0] for s in range(6)]
    assert all(r.outcome != "fail" for r in rows)
    assert any(r.p_value < 0.05 for r in rows)
    assert all(r.p_outside == 1.0 for r in rows)


def test_cli_json_and_junit_carry_probe_rows(run_cli, tmp_path: Path) -> None:
    body = _claim("ok", "attention") + _claim("bug", "scaled_twice")
    path = _write(tmp_path, body)
    report = tmp_path / "r.xml"
    res = run_cli("check", str(path), "--format", "json", "--junit-xml", str(report), "--seed", "1")
    assert res.exit_code == 1, res.output
    doc = json.loads(res.output)
    assert [c["outcome"] for c in doc["claims"]] == ["pass", "fail"]
    assert doc["claims"][1]["probe"]["target"].endswith(":scaled_twice")
    suite = ET.parse(report).getroot()[0]
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {"ok", "bug"}
    assert cases["bug"].find("failure") is not None and cases["ok"].find("failure") is None


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ('claim = "dk"', "claim belongs to a variance claim"),
        ('dist = "normal"', "dist belongs to a variance claim"),
        ('causal = "yes"', "causal must be true or false"),
        ('layout = "ndh"', "layout must be one of nd, bhnd, bnhd"),
        ('expect = "1/sqrt(q)"', "unknown name 'q'"),
        ("args = 3", "args must be a table"),
        ("args = { nope = 1 }", "nope"),
        ("tolerance = 2", "tolerance must be in (0, 1)"),
    ],
)
def test_bad_probe_claims_are_one_line_naming_the_claim(
    run_cli, tmp_path: Path, extra: str, fragment: str
) -> None:
    res = run_cli("check", str(_write(tmp_path, _claim("p", "attention", extra))))
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    assert "claims.toml:1: claim 'p'" in res.output and fragment in res.output, res.output


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ('[[claim]]\nname = "p"\ndk = 8\nprobe = 3\n', "probe must be a string"),
        ('[[claim]]\nname = "p"\ndk = 8\nprobe = "nofile.py:f"\n', "nofile.py"),
        ('[[claim]]\nname = "p"\ndk = 8\nclaim = "dk"\nexpect = "1/dk"\n', "describes a probe"),
        (_claim("p", "linear_attention"), "not softmax attention"),
        (_claim("p", "unnormalised"), "not softmax attention"),
    ],
)
def test_bad_targets_and_kernels_exit_2(run_cli, tmp_path: Path, body: str, fragment: str) -> None:
    res = run_cli("check", str(_write(tmp_path, body)))
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    assert "claim 'p'" in res.output and fragment in res.output, res.output


def test_a_relative_kernel_file_is_read_next_to_the_claim_file(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text(KERNELS.read_text(encoding="utf-8"), encoding="utf-8")
    path = _write(tmp_path, '[[claim]]\nname = "p"\nprobe = "k.py:attention"\ndk = 8\n')
    assert check(path, seed=1).outcome == "pass"


def test_probe_rows_say_scale_and_calls(run_cli, tmp_path: Path) -> None:
    """Guards against probe rows labelled as a sampler's Var(values) (#23): the table says
    "scale", the JUnit paragraph "kernel ..., N calls" and "more calls", with no sampler
    heavy-tail caution; JSON names each claim's kernel under "probe" (null otherwise)."""
    body = '[[claim]]\nname = "var"\ndk = 4\nclaim = "dk"\n' + _claim("bug", "scaled_twice")
    path = _write(tmp_path, body)
    report = tmp_path / "r.xml"
    run_cli("check", str(path), "--seed", "1", "--junit-xml", str(report))
    console = Console(width=200, file=io.StringIO())
    render_check_table(check(path, seed=1, precision=0.05), console)
    table = console.file.getvalue()
    assert "scale = 1/sqrt(dk) of" in table and "Var(values)" not in table
    assert "heavy-tailed" not in table
    details = ET.parse(report).getroot()[0].find("testcase[@name='bug']/failure").text
    assert "claim scale = 1/sqrt(dk) at d_k=64 (kernel " in details
    assert ":scaled_twice, " in details and " calls)" in details and "values" not in details
    doc = json.loads(run_cli("check", str(path), "--seed", "1", "--format", "json").output)
    assert doc["claims"][0]["probe"] is None
    assert doc["claims"][1]["probe"] == {"target": f"{KERNELS}:scaled_twice", "args": {}}
    row = check(path, seed=1).claims[1].results[0]
    assert row.kernel is not None and row.kernel.target.endswith(":scaled_twice")
    assert check(path, seed=1).claims[0].results[0].kernel is None


def test_a_probe_claim_takes_queries_keys_heads_and_dtype(tmp_path: Path) -> None:
    """A kernel rounding in float16 inside and returning float32 numbers is refused without its
    dtype: a claim file gives it, and the shapes, as --queries, --keys, --heads, --dtype."""
    half = _claim("half", "half_precision_upcast", 'dtype = "float16"')
    shaped = _claim("shaped", "alibi_heads", 'layout = "bhnd"\nheads = 3\nqueries = 24\nkeys = 40')
    width = _claim(
        "width", "model_width", 'heads = 4\nargs = { heads = 4 }\nexpect = "1/sqrt(dk*h)"'
    )
    path = _write(tmp_path, "[defaults]\nprecision = 0.05\n" + half + shaped + width)
    spec = load_check_file(path)
    h, s, w = (c.probe for c in spec.claims)
    assert (h.dtype, h.queries, h.keys, h.heads) == ("float16", 48, 80, None)
    assert (s.layout, s.heads, s.queries, s.keys, s.law_heads) == ("bhnd", 3, 24, 40, 3)
    assert (w.layout, w.law_heads) == ("nd", 4)
    res = check(path, seed=3)
    assert [c.outcome for c in res.claims] == ["pass", "pass", "pass"], [
        r.reason for c in res.claims for r in c.results
    ]
    assert res.family_size == 1 + 3 + 1  # one head, three heads, one head
    alone = varcheck.probe(
        f"{KERNELS}:alibi_heads",
        64,
        layout="bhnd",
        heads=3,
        queries=24,
        keys=40,
        precision=0.05,
        seed=3,
    )
    assert res.claims[1].results[0].estimate == alone.scale
    refused = _write(tmp_path, _claim("half", "float16_inside"))
    with pytest.raises(varcheck.VarcheckError, match="give --dtype float16"):
        check(refused, seed=3)


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ("queries = 1", "queries must be a whole number in 2..4096, got 1"),
        ("keys = 5000", "keys must be a whole number in 2..4096, got 5000"),
        ("keys = 8.5", "keys must be a whole number in 2..4096"),
        ("heads = 0", "heads must be a whole number in 1..1024, got 0"),
        ("heads = true", "heads must be a whole number"),
        ('dtype = "int8"', "dtype 'int8' is not one of float64, float32, float16, bfloat16"),
        ("dtype = 16", "dtype must be one of float64, float32, float16, bfloat16, got 16"),
    ],
)
def test_bad_shapes_and_dtypes_are_one_line_naming_the_claim(
    run_cli, tmp_path: Path, extra: str, fragment: str
) -> None:
    res = run_cli("check", str(_write(tmp_path, _claim("p", "attention", extra))))
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    assert "claims.toml:1: claim 'p'" in res.output and fragment in res.output, res.output


def test_shape_keys_without_probe_describe_a_probe(run_cli, tmp_path: Path) -> None:
    body = '[[claim]]\nname = "v"\ndk = 8\nclaim = "dk"\nqueries = 48\n'
    res = run_cli("check", str(_write(tmp_path, body)))
    assert res.exit_code == 2 and "queries describes a probe" in res.output, res.output


def test_probe_rows_carry_no_variance_fields_in_json_and_csv(run_cli, tmp_path: Path) -> None:
    """A probe row's sampler, scaled, rho and q_dist/k_dist mean nothing for a kernel: present
    (the keys are those of every row) but null; the claim's "probe" names the kernel."""
    body = '[[claim]]\nname = "var"\ndk = 4\nclaim = "dk"\n' + _claim("k", "attention")
    path = _write(tmp_path, body)
    doc = json.loads(run_cli("check", str(path), "--seed", "1", "--format", "json").output)
    var, probe = (c["tests"][0] for c in doc["claims"])
    assert list(var) == list(probe)
    assert {k: probe[k] for k in ("sampler", "scaled", "rho", "q_dist", "k_dist")} == dict.fromkeys(
        ("sampler", "scaled", "rho", "q_dist", "k_dist")
    )
    assert (var["scaled"], var["rho"], var["q_dist"]) == (False, 0.0, "normal")
    assert doc["claims"][1]["probe"]["target"].endswith(":attention")
    text = run_cli("check", str(path), "--seed", "1", "--format", "csv").output
    rows = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))
    assert rows[1]["sampler"] == rows[1]["scaled"] == rows[1]["rho"] == "", rows[1]


def test_a_failing_probe_rows_junit_names_its_law_and_the_probe_that_shows_it(
    run_cli, tmp_path: Path
) -> None:
    """The failure message reads the scale as ``varcheck probe`` does (× 1/2 of the expected
    scale: nearest law …); the details give the ``varcheck probe TARGET --dk D --seed S`` line,
    which prints the row's numbers, and the file's rerun."""
    (tmp_path / "k.py").write_text(KERNELS.read_text(encoding="utf-8"), encoding="utf-8")
    body = (
        '[defaults]\nprecision = 0.05\n[[claim]]\nname = "width"\nprobe = "k.py:model_width"\n'
        "dk = 64\nqueries = 24\n"
    )
    path = _write(tmp_path, body)
    report = tmp_path / "r.xml"
    res = run_cli("check", str(path), "--seed", "7", "--junit-xml", str(report))
    assert res.exit_code == 1, res.output
    failure = ET.parse(report).getroot()[0].find("testcase[@name='width']/failure")
    message = failure.get("message")
    assert message.startswith(
        "fail: the interval excludes the claimed value; × 1/2 of the "
        "expected scale: nearest law 1/sqrt(dk) × 1/2"
    ), message
    assert message.endswith("(d_k=64)"), message
    lines = failure.text.splitlines()
    command = (
        f"varcheck probe {tmp_path}/k.py:model_width --dk 64 --queries 24 --precision 0.05 --seed 7"
    )
    assert f"  reproduce: {command}" in lines, lines
    assert f"  rerun the file: varcheck check {path} --seed 7 --precision 0.05" in lines, lines
    assert any(ln.startswith("  × 1/2 of the expected scale: nearest law") for ln in lines)
    shown = json.loads(run_cli(*command.split()[1:], "--format", "json").stdout)["rows"][0]
    row = check(path, seed=7).claims[0].results[0]
    assert (shown["scale"], shown["calls"]) == (row.estimate, row.samples)
    assert (shown["law"], shown["factor_label"]) == ("1/sqrt(dk)", "1/2")


def test_a_passing_probe_row_reads_the_expected_scale(tmp_path: Path) -> None:
    from varcheck.checks.render import check_to_junit

    res = check(_write(tmp_path, _claim("ok", "attention", "causal = false")), seed=1)
    out = ET.fromstring(check_to_junit(res)).find(".//testcase[@name='ok']/system-out").text
    assert "  the expected scale: nearest law 1/sqrt(dk) (the standard 1/√d_k)" in out, out
    assert f"  reproduce: varcheck probe {KERNELS}:attention --dk 64 --seed 1" in out, out


def test_an_interrupted_probe_claim_keeps_its_row_and_stops_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against Ctrl-C or SIGTERM during a probe claim dropping the calls it had made: the
    row under way is kept (marked interrupted), and no variance test starts after it."""
    from varcheck.checks import claim_file, probe_claims

    real = probe_claims.run_probe

    def cut_short(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        run = real(*args, **kwargs)
        cut = dataclasses.replace(run.measurement, stop_reason="interrupted")
        raise probe_claims.PartialProbeRun(dataclasses.replace(run, measurement=cut))

    monkeypatch.setattr(claim_file, "run_probe", cut_short)
    body = '[[claim]]\nname = "var"\ndk = 4\nclaim = "dk"\n' + _claim("p", "attention")
    res = check(_write(tmp_path, body), seed=3, precision=0.05)
    assert res.interrupted and res.exit_code == 130
    by_name = {c.spec.name: c for c in res.claims}
    assert len(by_name["p"].results) == 1
    assert not by_name.get("var", None) or not by_name["var"].results


def test_a_probe_claim_takes_out_layout_and_kv_heads(tmp_path: Path) -> None:
    kernels = Path(__file__).parent / "data" / "kernels" / "reading_kernels.py"
    body = (
        f'[[claim]]\nname = "hf"\nprobe = "{kernels}:heads_last"\ndk = 16\n'
        'layout = "bhnd"\nout_layout = "bnhd"\nheads = 2\n'
        f'[[claim]]\nname = "gqa"\nprobe = "{kernels}:grouped"\ndk = 16\n'
        'layout = "bhnd"\nheads = 4\nkv_heads = 2\n'
    )
    res = check(_write(tmp_path, "[defaults]\nprecision = 0.05\n" + body), seed=1)
    assert [c.outcome for c in res.claims] == ["pass", "pass"]
    assert res.family_size == 2 + 4
