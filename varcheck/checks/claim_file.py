"""Claim files for CI: ``varcheck check claims.toml``.

A claim file is TOML with an optional ``[defaults]`` table and one ``[[claim]]`` table per claim::

    [defaults]
    seed = 2024           # root seed (drawn and reported when absent)
    confidence = 0.95     # family-wise: Holm over every (claim, d_k) test in the file
    precision = 0.01      # or samples = 100000; optional max_seconds

    [[claim]]
    name = "textbook"                 # unique, shown in reports and JUnit
    dk = "2..512"                     # an integer, a range spec, or a list of integers
    dist = "normal"                   # or q_dist / k_dist; optional rho
    claim = "dk"                      # number or expression (see varcheck.parse_claim)
    scaled = false                    # claim about Var(q·k / sqrt(d_k)) instead
    tolerance = 0.02                  # optional: the claim is the band claim × [0.98, 1.02]
    description = "Var(q·k) = d_k for unit normal entries"

    [[claim]]
    name = "my-attention"
    dk = [16, 64]
    sampler = "attention.py:logits"   # a user's code: MODULE:FUNCTION or FILE.py:FUNCTION
    args = { heads = 4 }              # keyword arguments bound to every call
    claim = 1                         # with a sampler: a number or an expression in dk
    scaled = true

    [[claim]]
    name = "kernel-scale"
    probe = "kernels.py:attention"    # a black-box kernel fn(q, k, v): its effective scale
    dk = [16, 64]
    expect = "1/sqrt(dk)"             # the default; optional causal, layout, tolerance, args

A probe claim is described in :mod:`.probe_claims`; the probe claims run before the others, so
that a kernel refused at its first calls (exit 2) throws away no finished test. A sampler's (or
a kernel's) file path is read relative to the claim file's folder; a module is imported from
the current directory or ``sys.path``.

Every (claim, d_k) pair is one test (a probe's: one per head); Holm's procedure over all of them
keeps the chance that a file of true claims fails at most ``1 - confidence`` (with a tolerance,
a claim is true when the quantity lies inside its band, and fails only when the whole interval
lies outside it).
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .._version import __version__
from ..core import options
from ..core.distributions import Distribution
from ..core.files import MIB, read_text
from ..core.messages import cut, did_you_mean, shown
from ..core.progress import ProgressCallback
from ..core.ranges import resolve_dks
from ..core.user_code import UserSampler, load_sampler
from ..core.verdicts import ClaimPValues, adjusted_p_values, exit_code, outcome_of, worst
from ..errors import VarcheckError
from ..output.display import Displayable
from .claims import Claim, parse_claim, sampler_claim
from .probe_claims import (
    PROBE_KEYS,
    PartialProbeRun,
    ProbeClaim,
    ProbeRun,
    check_probe_time,
    parse_probe,
    probe_row,
    run_probe,
)
from .verify import ClaimTest, VerifyResult, claim_decision, run_claim_tests, with_detectable

__all__ = ["ClaimSpec", "CheckFile", "ClaimOutcome", "CheckResult", "load_check_file", "check"]

CLAIM_KEYS = (
    "name",
    "dk",
    "dist",
    "q_dist",
    "k_dist",
    "rho",
    "claim",
    "scaled",
    "tolerance",
    "description",
    "sampler",
    "args",
    *PROBE_KEYS,
)
DEFAULT_KEYS = ("seed", "confidence", "alpha", "precision", "samples", "max_seconds")
#: Largest claim file read (thousands of claims fit in a few kilobytes).
CLAIM_FILE_LIMIT = 1 * MIB
#: Most (claim, d_k) tests a file may hold, counted as its claims are read: each is checked,
#: then drawn, and Holm and the covariance of the estimates grow with their number (200
#: claims of 1000 d_k each took 6 s to read and asked for 298 GiB)
MAX_TESTS = 4096
#: Keys that describe varcheck's own sampler, meaningless next to ``sampler``.
_LAW_KEYS = ("dist", "q_dist", "k_dist", "rho")


@dataclass(frozen=True)
class ClaimSpec:
    """One named claim of a file (before sampling).

    ``test`` is the template of its tests: :func:`check` sets ``dk`` and ``stream`` for each
    d_k. The test's fields (``q``, ``k``, ``rho``, ``claim``, ``scaled``, ``tolerance``,
    ``sampler``) read as the spec's own. A probe claim's test holds its expectation and
    tolerance, and ``probe`` the kernel.
    """

    name: str
    line: int | None
    dks: tuple[int, ...]
    test: ClaimTest
    description: str
    probe: ProbeClaim | None = None

    @property
    def q(self) -> Distribution | None:
        return self.test.q

    @property
    def k(self) -> Distribution | None:
        return self.test.k

    @property
    def rho(self) -> float:
        return self.test.rho

    @property
    def claim(self) -> Claim:
        return self.test.claim

    @property
    def scaled(self) -> bool:
        return self.test.scaled

    @property
    def tolerance(self) -> float | None:
        return self.test.tolerance

    @property
    def sampler(self) -> UserSampler | None:
        return self.test.sampler


@dataclass(frozen=True)
class CheckFile:
    """A parsed claim file: its claims and file-level defaults."""

    path: str
    claims: tuple[ClaimSpec, ...]
    seed: int | None
    confidence: float
    precision: float | None
    samples: int | None
    max_seconds: float | None


@dataclass(frozen=True)
class ClaimOutcome:
    """The tests of one claim (one per d_k) and its worst outcome."""

    spec: ClaimSpec
    results: tuple[VerifyResult, ...]

    @property
    def outcome(self) -> str:
        return worst(r.outcome for r in self.results)


@dataclass(frozen=True, repr=False)
class CheckResult(Displayable):
    """The result of :func:`check`.

    Attributes
    ----------
    path : str
    claims : tuple of ClaimOutcome
        In file order; fewer than the file's when ``interrupted``.
    seed : int
    confidence : float
        ``1 - confidence`` is the family-wise error rate over ``family_size`` tests.
    family_size : int
    interrupted : bool
    """

    path: str
    claims: tuple[ClaimOutcome, ...]
    seed: int
    confidence: float
    family_size: int
    precision: float | None
    samples: int | None
    interrupted: bool = False
    version: str = __version__

    @property
    def outcome(self) -> str:
        return outcome_of((c.outcome for c in self.claims), interrupted=self.interrupted)

    @property
    def exit_code(self) -> int:
        """The worst outcome: 1 fail, 4 no valid test, 3 inconclusive, 0 pass; 130 (Ctrl-C) or
        143 (SIGTERM) interrupted."""
        return exit_code([self.outcome], interrupted=self.interrupted)


def _claim_lines(text: str) -> list[int]:
    """1-based line numbers of the ``[[claim]]`` headers, in order."""
    return [
        i + 1
        for i, line in enumerate(text.splitlines())
        if re.match(r"\s*\[\[\s*claim\s*\]\]", line)
    ]


def _where(path: str, line: int | None, name: str | None) -> str:
    loc = f"{cut(path)}:{line}" if line else cut(path)
    return f"{loc}: claim {shown(name)}" if name else loc


def _number(value: Any, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise VarcheckError(f"{where}: {key} must be a number, got {shown(value)}")
    return float(value)


def _key_line(text: str, after: int | None, key: str) -> int | None:
    """1-based line of ``key = ...`` at or after line ``after`` (a claim's header), if found."""
    pattern = re.compile(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=")
    for number, line in enumerate(text.splitlines()[(after or 1) - 1 :], start=after or 1):
        if pattern.match(line):
            return number
    return None


def _unknown_key(key: str, accepted: Sequence[str], where: str) -> VarcheckError:
    """The refusal of a key a table does not take, with the closest accepted one."""
    return VarcheckError(
        f"{where}: unknown key {shown(key)}{did_you_mean(key, accepted)}; accepted: "
        + ", ".join(accepted)
    )


def _parse_claim_table(
    table: Any, index: int, line: int | None, path: str, text: str = ""
) -> ClaimSpec:
    if not isinstance(table, dict):
        raise VarcheckError(f"{_where(path, line, None)}: [[claim]] #{index + 1} is not a table")
    name = table.get("name")
    if not isinstance(name, str) or not name.strip():
        raise VarcheckError(
            f'{_where(path, line, None)}: [[claim]] #{index + 1} needs a non-empty name = "..."'
        )
    where = _where(path, line, name)
    unknown = [k for k in table if k not in CLAIM_KEYS]
    if unknown:
        at = _key_line(text, line, unknown[0]) or line
        raise _unknown_key(unknown[0], CLAIM_KEYS, _where(path, at, name))
    for required in ("dk",) if "probe" in table else ("dk", "claim"):
        if required not in table:
            raise VarcheckError(f"{where}: missing {required} = ...")
    try:
        return _claim_spec(table, name.strip(), line, where, os.path.dirname(path))
    except VarcheckError as exc:
        message = str(exc)
        raise VarcheckError(
            message if message.startswith(where) else f"{where}: {message}"
        ) from None


def _claim_spec(
    table: dict[str, Any], name: str, line: int | None, where: str, folder: str
) -> ClaimSpec:
    """The checked fields of one ``[[claim]]`` table (errors get ``where`` from the caller)."""
    dk_value = table["dk"]
    if isinstance(dk_value, bool) or not isinstance(dk_value, list | str | int):
        raise VarcheckError(
            f"dk must be an integer, a range string or a list, got {shown(dk_value)}"
        )
    dks = tuple(resolve_dks(dk_value))
    probe = parse_probe(table, folder, dks)
    if probe is not None:
        return _probe_spec(table, name, line, where, dks, probe)
    claim_value = table["claim"]
    if isinstance(claim_value, bool) or not isinstance(claim_value, str | int | float):
        raise VarcheckError(
            f"claim must be a string expression or a number, got {shown(claim_value)}"
        )
    scaled = table.get("scaled", False)
    if not isinstance(scaled, bool):
        raise VarcheckError(f"scaled must be true or false, got {shown(scaled)}")
    tolerance, description = _tolerance_and_description(table, where)
    user = _claim_sampler(table, folder)
    _exclusive_laws(table, user)
    laws = (table.get("dist"), table.get("q_dist"), table.get("k_dist"))
    rho = _number(table.get("rho", 0.0), "rho", where)
    test = ClaimTest(0, None, None, 0.0, parse_claim(claim_value), scaled, tolerance, ())
    if user is None:
        q, k = options.entry_laws(*laws)
        test = replace(test, q=q, k=k, rho=options.valid_rho(rho, q, k))
    else:
        options.user_sampler(user, (*laws, rho), None)
        test = replace(test, claim=sampler_claim(test.claim, user.target), sampler=user)
    for dk in dks:  # every claimed value must exist and be > 0 before any sampling
        replace(test, dk=dk).prepare()
    return ClaimSpec(name=name, line=line, dks=dks, test=test, description=description)


def _tolerance_and_description(table: dict[str, Any], where: str) -> tuple[float | None, str]:
    tol = table.get("tolerance")
    tolerance = options.valid_tolerance(None if tol is None else _number(tol, "tolerance", where))
    description = table.get("description", "")
    if not isinstance(description, str):
        raise VarcheckError(f"description must be a string, got {shown(description)}")
    return tolerance, description


def _probe_spec(
    table: dict[str, Any],
    name: str,
    line: int | None,
    where: str,
    dks: tuple[int, ...],
    probe: ProbeClaim,
) -> ClaimSpec:
    tolerance, description = _tolerance_and_description(table, where)
    test = ClaimTest(0, None, None, 0.0, probe.claim, False, tolerance, ())
    return ClaimSpec(name=name, line=line, dks=dks, test=test, description=description, probe=probe)


def _exclusive_laws(table: dict[str, Any], user: UserSampler | None) -> None:
    """Refuse keys that another key would silently override or make meaningless."""
    if user is not None:
        given = [key for key in _LAW_KEYS if key in table]
        if given:
            raise VarcheckError(
                f"{', '.join(given)} {'describe' if len(given) > 1 else 'describes'} "
                f"varcheck's own q and k; with sampler = ... the values come from the sampler: "
                f"remove {'them' if len(given) > 1 else 'it'}"
            )
    both = [key for key in ("q_dist", "k_dist") if key in table]
    if "dist" in table and both:
        raise VarcheckError(
            f"dist sets both q and k, and {' and '.join(both)} would override it; give dist "
            "alone, or q_dist and k_dist"
        )


def _claim_sampler(table: dict[str, Any], folder: str) -> UserSampler | None:
    """The claim's ``sampler`` (a file path is relative to the claim file) and its ``args``."""
    target, args = table.get("sampler"), table.get("args")
    if target is None:
        if args is not None:
            raise VarcheckError("args = {...} binds arguments of a sampler: add sampler = ...")
        return None
    if not isinstance(target, str):
        raise VarcheckError(f'sampler must be a string "MODULE:FUNCTION", got {shown(target)}')
    if args is not None and not isinstance(args, dict):
        raise VarcheckError(f"args must be a table such as {{ heads = 4 }}, got {shown(args)}")
    return load_sampler(target, args, base=folder)


#: Most parts a dotted key or a table header may have (``a.b.c`` has 3): tomllib's time grows
#: with the square of their number (a key of 20 000 parts takes seconds, of 200 000 minutes)
MAX_KEY_PARTS = 16
#: TOML's integers are 64-bit; tomllib reads longer ones (``0x`` and 300 digits) as Python ints
_INT64 = (-(1 << 63), (1 << 63) - 1)
#: strings and comments, blanked before dotted keys are looked for (their dots are not keys')
_STRINGS = re.compile(
    r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*'
)
#: a key of more than MAX_KEY_PARTS parts (bare or blanked quoted), starting at a part's start
_LONG_KEY = re.compile(rf'(?<![\w"-])(?:[\w"-]++[ \t]*+\.[ \t]*+){{{MAX_KEY_PARTS}}}[\w"-]')


def _parse_toml(text: str, path: str) -> dict[str, Any]:
    """``tomllib.loads(text)`` with the inputs that would make it slow refused first, and every
    failure one line naming the file (and the line, where it can be found)."""
    blanked = _STRINGS.sub(_blank, text)
    long_key = _LONG_KEY.search(blanked)
    if long_key:
        line = blanked.count("\n", 0, long_key.start()) + 1
        raise VarcheckError(
            f"{cut(path)}:{line}: a dotted key or table name of more than {MAX_KEY_PARTS} parts; "
            f"accepted: at most {MAX_KEY_PARTS} (a claim file needs two)"
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise VarcheckError(f"{cut(path)}: malformed TOML: {exc}") from None
    except (RecursionError, MemoryError):  # arrays nested 100 000 deep
        raise VarcheckError(f"{cut(path)}: malformed TOML: nested too deeply") from None
    except ValueError:  # int() refuses more than 4300 decimal digits
        digits = re.search(r"\d{100,}", blanked)
        at = blanked.count("\n", 0, digits.start()) + 1 if digits else None
        raise VarcheckError(
            f"{_where(path, at, None)}: malformed TOML: an integer of "
            f"{len(digits.group()) if digits else 'too many'} digits; accepted: TOML's 64-bit "
            "integers"
        ) from None
    _check_integers(data, path)
    return data


def _blank(match: re.Match[str]) -> str:
    """A string as ``""``, a comment as nothing, each keeping its newlines (for line numbers)."""
    found = match.group()
    return ('""' if found[0] in "\"'" else "") + "\n" * found.count("\n")


def _check_integers(data: dict[str, Any], path: str) -> None:
    """Refuse an integer beyond TOML's 64-bit range, naming its key (it would overflow a float
    or ask for a vast budget further on)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            stack += [(f"{where}.{k}" if where else str(k), v) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(f"{where}[{i}]", v) for i, v in enumerate(value)]
        elif isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
            # claim[0].rho reads as the other messages do: [[claim]] #1 rho
            key = re.sub(r"^claim\[(\d+)\]\.?", lambda m: f"[[claim]] #{int(m[1]) + 1} ", where)
            key = re.sub(r"^defaults\.", "[defaults] ", key)
            raise VarcheckError(
                f"{cut(path)}: {cut(key)} is an integer of {value.bit_length()} bits; "
                "accepted: TOML's 64-bit integers"
            )


def load_check_file(path: str | os.PathLike[str]) -> CheckFile:
    """Read and validate a claim file.

    Raises
    ------
    VarcheckError
        Unreadable file, malformed TOML (with its line), unknown keys, missing fields, bad
        distributions, ranges or claim expressions, duplicate names; the message names the file,
        the claim and its line.
    """
    path = os.fspath(path)
    text = read_text(path, "the claim file", CLAIM_FILE_LIMIT)
    data = _parse_toml(text, path)
    unknown = [k for k in data if k not in ("defaults", "claim")]
    if unknown:
        raise VarcheckError(
            f"{cut(path)}: unknown top-level key {shown(unknown[0])}; a claim file has "
            "[defaults] and [[claim]] tables"
        )
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise VarcheckError(f"{cut(path)}: defaults must be a table ([defaults])")
    bad = [k for k in defaults if k not in DEFAULT_KEYS]
    if bad:
        at = _key_line(text, None, bad[0])
        where = f"{cut(path)}:{at}" if at else cut(path)
        raise _unknown_key(bad[0], DEFAULT_KEYS, f"{where}: [defaults]")
    tables = data.get("claim", [])
    if not isinstance(tables, list) or not tables:
        raise VarcheckError(f"{cut(path)}: no claims; add at least one [[claim]] table")
    lines = _claim_lines(text)
    specs: dict[str, ClaimSpec] = {}
    tests = 0
    for i, table in enumerate(tables):
        line = lines[i] if i < len(lines) else None
        spec = _parse_claim_table(table, i, line, path, text)
        if spec.name in specs:
            raise VarcheckError(f"{_where(path, line, spec.name)}: the name is used twice")
        specs[spec.name] = spec
        tests += len(spec.dks)
        if tests > MAX_TESTS:
            raise VarcheckError(
                f"{_where(path, line, spec.name)}: the file holds more than {MAX_TESTS:,} tests "
                "(claims × d_k) by here; accepted: at most that many in one file"
            )
    seed = defaults.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise VarcheckError(
            f"{cut(path)}: [defaults] seed must be a whole number >= 0, got {shown(seed)}"
        )
    try:
        confidence = options.confidence_from(defaults.get("confidence"), defaults.get("alpha"))
        samples = defaults.get("samples")
        if samples is not None and "precision" in defaults:
            raise VarcheckError(
                "give samples or precision, not both (samples fixes the number of products)"
            )
        precision = None if samples is not None else defaults.get("precision", 0.01)
        confidence, precision, samples, max_seconds = options.sampling_effort(
            confidence, precision, samples, defaults.get("max_seconds"), feasible=False
        )
    except VarcheckError as exc:
        raise VarcheckError(f"{cut(path)}: [defaults] {exc}") from None
    return CheckFile(
        path=path,
        claims=tuple(specs.values()),
        seed=seed,
        confidence=confidence,
        precision=precision,
        samples=samples,
        max_seconds=max_seconds,
    )


def _file_effort(
    spec_file: CheckFile,
    confidence: float | None,
    precision: float | None,
    samples: int | None,
    max_seconds: float | None,
) -> tuple[float, float | None, int | None, float | None]:
    """The run's confidence, precision, samples and time cap: the arguments given, else the
    file's ``[defaults]`` (a precision or samples given replaces both of the file's)."""
    conf = spec_file.confidence if confidence is None else confidence
    if samples is not None:
        prec, samp = None, samples
    elif precision is not None:
        prec, samp = precision, None
    else:
        prec, samp = spec_file.precision, spec_file.samples
    return options.sampling_effort(  # products: the variance claims' cost is checked by check
        conf,
        prec,
        samp,
        spec_file.max_seconds if max_seconds is None else max_seconds,
        feasible=False,
    )


def check(
    source: str | os.PathLike[str] | CheckFile,
    *,
    seed: int | None = None,
    confidence: float | None = None,
    precision: float | None = None,
    samples: int | None = None,
    max_seconds: float | None = None,
    progress: ProgressCallback | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
) -> CheckResult:
    """Run every claim of a claim file with family-wise error control (Holm).

    Parameters given here override the file's ``[defaults]``.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "claims.toml"
    >>> _ = f.write_text('[[claim]]\\nname = "textbook"\\ndk = "4..64"\\nclaim = "dk"\\n')
    >>> res = check(f, seed=1, precision=0.05)
    >>> res.outcome, res.exit_code, res.family_size
    ('pass', 0, 5)
    """
    spec_file = source if isinstance(source, CheckFile) else load_check_file(source)
    conf, prec, samp, max_s = _file_effort(spec_file, confidence, precision, samples, max_seconds)
    seed = options.resolve_seed(spec_file.seed if seed is None else seed)
    effort: dict[str, Any] = {"seed": seed, "confidence": conf, "precision": prec}
    variance = [(ci, s) for ci, s in enumerate(spec_file.claims) if s.probe is None]
    dks = tuple(dk for _, s in variance for dk in s.dks)
    if dks:
        options.feasible_effort(conf, prec, samp, max_s, dks)  # the whole file, not one d_k
    tests = [replace(s.test, dk=dk, stream=(ci, dk)) for ci, s in variance for dk in s.dks]
    owners = [ci for ci, s in variance for _ in s.dks]
    # the probe claims first: a kernel refused at its pilot (a bad input, exit 2) then throws
    # away no finished variance test
    planned = [(ci, s, dk) for ci, s in enumerate(spec_file.claims) if s.probe for dk in s.dks]
    probes = [(s.probe, dk) for _, s, dk in planned if s.probe]  # every one (planned has probes)
    check_probe_time(spec_file.path, probes, max_s)  # calls
    runs = _run_probes(spec_file.path, planned, effort, max_s)
    cut = len(runs) < len(planned) or any(r.interrupted for _, _, r in runs)
    results = (
        run_claim_tests(
            tests,
            **effort,
            samples=samp,
            max_seconds=max_s,
            progress=progress,
            adjust=False,
            workers=workers,
            scheduler=scheduler,
        )
        if tests and not cut
        else []
    )
    rows = list(zip(owners[: len(results)], results, strict=True))
    outcomes = _judge_file(spec_file, rows, runs, **effort)
    heads = sum(r.measurement.design.heads for _, _, r in runs)
    return CheckResult(
        path=spec_file.path,
        claims=outcomes,
        seed=seed,
        confidence=conf,
        family_size=len(tests) + heads + (len(planned) - len(runs)),
        precision=prec,
        samples=samp,
        interrupted=len(results) < len(tests) or cut,
    )


def _run_probes(
    path: str,
    planned: list[tuple[int, ClaimSpec, int]],
    effort: dict[str, Any],
    max_seconds: float | None,
) -> list[tuple[int, ClaimSpec, ProbeRun]]:
    """Each (probe claim, d_k) measured in file order; after Ctrl-C, those finished."""
    runs = []
    for ci, spec, dk in planned:
        assert spec.probe is not None  # planned holds the probe claims
        try:
            run = run_probe(
                spec.probe,
                dk,
                tolerance=spec.tolerance,
                seed=effort["seed"],
                confidence=effort["confidence"],
                precision=effort["precision"],
                max_seconds=max_seconds,
            )
        except PartialProbeRun as exc:  # the d_k under way keeps its calls finished
            runs.append((ci, spec, exc.run))
            break
        except KeyboardInterrupt:
            break
        except VarcheckError as exc:
            raise VarcheckError(f"{_where(path, spec.line, spec.name)}: {exc}") from None
        runs.append((ci, spec, run))
    return runs


def _judge_file(
    spec_file: CheckFile,
    rows: list[tuple[int, VerifyResult]],
    runs: list[tuple[int, ClaimSpec, ProbeRun]],
    *,
    seed: int,
    confidence: float,
    precision: float | None,
) -> tuple[ClaimOutcome, ...]:
    """Holm over every variance test's and every probe head's p-value a fail rests on (the
    two-sided one; ``p_outside`` with a tolerance), then each row's verdict from its adjusted
    p-values (a probe row: its worst head's)."""
    raw = [r.p_values for _, r in rows] + [p for *_, run in runs for p in run.p_values]
    adjusted = iter(adjusted_p_values(raw))
    alpha = 1.0 - confidence
    family = sum(not math.isnan(p.p_fail) for p in raw)  # what Holm adjusts over
    done = [(ci, with_detectable(_rejudge(r, next(adjusted), alpha), family)) for ci, r in rows]
    for ci, spec, run in runs:
        ps = [next(adjusted) for _ in run.p_values]
        assert spec.probe is not None  # runs hold the probe claims
        row = probe_row(
            spec.probe,
            run,
            ps,
            tolerance=spec.tolerance,
            confidence=confidence,
            seed=seed,
            precision=precision,
            family=family,
        )
        done.append((ci, row))
    outcomes = []
    for ci, spec in enumerate(spec_file.claims):
        mine = tuple(r for c, r in done if c == ci)
        if mine:
            outcomes.append(ClaimOutcome(spec=spec, results=mine))
    return tuple(outcomes)


def _rejudge(r: VerifyResult, p: ClaimPValues, alpha: float) -> VerifyResult:
    """A variance test judged on its Holm-adjusted p-values (the TOST's stays its own: see
    :func:`varcheck.checks.verify.run_claim_tests`); one without a valid test is kept."""
    if math.isnan(p.p_fail) or r.claim_value is None:
        return r
    d = claim_decision(
        r.estimate,
        r.confidence_interval,
        r.equivalence_interval,
        r.claim_value,
        p,
        alpha=alpha,
        tolerance=r.tolerance,
        samples=r.samples,
    )
    return replace(
        r,
        outcome=d.outcome,
        reason=d.reason,
        more_samples=d.more_samples,
        p_value=p.p_value,
        p_outside=p.p_outside,
    )
