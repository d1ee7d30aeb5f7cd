"""Every option of explain, softmax and derive at the edges: 0, negative, NaN, inf, 1e308,
1e-320, a huge number and empty. Each either is refused in one line (exit 2) or gives a result
without NaN where a number is promised; never an internal error (exit 70) and never a hang.
The sizes that once ate memory or ran for ever run in a child under a memory limit."""

from __future__ import annotations

import json
import math
import resource
import subprocess
import sys
import time

import pytest

EDGES = ("0", "-1", "nan", "inf", "1e308", "1e-320", "9" * 400, "")

#: quick settings each case starts from (the option under test replaces its own)
BASE = {
    "explain": {"--replicates": "200", "--seed": "1"},
    "softmax": {"--dk": "2,4", "--keys": "8", "--queries": "960", "--seed": "1"},
    "derive": {"--dk": "4", "--samples": "2000", "--seed": "1"},
}
OPTIONS = {
    "explain": (
        "--shape",
        "--observed",
        "--ddof",
        "--dist",
        "--a-dist",
        "--b-dist",
        "--replicates",
        "--confidence",
        "--seed",
    ),
    "softmax": ("--dk", "--keys", "--queries", "--dist", "--q-dist", "--k-dist", "--seed"),
    "derive": (
        "--dk",
        "--dist",
        "--q-dist",
        "--k-dist",
        "--rho",
        "--precision",
        "--samples",
        "--max-seconds",
        "--confidence",
        "--seed",
    ),
}
#: laws at the edges, for the distribution options
LAWS = (
    "normal:sd=0",
    "normal:sd=1e-320",
    "normal:sd=1e308",
    "normal:mean=1e308",
    "normal:mean=nan",
    "t:df=1e-320",
    "t:df=1e308",
    "uniform:sd=inf",
)
CASES = [
    (command, option, value)
    for command, options in OPTIONS.items()
    for option in options
    for value in (EDGES + LAWS if option.endswith("dist") else EDGES)
]


def _args(command: str, option: str, value: str) -> list[str]:
    settings = dict(BASE[command])
    if option == "--precision":
        settings.pop("--samples")  # --precision and --samples cannot be used together
    if option == "--samples" or option == "--precision":
        # a budget no machine finishes (--precision 1e-320) is accepted under a time cap and
        # runs until it: 1 s shows that as well as 20 (a slow run's fewer blocks give exit 4,
        # accepted below)
        settings.setdefault("--max-seconds", "1")
    settings[option] = value
    return [command, *(x for kv in settings.items() for x in kv), "--format", "json"]


def _numbers(doc: object) -> list[float]:
    """Every float in a JSON document."""
    if isinstance(doc, dict):
        return [x for v in doc.values() for x in _numbers(v)]
    if isinstance(doc, list):
        return [x for v in doc for x in _numbers(v)]
    return [doc] if isinstance(doc, float) else []


@pytest.mark.parametrize(("command", "option", "value"), CASES, ids=lambda v: str(v)[:12])
def test_every_option_at_its_edges(run_cli, command: str, option: str, value: str) -> None:
    start = time.process_time()  # CPU time: a run no budget bounds, not a loaded core
    res = run_cli(*_args(command, option, value))
    assert time.process_time() - start < 30
    assert res.exit_code in (0, 1, 2, 4), res.output
    if res.exit_code == 2:
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and len(lines[0]) < 400, res.output
        assert "error:" in lines[0] and "internal error" not in lines[0]
        return
    doc = json.loads(res.output)
    assert doc["interrupted"] is False
    if command == "softmax":
        # a study has no verdict: every mean and standard error must be a number
        assert all(math.isfinite(x) for x in _numbers(doc["rows"])), doc["rows"]
    elif command == "derive":
        for step in doc["steps"]:
            assert step["verdict"] in ("consistent", "rejected", "unreliable", "infinite")
            if step["verdict"] in ("consistent", "rejected"):
                assert math.isfinite(step["estimate"]) and math.isfinite(step["ci_low"])
    else:
        for reading in (doc, doc["scaled"]):
            if reading["verdict"] in ("consistent", "rejected"):
                assert math.isfinite(reading["p_value"]) and math.isfinite(reading["expected"])


# sizes that once took gigabytes or ran for ever: refused at once, under a 1.5 GB memory limit
HEAVY = [
    (("explain", "--replicates", "2e8"), "memory"),
    (("explain", "--replicates", "1e9"), "memory"),
    (("explain", "--replicates", "1.39e9"), "memory"),
    (("explain", "--replicates", "1e308"), "memory"),
    (("explain", "--shape", "2000x64x2000", "--replicates", "5000"), "would take"),
    (("softmax", "--queries", "1e308"), "would take"),
    (("softmax", "--queries", "1e12"), "would take"),
    (("derive", "--samples", "1e15"), "samples"),
    (("derive", "--samples", "1e308"), "samples"),
    (("derive", "--samples", "1e11"), "would take"),
    (("derive", "--precision", "1e-9"), "precision"),
    (("derive", "--precision", "1e-320"), "precision"),
    (("derive", "--confidence", "1e-320"), "confidence"),
    (("derive", "--confidence", "0.9999999999999999"), "confidence"),
]


def _limit_memory() -> None:
    limit = 1_500_000_000
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # refused before any work: 20 s of CPU (the kernel stops the child past it, exit -24) is
    # far more than the imports and the estimate need, on any machine and at any load
    resource.setrlimit(resource.RLIMIT_CPU, (20, 25))


@pytest.mark.parametrize(
    ("args", "fragment"), HEAVY, ids=[" ".join(args)[:40] for args, _ in HEAVY]
)
def test_infeasible_sizes_are_refused_before_any_work(args: tuple[str, ...], fragment: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from varcheck.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=300,  # a child blocked for good; the CPU limit bounds a computation
        preexec_fn=_limit_memory,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    line = proc.stderr.strip()
    assert "\n" not in line and len(line) < 400 and fragment in line, line
    assert "limit" in line or "must be" in line  # an estimate against its limit, or a range
