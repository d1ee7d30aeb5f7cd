"""``varcheck probe`` on the command line (#23): bad targets and kernels exit 2 with one line,
the formats, the 80-column table, exit codes, a figure.

The CLI runs in process through ``main`` (conftest's ``run_cli``); the refused kernels live in
tests/data/kernels/bad_kernels.py.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from varcheck.core.estimation import MIN_BLOCKS

DATA = Path(__file__).parent / "data" / "kernels"
BAD = f"{DATA}/bad_kernels.py"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "attention_kernels.py"
#: small, at the fewest calls a valid interval rests on
FAST = (
    "--dk",
    "16",
    "--queries",
    "16",
    "--keys",
    "16",
    "--samples",
    str(MIN_BLOCKS),
    "--seed",
    "1",
)


def one_error_line(res) -> str:  # noqa: ANN001
    """The single stderr line of a refused run (exit 2, nothing on stdout, no traceback)."""
    assert res.exit_code == 2, (res.stdout, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("varcheck probe: error: "), lines[0]
    assert "Traceback" not in res.stderr and res.stdout == ""
    return lines[0]


#: (target or options, a fragment of the one error line)
REFUSED = [
    (["no_such_module_vc:fn"], "no module named 'no_such_module_vc'"),
    ([f"{DATA}/missing.py:fn"], "missing.py not found"),
    ([BAD], "has no ':FUNCTION'"),
    ([f"{BAD}:missing"], "has no 'missing'"),
    ([f"{BAD}:NOT_CALLABLE"], "not a function"),
    ([f"{BAD}:two_args"], "cannot be called as fn(q, k, v)"),
    ([f"{BAD}:raises"], "raised RuntimeError: kernel exploded"),
    ([f"{BAD}:wrong_shape"], "returned shape 16x15"),
    ([f"{BAD}:transposed"], "it must return 16x16"),
    ([f"{BAD}:nan"], "returned NaN values"),
    ([f"{BAD}:strings"], "not real numbers"),
    ([f"{BAD}:gpu_tensor"], "numpy cannot read"),
    ([f"{BAD}:negative"], "not a convex combination"),
    ([f"{BAD}:unnormalised"], "sums to"),
    ([f"{BAD}:squared_output"], "not a convex combination"),
    ([f"{BAD}:dropout"], "not softmax attention"),
    ([f"{BAD}:linear_attention"], "linear attention and other normalisations"),
    ([f"{BAD}:random_weights"], "explain only"),
    ([f"{BAD}:one_hot"], "all its weight on one key"),
    ([f"{BAD}:good", "--expect", "1/q"], "unknown name 'q'"),
    ([f"{BAD}:good", "--expect", "0*dk"], "non-zero"),
    ([f"{BAD}:good", "--arg", "dk=3"], "got an unexpected keyword argument 'dk'"),
    ([f"{BAD}:good", "--arg", "q=3"], "passed by varcheck"),
    ([f"{BAD}:good", "--arg", "x=1", "--arg", "x=2"], "--arg x is given twice"),
    ([f"{BAD}:good", "--arg", "x"], "give KEY=VALUE"),
    ([f"{BAD}:good", "--layout", "bhnd"], "raised ValueError"),
    ([f"{BAD}:good", "--samples", "5"], "'5' must be a whole number of calls >= 20 (e.g. 200 or"),
    ([f"{BAD}:good", "--samples", "many"], "give a whole number of calls such as 200 or 1000"),
    ([f"{BAD}:good", "--precision", "0.01", "--samples", "100"], "cannot be used together"),
    ([f"{BAD}:good", "--layout", "nhd"], "--layout"),
]


@pytest.mark.parametrize("args,fragment", REFUSED, ids=[" ".join(a)[-40:] for a, _ in REFUSED])
def test_bad_targets_and_kernels_exit_2_in_one_line(run_cli, args, fragment: str) -> None:  # noqa: ANN001
    extra = ["--dk", "16", "--seed", "1"] if "--samples" in args else list(FAST)
    line = one_error_line(run_cli("probe", *args, *extra))
    assert fragment in line, line


def test_a_passing_kernel_exits_0_and_fits_80_columns(run_cli) -> None:  # noqa: ANN001
    res = run_cli("probe", f"{EXAMPLES}:attention", *FAST)
    assert res.exit_code == 0, res.stderr
    assert "PASS" in res.stdout and "nearest law 1/sqrt(dk)" in res.stdout
    long = [ln for ln in res.stdout.splitlines() if len(ln) > 80 and "reproduce:" not in ln]
    assert not long, long


def test_a_wrong_kernel_exits_1_and_names_the_bug(run_cli) -> None:  # noqa: ANN001
    res = run_cli("probe", f"{EXAMPLES}:layer_scaled", "--arg", "layer=2", *FAST)
    assert res.exit_code == 1
    assert "1/sqrt(dk) × 1/3" in res.stdout and "layer 2" in res.stdout
    assert "--arg layer=2" in res.stdout  # the reproduce command keeps the bound argument


def test_inconclusive_exits_3(run_cli) -> None:  # noqa: ANN001
    res = run_cli("probe", f"{EXAMPLES}:noisy", "--arg", "noise=0.3", *FAST, "--tolerance", "0.001")
    assert res.exit_code == 3, res.stdout


def test_a_sweep_table_fits_80_columns(run_cli) -> None:  # noqa: ANN001
    res = run_cli("probe", f"{EXAMPLES}:scale_forgotten", "--dk", "8..128", *FAST[2:])
    assert res.exit_code == 1
    assert "b = 0" in res.stdout.replace("b = 0.000", "b = 0") and "(rejected)" in res.stdout
    long = [ln for ln in res.stdout.splitlines() if len(ln) > 80 and "reproduce:" not in ln]
    assert not long, long


def test_json_csv_markdown(run_cli) -> None:  # noqa: ANN001
    target = f"{EXAMPLES}:alibi"
    data = json.loads(run_cli("probe", target, *FAST, "--format", "json").stdout)
    row = data["rows"][0]
    assert row["diagnostics"]["bias"] == "alibi" and row["outcome"] == "pass"
    assert data["seed"] == 1 and data["exponent"] is None
    text = run_cli("probe", target, *FAST, "--format", "csv-meta").stdout
    assert text.startswith("# command=probe")
    rows = list(csv.DictReader(io.StringIO(text.split("\n", 1)[1])))
    assert rows[0]["law"] == "1/sqrt(dk)" and rows[0]["bias"] == "alibi"
    md = run_cli("probe", target, *FAST, "--format", "markdown").stdout
    assert md.startswith("**varcheck probe") and "| dk |" in md


def test_a_figure(run_cli, tmp_path) -> None:  # noqa: ANN001
    pytest.importorskip("matplotlib")
    out = tmp_path / "probe.png"
    res = run_cli("probe", f"{EXAMPLES}:attention", "--dk", "8,16", *FAST[2:], "--plot", str(out))
    assert res.exit_code == 0 and out.stat().st_size > 0


def test_the_same_seed_gives_the_same_output(run_cli) -> None:  # noqa: ANN001
    a = run_cli("probe", f"{EXAMPLES}:noisy", *FAST, "--format", "json").stdout
    b = run_cli("probe", f"{EXAMPLES}:noisy", *FAST, "--format", "json").stdout
    assert a == b


def test_a_kernel_rounding_coarser_than_its_numbers_needs_its_dtype(run_cli) -> None:  # noqa: ANN001
    target = f"{EXAMPLES}:float16_inside"
    line = one_error_line(run_cli("probe", target, *FAST))
    assert re.search(r"sums to \d\.\d{5} \(1 [+−] 0\.000\d+\)", line)
    assert "give --dtype float16" in line
    assert run_cli("probe", target, *FAST, "--dtype", "float16").exit_code == 0


def test_the_format_a_kernel_computes_in_is_said(run_cli) -> None:  # noqa: ANN001
    res = run_cli("probe", f"{EXAMPLES}:half_precision_upcast", *FAST)
    assert res.exit_code == 0, res.stdout
    text = " ".join(res.stdout.split())
    said = "format: computes in float16 (read off the float32 array it returns: every weight"
    assert said in text
    row = json.loads(
        run_cli("probe", f"{EXAMPLES}:softmax_in_float32", *FAST, "--format", "json").stdout
    )["rows"][0]
    assert (row["computes_in"], row["returned"], row["format_source"]) == (
        "float32",
        "float64",
        "values",
    )


def test_the_default_queries_and_keys_are_the_apis_and_catch_a_token_count_scale(run_cli) -> None:  # noqa: ANN001
    """--queries and --keys default to the API's 48 and 80 (no power of two, unequal): a kernel
    dividing by √n in place of √d_k fails at d_k = 64, and the rerun line adds neither."""
    from varcheck.core.probe.judge import KEYS, QUERIES

    assert (QUERIES, KEYS) == (48, 80)
    res = run_cli(
        "probe",
        f"{EXAMPLES}:scaled_by_tokens",
        "--dk",
        "64",
        "--samples",
        str(MIN_BLOCKS),
        "--seed",
        "1",
        "--format",
        "json",
    )
    assert res.exit_code == 1, res.stdout
    row = json.loads(res.stdout)["rows"][0]
    assert (row["queries"], row["keys"], row["dv"], row["outcome"]) == (48, 80, 80, "fail")
    text = run_cli("probe", f"{EXAMPLES}:attention", "--dk", "64", "--samples", "20", "--seed", "1")
    assert "--queries" not in text.stdout and "--keys" not in text.stdout


TUPLE_KERNEL = """
import numpy as np

def with_weights(q, k, v):
    x = q @ k.T / np.sqrt(q.shape[-1])
    w = np.exp(x - x.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return w @ v, w
"""


@pytest.mark.parametrize("dv", [None, "16"])
def test_a_kernel_returning_out_and_weights_is_told_to_return_only_the_output(
    run_cli,
    tmp_path,
    dv,  # noqa: ANN001
) -> None:
    """(out, weights) read as one 2 x n x m array said 'returned shape 2x48x80', and with
    d_v < m 'numpy cannot read' it: both now name the tuple and say what to return."""
    path = tmp_path / "tuple_kernel.py"
    path.write_text(TUPLE_KERNEL)
    extra = [] if dv is None else ["--dv", dv]
    line = one_error_line(
        run_cli(
            "probe", f"{path}:with_weights", "--dk", "16", *extra, "--samples", "20", "--seed", "1"
        )
    )
    want = "48x80" if dv is None else "48x16"
    assert f"returned a tuple of 2 arrays; return only the output ({want})" in line, line
    assert "shape 2x" not in line and "--layout" not in line, line
