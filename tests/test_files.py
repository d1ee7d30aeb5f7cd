"""Reading user files (#17): regular files only, up to a stated size, one-line errors; and the
claim file's refusals that ride on it (nesting, BOM, keys that would be silently ignored)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from varcheck.checks.claim_file import CLAIM_FILE_LIMIT, load_check_file
from varcheck.core.files import MIB, read_bytes, read_text, regular_file
from varcheck.errors import VarcheckError

CLAIM = '[[claim]]\nname = "a"\ndk = 4\nclaim = "dk"\n'


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda tmp: "/dev/zero", "a character device, not a regular file"),
        (lambda tmp: str(tmp), "a folder, not a regular file"),
        (lambda tmp: str(tmp / "missing"), "No such file or directory"),
        (lambda tmp: "bad\0path", "cannot read it"),
    ],
    ids=["dev-zero", "folder", "missing", "nul"],
)
def test_refused_paths(tmp_path: Path, make, fragment: str) -> None:
    """Guards against reading /dev/zero until MemoryError, or a folder or missing file
    reported with a traceback."""
    with pytest.raises(VarcheckError) as err:
        read_bytes(make(tmp_path), "it", MIB)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_a_fifo_is_refused_without_waiting(fifo: Path) -> None:
    """Guards against open() on a FIFO blocking forever for a writer."""
    import threading

    raised: list[BaseException] = []

    def read() -> None:
        try:
            read_bytes(fifo, "it", MIB)
        except BaseException as exc:  # noqa: BLE001 - checked below
            raised.append(exc)

    # a blocked open() never returns: the thread is left waiting (a daemon) and the test fails;
    # the 60 s are for a loaded machine, not a speed limit
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(60)
    assert not reader.is_alive(), "read_bytes blocked on the FIFO"
    assert len(raised) == 1 and isinstance(raised[0], VarcheckError), raised
    assert "a FIFO (named pipe), not a regular file" in str(raised[0])


def test_size_limit(tmp_path: Path) -> None:
    """Guards against a large file read whole: the limit is checked before reading, and the
    limit itself is accepted."""
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_bytes(path, "it", 100) == b"x" * 100
    assert regular_file(path, "it", 100) == 100
    with pytest.raises(VarcheckError, match=r"\(100 bytes, above the limit of 99 bytes\)"):
        read_bytes(path, "it", 99)
    path.write_bytes(b"x" * (3 * MIB))
    with pytest.raises(VarcheckError, match=r"\(3 MiB, above the limit of 1 MiB\)"):
        read_bytes(path, "it", MIB)


def test_text_drops_a_bom_and_names_bad_bytes(tmp_path: Path) -> None:
    path = tmp_path / "t"
    path.write_bytes("\ufeffhé".encode())
    assert read_text(path, "it", MIB) == "hé"
    path.write_bytes(b"ok\xff")
    with pytest.raises(VarcheckError, match="not UTF-8 text: byte 2 is invalid"):
        read_text(path, "it", MIB)


def test_long_paths_are_cut(tmp_path: Path) -> None:
    with pytest.raises(VarcheckError) as err:
        read_bytes(tmp_path / ("x" * 200), "it", MIB)
    assert "…" in str(err.value) and len(str(err.value)) < 150


# --- the claim file -----------------------------------------------------------------------------


def _claims(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "c.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_claim_file_limit_is_stated(tmp_path: Path) -> None:
    """Guards against a 200 MB claim file loaded at 820 MB."""
    path = _claims(tmp_path, "#" + "x" * CLAIM_FILE_LIMIT + "\n" + CLAIM)
    with pytest.raises(VarcheckError, match="above the limit of 1 MiB"):
        load_check_file(path)


def test_claim_file_fifo_and_device(fifo: Path) -> None:
    for path in (fifo, "/dev/zero"):
        with pytest.raises(VarcheckError, match="cannot read the claim file"):
            load_check_file(path)


def test_deep_nesting_is_malformed_toml(tmp_path: Path) -> None:
    """Guards against 100 000 nested arrays escaping as RecursionError (exit 70)."""
    path = _claims(tmp_path, CLAIM.replace("dk = 4", "dk = " + "[" * 100_000 + "]" * 100_000))
    with pytest.raises(VarcheckError, match="malformed TOML: nested too deeply"):
        load_check_file(path)


def test_a_bom_is_accepted(tmp_path: Path) -> None:
    """Guards against "Invalid statement (line 1, col 1)" for a file saved with a BOM."""
    spec = load_check_file(_claims(tmp_path, b"\xef\xbb\xbf" + CLAIM.encode()))
    assert [c.name for c in spec.claims] == ["a"]


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ("rho = 0", "rho describes varcheck's own q and k"),
        ("rho = 0.5", "rho describes"),
        ('dist = "normal"', "dist describes"),
        ('q_dist = "normal"\nk_dist = "normal"', "q_dist, k_dist describe"),
    ],
)
def test_sampler_refuses_law_keys(tmp_path: Path, extra: str, fragment: str) -> None:
    """Guards against rho = 0 (or a dist) next to a sampler accepted and silently ignored."""
    sampler = Path(__file__).parent.parent / "examples" / "attention.py"
    text = f'[[claim]]\nname = "a"\ndk = 4\nclaim = 1\nsampler = "{sampler}:logits"\n{extra}\n'
    with pytest.raises(VarcheckError) as err:
        load_check_file(_claims(tmp_path, text))
    assert fragment in str(err.value) and "remove" in str(err.value)


@pytest.mark.parametrize("other", ['q_dist = "normal"', 'k_dist = "normal"'])
def test_dist_with_q_or_k_dist_is_refused(tmp_path: Path, other: str) -> None:
    """Guards against dist silently overridden by q_dist or k_dist in the same claim."""
    text = CLAIM + f'dist = "uniform"\n{other}\n'
    with pytest.raises(VarcheckError, match="dist sets both q and k"):
        load_check_file(_claims(tmp_path, text))


def test_q_and_k_dist_without_dist_still_work(tmp_path: Path) -> None:
    spec = load_check_file(_claims(tmp_path, CLAIM + 'q_dist = "uniform"\nk_dist = "laplace"\n'))
    assert (spec.claims[0].q.spec, spec.claims[0].k.spec) == ("uniform", "laplace")


def test_infinite_claim_is_named(tmp_path: Path) -> None:
    """Guards against TOML's claim = 1e400 reported as "unknown name 'inf'"."""
    with pytest.raises(VarcheckError, match="claim inf is not a finite number"):
        load_check_file(_claims(tmp_path, CLAIM.replace('claim = "dk"', "claim = 1e400")))


def test_file_precision_is_checked_with_the_command_lines_cap(tmp_path: Path) -> None:
    """Guards against refusing a file's fine precision that --max-seconds would cap."""
    from varcheck.checks.claim_file import check

    path = _claims(tmp_path, "[defaults]\nprecision = 1e-9\n" + CLAIM)
    assert load_check_file(path).precision == 1e-9
    with pytest.raises(VarcheckError, match="precision 1e-09 needs"):
        check(path, seed=1)
    capped = check(path, seed=1, max_seconds=0.3)
    # accepted and run until the cap: how far 0.3 s gets depends on the machine, so any
    # outcome of a run is honest here (a verdict, inconclusive, or unreliable when fewer than
    # 200 blocks fit), but not a refusal
    assert capped.exit_code in (0, 1, 3, 4)
    assert capped.claims[0].results[0].raw.stop_reason == "max-seconds"


def test_a_files_budget_is_checked_over_all_its_tests(tmp_path: Path) -> None:
    """Guards against 37 tests of 1e12 products each accepted because one would fit."""
    from varcheck.checks.claim_file import check

    path = _claims(tmp_path, CLAIM.replace("dk = 4", 'dk = "1..20:1"'))
    with pytest.raises(VarcheckError, match="over 20 tests"):
        check(path, samples=10**13, seed=1)
