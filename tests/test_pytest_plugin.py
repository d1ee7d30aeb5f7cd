"""The pytest plugin (``varcheck.pytest_plugin``) exercised for real, through pytester.

Every inner run pins ``--varcheck-seed`` except the two that test the drawn seed; those assert
only what holds at every seed: the right sampler's variance is 1, tested within ±30% at
default precision (an interval of about ±1%, so the band holds it with certainty), and the
wrong one's is d_k = 16, hundreds of standard errors from the claimed 1. Samplers return the
16 x 16 logits of one Q, K (256 dependent values a call), so each assertion takes well under a
second. Runs are in-process, except one subprocess run that proves installation alone is
enough; in both the plugin is loaded through its entry point, as in a user's project.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

SAMPLERS = """
import numpy as np


def logits(rng, dk):
    q, k = rng.standard_normal((16, dk)), rng.standard_normal((16, dk))
    return q @ k.T / np.sqrt(dk)


def logits_unscaled(rng, dk):
    q, k = rng.standard_normal((16, dk)), rng.standard_normal((16, dk))
    return q @ k.T
"""

CLAIMS = """
from vc_samplers import logits, logits_unscaled


def test_unit_variance(varcheck):
    result = varcheck.assert_variance(16, claim=1, sampler=logits, tolerance=0.3)
    print(f"ESTIMATE pass {result.estimate!r} {result.seed} {varcheck.seed}")


def test_forgot_the_scale(varcheck):
    varcheck.assert_variance(16, claim=1, sampler=logits_unscaled)
"""

SEEDS = """
from vc_samplers import logits


def show(name, result):
    print(f"ESTIMATE {name} {result.estimate!r} {result.seed} {result.confidence!r}")


def test_two_calls(varcheck):
    show("first", varcheck.verify(16, claim=1, sampler=logits, samples=4096))
    show("second", varcheck.verify(16, claim=1, sampler=logits, samples=4096))
    print(f"ESTIMATE fixture_seed 0 {varcheck.seed} 0")


def test_other(varcheck):
    show("other", varcheck.verify(16, claim=1, sampler=logits, samples=4096))


def test_explicit_seed_and_level(varcheck):
    show("explicit", varcheck.verify(16, claim=1, sampler=logits, samples=4096, seed=5))
    show("conf90", varcheck.verify(16, claim=1, sampler=logits, samples=4096, confidence=0.9))
    show("alpha20", varcheck.verify(16, claim=1, sampler=logits, samples=4096, alpha=0.2))
"""

HEADER = re.compile(
    r"^varcheck: seed (\d+) \(reproduce with --varcheck-seed \1\), alpha ([0-9.e-]+)$"
)

# what would show if __tracebackhide__ failed: the plugin's frames and their source
PLUGIN_SOURCE = ("pytest_plugin.py", "__tracebackhide__", "raise AssertionError", "def verify")


@pytest.fixture(autouse=True)
def _outer_imports(monkeypatch) -> None:
    """What inner runs import must already be loaded here: pytester unloads modules an
    in-process run imported, and numpy cannot be imported twice in one process."""
    import numpy  # noqa: F401

    import varcheck.checks.render  # noqa: F401
    import varcheck.checks.verify  # noqa: F401

    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(vc_samplers=SAMPLERS, test_vc_claims=CLAIMS, test_vc_seeds=SEEDS)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def _estimates(result: pytest.RunResult) -> dict[str, tuple[str, int, str]]:
    """The ``ESTIMATE name value seed extra`` lines the inner tests print (with ``-s``)."""
    found = {}
    for line in result.outlines:  # a print may follow pytest's "test_file.py " on its line
        if m := re.search(r"ESTIMATE (\S+) (\S+) (\d+) (\S+)", line):
            found[m.group(1)] = (m.group(2), int(m.group(3)), m.group(4))
    return found


def _header_seed(result: pytest.RunResult) -> tuple[int, str]:
    lines = [m for line in result.outlines if (m := HEADER.match(line))]
    assert len(lines) == 1, result.outlines[:6]
    return int(lines[0].group(1)), lines[0].group(2)


def test_installing_varcheck_is_enough(project: pytest.Pytester) -> None:
    """A subprocess pytest with no ``-p``: the pytest11 entry point alone loads the plugin; the
    header shows the drawn seed; the right sampler passes and the wrong one fails with the
    short message, the command that reproduces it and none of the plugin's source."""
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "test_vc_claims.py")
    result.assert_outcomes(passed=1, failed=1)
    seed, alpha = _header_seed(result)
    assert alpha == "0.05"
    result.stdout.fnmatch_lines(
        [
            "E * varcheck: FAIL: claim Var(values) = 1 at d_k=16 (sampler vc_samplers:logits_u*",
            "E * claimed value 1.0*",
            "E * estimate 1?.*, 95% interval [[]1?.*, 1?.*[]] from *values; p = <1e-4",
            "E * the interval excludes the claimed value",
            'E * reproduce: pytest "test_vc_claims.py::test_forgot_the_scale" '
            f"--varcheck-seed {seed}",
        ]
    )
    text = "\n".join(result.outlines)
    assert not [s for s in PLUGIN_SOURCE if s in text]
    # a sampler passed as a callable cannot be rerun by `varcheck assert`: only pytest is offered
    assert "varcheck assert" not in text


def test_drawn_seed_reproduces(project: pytest.Pytester) -> None:
    """Rerunning one test with the seed from the header gives exactly its first run."""
    first = _run(project, "-s", "test_vc_claims.py::test_unit_variance")
    seed, _ = _header_seed(first)
    again = _run(
        project, "-s", "test_vc_claims.py::test_unit_variance", "--varcheck-seed", str(seed)
    )
    assert _estimates(again) == _estimates(first) != {}
    _, call_seed, fixture_seed = _estimates(first)["pass"]
    assert call_seed == int(fixture_seed)  # varcheck.seed is the first call's seed


def test_pinned_seed_is_deterministic_and_per_test(project: pytest.Pytester) -> None:
    """Same seed, same estimates; another seed, other estimates; a test's seed does not
    depend on the other tests run with it; two calls in one test are two draws; ``seed=``
    wins."""
    runs = {
        s: _estimates(_run(project, "-s", "test_vc_seeds.py", "--varcheck-seed", s)) for s in "78"
    }
    assert runs["7"] == _estimates(_run(project, "-s", "test_vc_seeds.py", "--varcheck-seed", "7"))
    alone = _estimates(_run(project, "-s", "test_vc_seeds.py::test_other", "--varcheck-seed", "7"))
    assert alone["other"] == runs["7"]["other"]
    seven, eight = runs["7"], runs["8"]
    for name in ("first", "second", "other"):
        assert seven[name][0] != eight[name][0]
    assert seven["first"][0] != seven["second"][0]
    assert seven["first"][1] == seven["fixture_seed"][1]
    assert len({seven[n][1] for n in ("first", "second", "other")}) == 3
    assert seven["explicit"][:2] == eight["explicit"][:2] and seven["explicit"][1] == 5


def test_alpha_option_sets_the_default_level(project: pytest.Pytester) -> None:
    """``--varcheck-alpha`` sets the confidence of calls that give none; the header and the
    reproduce command carry it; calls that give confidence or alpha keep theirs."""
    levels = {}
    for alpha in (None, "0.01"):
        extra = () if alpha is None else ("--varcheck-alpha", alpha)
        result = _run(project, "-s", "--varcheck-seed", "3", "test_vc_seeds.py", *extra)
        assert _header_seed(result) == (3, alpha or "0.05")
        levels[alpha] = {k: float(v[2]) for k, v in _estimates(result).items()}
    assert levels[None]["other"] == 0.95 and levels["0.01"]["other"] == 0.99
    for levels_of_run in levels.values():
        assert levels_of_run["conf90"] == 0.9 and levels_of_run["alpha20"] == 0.8
    failed = _run(project, "--varcheck-seed", "3", "--varcheck-alpha", "0.01", "test_vc_claims.py")
    failed.stdout.fnmatch_lines(
        [
            "E * estimate *, 99% interval *",
            'E * reproduce: pytest "test_vc_claims.py::test_forgot_the_scale" --varcheck-seed 3 '
            "--varcheck-alpha 0.01",
        ]
    )


def test_inconclusive_equivalence_fails(pytester: pytest.Pytester) -> None:
    """200 calls cannot put the interval inside ±1%: the test fails as inconclusive and says
    how many more values would settle it."""
    pytester.makepyfile(vc_samplers=SAMPLERS)
    pytester.makepyfile(
        """
        from vc_samplers import logits

        def test_tight(varcheck):
            varcheck.assert_variance(16, claim=1, sampler=logits, tolerance=0.01, samples=2000)
        """
    )
    result = _run(pytester, "--varcheck-seed", "11")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E * varcheck: INCONCLUSIVE: claim Var(values) = 1 within ±0.01 (relative) at d_k=16*",
            "E * about * more values would settle it",
            "E * inconclusive counts as a failure*",
        ]
    )


def test_named_sampler_offers_the_varcheck_command(project: pytest.Pytester) -> None:
    """With the sampler given by name, the message also gives ``varcheck assert ... --seed``
    with the test's seed, and that command finds the same estimate."""
    project.makepyfile(
        test_vc_named="""
        def test_named(varcheck):
            varcheck.assert_variance(16, claim=1, sampler="vc_samplers.py:logits_unscaled")
        """
    )
    result = _run(project, "--varcheck-seed", "5", "test_vc_named.py")
    result.assert_outcomes(failed=1)
    text = "\n".join(result.outlines)
    command = re.search(r"or: (varcheck assert .*--seed \d+)$", text, re.MULTILINE)
    assert command and "--sampler vc_samplers.py:logits_unscaled" in command.group(1)
    argv = [sys.executable, "-m", *shlex.split(command.group(1))]
    cli = subprocess.run(argv, cwd=project.path, capture_output=True, text=True, check=False)
    assert cli.returncode == 1, cli.stderr
    estimate = re.search(r"estimate [^;]*", text).group(0)
    assert estimate in cli.stdout


def test_a_sampler_file_next_to_the_test_is_found_from_the_root(
    pytester: pytest.Pytester,
) -> None:
    """``pytest`` run from the project's root with the tests in tests/: a sampler named
    ``mylayer.py:logits`` next to the test file is found there, and the rerun command names it
    by its path from the root, where that command is run."""
    tests = pytester.mkdir("tests")
    (tests / "mylayer.py").write_text(SAMPLERS)
    (tests / "test_layer.py").write_text(
        "def test_layer(varcheck):\n"
        "    varcheck.assert_variance(16, claim=1, sampler='mylayer.py:logits_unscaled')\n"
    )
    result = _run(pytester, "--varcheck-seed", "5", "tests/test_layer.py")
    result.assert_outcomes(failed=1)
    text = "\n".join(result.outlines)
    assert "not found" not in text
    assert "--sampler tests/mylayer.py:logits_unscaled" in text


def test_bad_call_is_one_line_without_varcheck_frames(pytester: pytest.Pytester) -> None:
    """A VarcheckError (here: ``theory`` with a user's sampler) keeps its type and one-line
    message, without the frames of varcheck's internals."""
    pytester.makepyfile(vc_samplers=SAMPLERS)
    pytester.makepyfile(
        """
        from vc_samplers import logits

        def test_theory(varcheck):
            varcheck.assert_variance(16, claim="theory", sampler=logits)
        """
    )
    result = _run(pytester, "--varcheck-seed", "1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["E *VarcheckError: claim 'theory' uses theory*"])
    text = "\n".join(result.outlines)
    assert "varcheck/checks" not in text and "varcheck/core" not in text
    assert not [s for s in PLUGIN_SOURCE if s in text]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--varcheck-seed", "-1"),
        ("--varcheck-seed", "abc"),
        ("--varcheck-seed", "1.5"),
        ("--varcheck-alpha", "0"),
        ("--varcheck-alpha", "1"),
        ("--varcheck-alpha", "abc"),
    ],
)
def test_bad_option_is_one_line_usage_error(
    pytester: pytest.Pytester, option: str, value: str
) -> None:
    pytester.makepyfile("def test_nothing(varcheck): pass")
    result = _run(pytester, f"{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.errlines if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"ERROR: {option} must be "), lines
    assert lines[0].endswith(f"got {value!r}")


def test_plugin_import_is_light() -> None:
    """Every pytest run of every project with varcheck installed imports the plugin: it must
    not pull in numpy or scipy (they load when a test uses the fixture)."""
    code = (
        "import sys, varcheck.pytest_plugin; print(sorted({'numpy', 'scipy'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


KERNELS = """
import numpy as np


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(q, k, v):
    return _softmax(q @ k.T / np.sqrt(q.shape[-1])) @ v


def layer_scaled(q, k, v, layer=2):
    return _softmax(q @ k.T / np.sqrt(q.shape[-1]) / (layer + 1)) @ v


def not_attention(q, k, v):
    return np.exp(q @ k.T) @ v
"""


@pytest.fixture
def kernels(pytester: pytest.Pytester) -> pytest.Pytester:
    import varcheck.kernels.probe  # noqa: F401 - loaded here: pytester unloads inner imports
    import varcheck.kernels.render  # noqa: F401

    pytester.makepyfile(vc_kernels=KERNELS)
    return pytester


def test_assert_scale_passes_a_kernel_and_names_a_bug(kernels: pytest.Pytester) -> None:
    """``assert_scale`` passes the right kernel and fails the wrong one with the short
    paragraph: expected and effective scale, the nearest law with the factor left over, and
    the commands that reproduce it (``varcheck probe`` too, for a kernel given by name)."""
    kernels.makepyfile(
        test_vc_scale="""
        from vc_kernels import attention

        def test_right(varcheck):
            result = varcheck.assert_scale(attention, 16, queries=16, keys=16)
            assert result.outcome == "pass" and result.seed == varcheck.seed

        def test_layer(varcheck):
            varcheck.assert_scale("vc_kernels.py:layer_scaled", 16, queries=16, keys=16)
        """
    )
    result = _run(kernels, "--varcheck-seed", "3", "test_vc_scale.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E * varcheck: FAIL: scale of vc_kernels.py:layer_scaled = 1/sqrt(dk) at d_k=16",
            "E * expected 0.250000; effective scale 0.0833333*",
            "E * nearest law 1/sqrt(dk) × 1/3*",
            "E * the interval excludes the claimed value",
            'E * reproduce: pytest "test_vc_scale.py::test_layer" --varcheck-seed 3',
            "E * or: varcheck probe vc_kernels.py:layer_scaled --dk 16 --queries 16 --keys 16 "
            "--seed *",
        ]
    )
    assert not [s for s in PLUGIN_SOURCE if s in "\n".join(result.outlines)]


def test_assert_scale_of_a_kernel_that_is_not_attention_is_one_line(
    kernels: pytest.Pytester,
) -> None:
    kernels.makepyfile(
        test_vc_bad="""
        from vc_kernels import not_attention

        def test_bad(varcheck):
            varcheck.assert_scale(not_attention, 16, queries=16, keys=16)
        """
    )
    result = _run(kernels, "--varcheck-seed", "1", "test_vc_bad.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["E *VarcheckError: kernel vc_kernels:not_attention is not soft*"])
    text = "\n".join(result.outlines)
    assert "varcheck/kernels" not in text and "varcheck/core" not in text


def _softmax_attention(q, k, v):  # noqa: ANN001, ANN202
    import numpy as np

    z = q @ k.T / np.sqrt(q.shape[-1])
    w = np.exp(z - z.max(axis=-1, keepdims=True))
    return w / w.sum(axis=-1, keepdims=True) @ v


def test_probe_levels_and_seeds_without_pytester() -> None:
    """The fixture's probe: the session's alpha unless the call gives alpha or confidence; the
    test's seed first, a derived one next, a given seed kept; a bad alpha is one line."""
    from varcheck.errors import VarcheckError
    from varcheck.pytest_plugin import VarcheckFixture

    fx = VarcheckFixture("t.py::test_x", session_seed=5, alpha=0.2)
    small = {"queries": 8, "keys": 8, "samples": 20}
    first = fx.probe(_softmax_attention, 8, **small)
    assert (first.seed, first.confidence) == (fx.seed, 0.8)
    second = fx.probe(_softmax_attention, 8, alpha=0.1, **small)
    assert second.seed != fx.seed and second.confidence == 0.9
    third = fx.probe(_softmax_attention, 8, confidence=0.95, alpha=0.5, seed=11, **small)
    assert (third.seed, third.confidence) == (11, 0.95)
    with pytest.raises(VarcheckError, match="alpha") as info:
        fx.probe(_softmax_attention, 8, alpha=2.0, **small)
    assert info.value.__traceback__ is not None  # raised anew, without varcheck's own frames
    assert fx._calls == 4


@pytest.mark.parametrize("outcome", ["pass", "fail"])
def test_an_interrupted_claim_neither_passes_nor_fails(monkeypatch, outcome: str) -> None:
    """A run cut short by Ctrl-C raises KeyboardInterrupt in both assert helpers, whatever its
    partial outcome: a test must not pass or fail on partial data."""
    import dataclasses

    import varcheck.checks.verify as verify_module
    import varcheck.testing
    from varcheck.pytest_plugin import VarcheckFixture

    real = verify_module.verify(16, claim="dk", precision=0.2, seed=1)
    cut = dataclasses.replace(real, outcome=outcome, interrupted=True)
    monkeypatch.setattr(varcheck.testing, "verify", lambda *a, **k: cut)
    monkeypatch.setattr(verify_module, "verify", lambda *a, **k: cut)
    with pytest.raises(KeyboardInterrupt):
        varcheck.testing.assert_variance(16, claim="dk", seed=1)
    with pytest.raises(KeyboardInterrupt):
        VarcheckFixture("t.py::test_x", session_seed=5, alpha=0.05).assert_variance(16, claim="dk")
    whole = dataclasses.replace(real, outcome="pass")
    monkeypatch.setattr(varcheck.testing, "verify", lambda *a, **k: whole)
    assert varcheck.testing.assert_variance(16, claim="dk", seed=1) is whole
