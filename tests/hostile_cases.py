"""Hostile inputs as data, and the runner that tries each through the command line (a helper).

Every case writes its files (``hostile_files``) and names the command line to run on them, the
exit status and a fragment of the one-line error (exit 2) or of the output. :class:`Runner`
runs a case in a child process forked from a server that has imported varcheck, numpy, gguf and
tokenizers once: the child takes the memory limit (``RLIMIT_AS``), may first run a hook (a
file truncated while the audit reads it), then calls ``varcheck.cli.main``; the parent waits
up to a deadline and reads the exit status, the output and the child's peak resident memory.
A fork costs milliseconds where a fresh interpreter costs a third of a second, so most cases
take well under one.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from hostile_files import (
    ARR,
    GGML,
    I32,
    STR,
    U16,
    Hole,
    Raw,
    bert_tokenizer_json,
    byte_alphabet,
    encrypted_npz,
    npy_bytes,
    sentencepiece_changes,
    tiny_bert,
    tiny_gguf,
    typed_tensor,
    write_gguf,
    write_npz,
    zip_declaring_members,
)

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "examples" / "attention_kernels.py"
CLAIM = '[[claim]]\nname = "a"\ndk = 4\nclaim = "dk"\n'
HEX = "0x" + "f" * 300
QUICK = ("--samples", "1000", "--seed", "1")
FORMATS = ("table", "markdown", "csv-meta", "json")  # csv-meta: the plain CSV and its header line
HEX_KEYS = ("claim", "rho", "tolerance", "precision", "max_seconds", "expect")
#: names from a file carrying markup, terminal escapes (clear the screen, write the clipboard
#: with OSC 52, a hyperlink), a bidi override, a NUL, a newline and XML-illegal characters
EVIL = (
    "[red]x[/blue] \x1b[2J\x1b]52;c;aGk=\x07\x1b]8;;http://e.vil\x1b\\ln\x1b]8;;\x1b\\ "
    "\u202e\0\n\x01z"
)
TOML_EVIL = EVIL.encode("unicode_escape").decode().replace("\\x", "\\u00")


class Case(NamedTuple):
    """One hostile input: ``write(folder)`` makes its files and returns the command line's
    arguments; the run must end with ``code`` and ``fragment`` in its one-line error (exit 2) or
    in its output. ``needs`` names optional modules or checkpoints (``minilm``, ``smollm2``);
    ``hook`` a function of this module run in the child first; ``after(folder)`` checks the
    files the run wrote."""

    write: Callable[[Path], tuple[str, ...]]
    code: int
    fragment: str
    needs: tuple[str, ...] = ()
    hook: str | None = None
    after: Callable[[Path], None] | None = None


# --- writers of the cases' files ------------------------------------------------------------------


def _audit(folder: Path, name: str, *args: str, **gguf: Any) -> tuple[str, ...]:
    """``audit`` of a tiny GGUF written with ``gguf``'s options."""
    return ("audit", str(tiny_gguf(folder / f"{name}.gguf", **gguf)), *args)


def _bert(folder: Path, *args: str, **kwargs: Any) -> tuple[str, ...]:
    return ("audit", str(tiny_bert(folder / "bert", **kwargs)), *args)


def _text(folder: Path, name: str, lines: Sequence[str], repeat: int) -> str:
    path = folder / name
    path.write_text(("\n".join(lines) + "\n") * repeat, encoding="utf-8")
    return str(path)


def english(folder: Path) -> str:
    """About 16 MB of ordinary sentences: inside --text's 16 MiB limit."""
    lines = (ROOT / "varcheck" / "data" / "default_text.txt").read_text("utf-8").splitlines()
    return _text(folder, "english.txt", lines, 16_000_000 // (len("\n".join(lines)) + 1))


def _spm(tokens: list[str]) -> Callable[[Path], tuple[str, ...]]:
    return lambda folder: _audit(folder, "spm", changes=sentencepiece_changes(tokens))


def _tensor_type(type_name: str) -> Case:
    def write(folder: Path) -> tuple[str, ...]:
        kind = typed_tensor(type_name, (256, 256))
        return _audit(folder, type_name, hidden=256, types={"blk.0.attn_q.weight": kind})

    # F64 is read as plain numbers: a normal result
    return Case(write, 0 if type_name == "F64" else 2, type_name, ("gguf",))


def _overflowing(folder: Path) -> tuple[str, ...]:
    """W_q and W_k of 1e30 everywhere: finite weights whose logits overflow float32."""
    shapes = {"blk.0.attn_q.weight": (8, 8), "blk.0.attn_k.weight": (4, 8)}
    big = {name: (0, np.full(shape, 1e30, np.float32).tobytes()) for name, shape in shapes.items()}
    return _audit(folder, "big", types=big)


def _declared_header(field: str, count: int) -> Callable[[Path], tuple[str, ...]]:
    """A GGUF header declaring ``count`` metadata entries or tensor records, with the bytes they
    would need at least (a hole)."""

    def write(folder: Path) -> tuple[str, ...]:
        path = write_gguf(folder / "count.gguf", [("general.architecture", STR, "llama")], [])
        with open(path, "r+b") as out:
            out.seek(8 if field == "tensors" else 16)
            out.write(count.to_bytes(8, "little"))
            out.truncate(40 * count)
        return ("audit", str(path))

    return write


def _template(folder: Path) -> tuple[str, ...]:
    post = bert_tokenizer_json()["post_processor"]
    post["single"][0] = {"SpecialToken": {"id": "[BOS]", "type_id": 0}}
    return _bert(folder, tokenizer={"post_processor": post})


def _regex(folder: Path) -> tuple[str, ...]:
    normalizer = {"type": "Replace", "pattern": {"Regex": "(a+)+b"}, "content": "x"}
    text = _text(folder, "a.txt", ["the cat " + "a" * 3000 + "c"], 1)
    return _bert(folder, "--text", text, tokenizer={"normalizer": normalizer})


def _safetensors(header: bytes, data: bytes = b"") -> Callable[[Path], tuple[str, ...]]:
    """A BERT folder whose model.safetensors is ``header`` (its length first) and ``data``."""

    def write(folder: Path) -> tuple[str, ...]:
        args = _bert(folder)
        weights = folder / "bert" / "model.safetensors"
        weights.write_bytes(len(header).to_bytes(8, "little") + header + data)
        return args

    return write


def _big_header(folder: Path) -> tuple[str, ...]:
    args = _bert(folder)
    with open(folder / "bert" / "model.safetensors", "wb") as out:
        out.write((1 << 62).to_bytes(8, "little"))
        out.truncate(1 << 20)
    return args


def _many_tensors(folder: Path) -> tuple[str, ...]:
    entry = '"t%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}'
    header = ("{" + ",".join(entry % i for i in range(70_000)) + "}").encode()
    return _safetensors(header)(folder)


def _big_tokenizer(folder: Path) -> tuple[str, ...]:
    """A tokenizer.json of 40 MB (a hole): refused by its size before it is read."""
    args = _bert(folder)
    with open(folder / "bert" / "tokenizer.json", "wb") as out:
        out.truncate(40 << 20)
    return args


def _npz_heads(folder: Path) -> tuple[str, ...]:
    ones = np.ones((2_000_000, 1, 2))
    path = folder / "heads.npz"
    np.savez_compressed(path, w_q=ones, w_k=ones)
    return ("beta", str(path))


def _npz(name: str, members: dict[str, bytes], **kwargs: Any) -> Callable[[Path], tuple[str, ...]]:
    return lambda folder: ("beta", str(write_npz(folder / name, members, **kwargs)))


SMALL = {"w_q.npy": npy_bytes((2, 2)), "w_k.npy": npy_bytes((2, 2))}


def _evil_weights(fmt: str) -> Callable[[Path], tuple[str, ...]]:
    """beta on weights whose file name holds escapes and a byte that is not UTF-8."""

    def write(folder: Path) -> tuple[str, ...]:
        # a folder "w…[" and a file "].npz": the path holds [/], a closing tag of rich's markup
        inner = folder / os.fsdecode(b"w\x1b[2J\xff[")
        inner.mkdir()
        rng = np.random.default_rng(0)
        np.savez(inner / "].npz", w_q=rng.normal(size=(8, 4)), w_k=rng.normal(size=(8, 4)))
        return ("beta", str(inner / "].npz"), "--format", fmt)

    return write


def _claims(folder: Path, text: str, *args: str) -> tuple[str, ...]:
    path = folder / "claims.toml"
    path.write_text(text, encoding="utf-8")
    return ("check", str(path), *args)


def _hex(key: str) -> Case:
    """``0x`` and 300 hex digits as ``key``: a Python int of 1200 bits from tomllib."""

    def write(folder: Path) -> tuple[str, ...]:
        if key in ("precision", "max_seconds"):
            return _claims(folder, f"[defaults]\n{key} = {HEX}\n" + CLAIM)
        if key == "expect":
            probe = f'[[claim]]\nname = "p"\nprobe = "{KERNEL}:attention"\ndk = 16\n'
            return _claims(folder, probe + f"expect = {HEX}\n")
        if key == "claim":
            return _claims(folder, CLAIM.replace('claim = "dk"', f"claim = {HEX}"))
        return _claims(folder, CLAIM + f"{key} = {HEX}\n")

    return Case(write, 2, key)


def _junit_names(name: str) -> Callable[[Path], None]:
    """A check that the JUnit report parses with two real XML parsers and names the claim as
    the escaping shows it."""

    def after(folder: Path) -> None:
        import xml.dom.minidom
        import xml.etree.ElementTree as ET

        from varcheck.output.text import xml as xml_text

        text = (folder / "report.xml").read_text("utf-8")
        xml.dom.minidom.parseString(text)  # expat: well-formed XML 1.0
        cases = ET.fromstring(text).iter("testcase")
        assert [c.get("name") for c in cases] == [xml_text(name)], text[:500]

    return after


def _evil_claims(fmt: str) -> Case:
    def write(folder: Path) -> tuple[str, ...]:
        text = CLAIM.replace('"a"', f'"{TOML_EVIL}"') + f'description = "{TOML_EVIL}"\n'
        return _claims(folder, text, "--format", fmt, *QUICK, "--junit-xml", "report.xml")

    return Case(write, 0, "x", after=_junit_names(EVIL))


def _evil_gguf(fmt: str) -> Case:
    def write(folder: Path) -> tuple[str, ...]:
        return _audit(folder, "evil", "--format", fmt, changes={"general.name": (STR, EVIL)})

    return Case(write, 0, "x", ("gguf",))


def _evil_text(folder: Path) -> tuple[str, ...]:
    (folder / "t\x1b[2J[").mkdir()
    text = _text(folder, "t\x1b[2J[/]\u202e.txt", ["the cat sat on the mat ."], 3)
    return _bert(folder, "--text", text, "--format", "csv-meta")


# --- hooks, run in the child before the command ---------------------------------------------------


def truncate_after_load(folder: Path) -> None:
    """Cut the model file in half once it is opened: its tensors are read afterwards."""
    from varcheck.audit import llama

    real = llama.load_llama

    def load(path: Any) -> Any:
        model = real(path)
        size = os.path.getsize(model.path)
        os.truncate(model.path, size // 2)
        return model

    llama.load_llama = load


def sigterm_while_tokenising(folder: Path) -> None:
    """Send this process SIGTERM 0.2 s into the encoding of the text, noting its CPU time."""
    import signal
    import threading

    from varcheck.audit import bert

    real = bert.BertCheckpoint.encode_counted

    def encode(*args: Any) -> Any:
        def kill() -> None:
            (folder / "killed_at").write_text(repr(time.process_time()))
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Timer(0.2, kill).start()
        return real(*args)

    bert.BertCheckpoint.encode_counted = encode  # type: ignore[method-assign]


# --- the cases ------------------------------------------------------------------------------------

GGUF_CASES: dict[str, Case] = {
    # resource exhaustion before any check
    "gguf d_k 4096, 8 heads": Case(
        lambda f: _audit(f, "dk", heads=8, kv_heads=8, head_dim=4096), 2, "key_length", ("gguf",)
    ),
    "gguf d_k 8192": Case(
        lambda f: _audit(f, "dk", heads=8, kv_heads=8, head_dim=8192), 2, "key_length", ("gguf",)
    ),
    "gguf 1 MB SentencePiece token": Case(
        _spm(byte_alphabet()[:255] + ["x" * 1_000_000]), 0, "Attention logit scale", ("gguf",)
    ),
    "gguf SentencePiece tokens of every length": Case(
        _spm(["x" * n for n in range(1, 1400)]), 2, "merges", ("gguf",)
    ),
    "gguf alignment 64, 2M empty strings": Case(
        lambda f: _audit(f, "s", alignment=64, changes={"x.junk": (ARR, Hole(STR, 2_000_000))}),
        2,
        "x.junk",
        ("gguf",),
    ),
    "gguf 100M-entry uint16 array": Case(
        lambda f: _audit(f, "array", changes={"x.big": (ARR, Hole(U16, 100_000_000))}),
        0,
        "Attention logit scale",
        ("gguf",),
    ),
    "gguf 1M metadata entries declared": Case(
        _declared_header("metadata", 1_000_000), 2, "metadata entries", ("gguf",)
    ),
    "gguf 100k tensor records declared": Case(
        _declared_header("tensors", 100_000), 2, "tensor records", ("gguf",)
    ),
    "gguf name of 2 MB": Case(
        lambda f: _audit(f, "long", changes={"general.name": (STR, "n" * (2 << 20))}),
        2,
        "string of",
        ("gguf",),
    ),
    # exit 70, tracebacks, signal deaths
    "gguf token_type scalar": Case(
        lambda f: _audit(f, "ttype", changes={"tokenizer.ggml.token_type": (I32, 1)}),
        2,
        "token_type",
        ("gguf",),
    ),
    **{f"gguf tensor type {t}": _tensor_type(t) for t in GGML},
    "gguf NaN weights": Case(lambda f: _audit(f, "nan", poison=float("nan")), 2, "NaN", ("gguf",)),
    "gguf inf weights": Case(lambda f: _audit(f, "inf", poison=float("inf")), 2, "inf", ("gguf",)),
    "gguf weights overflowing float32": Case(_overflowing, 2, "overflow", ("gguf",)),
    "gguf truncated while the audit runs": Case(
        lambda f: _audit(f, "cut"), 2, "changed while it was read", ("gguf",), "truncate_after_load"
    ),
    **{f"gguf name with escapes, {fmt}": _evil_gguf(fmt) for fmt in FORMATS},
    "gguf path of 300 characters": Case(
        lambda f: ("audit", str(f / ("x" * 300 + ".gguf"))), 2, "File name too long", ("gguf",)
    ),
}

BERT_CASES: dict[str, Case] = {
    "model path of 300 characters": Case(
        lambda f: ("audit", str(f / ("x" * 300))), 2, "File name too long"
    ),
    "config.json integer of 5000 digits": Case(
        lambda f: _bert(f, config={"hidden_size": Raw("9" * 5000)}),
        2,
        "hidden_size is a number of 5,000 digits",
        ("tokenizers",),
    ),
    "tokenizer.json undeclared special token": Case(
        _template, 2, "no entry found for key", ("tokenizers",)
    ),
    "tokenizer.json backtracking regex": Case(_regex, 2, "retry-limit", ("tokenizers",)),
    "tokenizer.json of 40 MB": Case(
        _big_tokenizer,
        2,
        "accepted: at most 33,554,432 bytes",
        ("tokenizers",),
    ),
    "BERT NaN weights": Case(lambda f: _bert(f, poison=float("nan")), 2, "NaN", ("tokenizers",)),
    "safetensors header of 2^62 bytes": Case(_big_header, 2, "the header declares"),
    "safetensors header nested 100k deep": Case(
        _safetensors(b"[" * 100_000 + b"]" * 100_000), 2, "nested too deeply"
    ),
    "safetensors tensor beyond the data": Case(
        _safetensors(b'{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}', b"\0" * 8),
        2,
        "do not hold shape (4,)",
    ),
    "safetensors dtype F8_E4M3": Case(
        _safetensors(b'{"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}', b"\0"),
        2,
        "dtype 'F8_E4M3'",
    ),
    "safetensors 70k tensors": Case(_many_tensors, 2, "70,000 tensors"),
}

TEXT_CASES: dict[str, Case] = {
    "text 16 MB, MiniLM": Case(
        lambda f: ("audit", "all-MiniLM-L6-v2", "--text", english(f)), 2, "at least", ("minilm",)
    ),
    "text 16 MB, SmolLM2": Case(
        lambda f: ("audit", "smollm2-135m", "--text", english(f)), 2, "at least", ("smollm2",)
    ),
    "text 4M short lines, MiniLM": Case(
        lambda f: ("audit", "all-MiniLM-L6-v2", "--text", _text(f, "a.txt", ["a"], 4_000_000)),
        2,
        "at least 8,000,000 tokens",
        ("minilm",),
    ),
    "text one 16 MB line, MiniLM": Case(
        lambda f: ("audit", "all-MiniLM-L6-v2", "--text", _text(f, "w", ["word " * 3_200_000], 1)),
        0,
        "1 cut to 128 tokens",
        ("minilm",),
    ),
    "text file name with escapes": Case(_evil_text, 0, "t\\x1b[2J[/]\\u202e.txt", ("tokenizers",)),
}

NPZ_CASES: dict[str, Case] = {
    "npz 2M heads": Case(_npz_heads, 2, "2,000,000 heads"),
    "npz 9M members": Case(
        lambda f: ("beta", str(zip_declaring_members(f / "many.npz", 9_000_000, 467_000_000))),
        2,
        "9,000,000 members",
    ),
    "npz sigma_x declaring 2^45 entries": Case(
        _npz("sigma.npz", {**SMALL, "sigma_x.npy": npy_bytes((2**45,), data=bytes(8))}),
        2,
        "'sigma_x' declares shape (35184372088832,)",
    ),
    "npz member declaring more than it holds": Case(
        _npz("short.npz", {**SMALL, "w_q.npy": npy_bytes((2000, 2000), data=bytes(8))}),
        2,
        "but holds 8 bytes",
    ),
    "npz encrypted": Case(lambda f: ("beta", str(encrypted_npz(f / "enc.npz"))), 2, "encrypted"),
    "npz bzip2 member": Case(_npz("bz.npz", SMALL, method=12), 2, "compressed with method 12"),
    **{f"npz file name with escapes, {f}": Case(_evil_weights(f), 0, "x1b") for f in FORMATS[:3]},
}

CLAIM_CASES: dict[str, Case] = {
    "toml dotted key of 200k parts": Case(
        lambda f: _claims(f, "a" + ".a" * 200_000 + " = 1\n" + CLAIM), 2, "more than 16 parts"
    ),
    "toml integer of 5000 digits": Case(
        lambda f: _claims(f, f"[defaults]\nseed = {'9' * 5000}\n" + CLAIM),
        2,
        "claims.toml:2: malformed TOML: an integer of 5000 digits",
    ),
    **{f"toml {HEX[:6]}… as {key}": _hex(key) for key in HEX_KEYS},
    "toml 5000 tests": Case(
        lambda f: _claims(
            f,
            "".join(CLAIM.replace('"a"', f'"c{i}"') for i in range(5)).replace(
                "dk = 4", 'dk = "1..1000:1"'
            ),
        ),
        2,
        "more than 4,096 tests",
    ),
    "claim named [/]": Case(
        lambda f: _claims(f, CLAIM.replace('"a"', '"[/]"'), *QUICK, "--junit-xml", "report.xml"),
        0,
        "[/]",
        after=_junit_names("[/]"),
    ),
    **{f"claim name with escapes, {fmt}": _evil_claims(fmt) for fmt in FORMATS},
}

CASES: dict[str, Case] = GGUF_CASES | BERT_CASES | TEXT_CASES | NPZ_CASES | CLAIM_CASES


# --- the runner -----------------------------------------------------------------------------------


class Ran(NamedTuple):
    """A case's run: exit status (``"timeout"``, or minus the signal that killed it), what it
    printed, its wall time, its peak resident memory in bytes and its CPU seconds (``None``
    when it died)."""

    code: int | str
    out: str
    err: str
    seconds: float
    peak: int | None
    cpu: float | None = None


def _child(args: Sequence[str], folder: str, hook: str | None, limit: int, cpu: float) -> None:
    """In the forked child: the memory and CPU limits, the output to files, the hook, the
    command."""
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (int(cpu), int(cpu) + 5))
    os.chdir(folder)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    code = 1
    try:
        if hook is not None:
            globals()[hook](Path(folder))
        from varcheck.cli import main

        main(list(args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:  # noqa: BLE001 - reported as a failure of the case, with its traceback
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        Path("peak").write_text(str(usage.ru_maxrss * 1024))
        Path("cpu").write_text(repr(time.process_time()))
        os._exit(code)


#: what the commands tried here import: loaded once, by the server
PRELOAD = (
    "cli.audit",
    "cli.beta",
    "cli.check",
    "audit.decoder",
    "encoder.render",
    "checks.claim_file",
    "checks.render",
    "paper.beta",
    "paper.render",
)


#: wall-clock seconds after which a child is taken to be blocked for good (not computing: its
#: CPU limit stops a computation), far above what a loaded machine needs
WALL_SECONDS = 300.0


class Runner:
    """Runs command lines in children forked from a server that imported varcheck's heavy
    dependencies once."""

    def __init__(self) -> None:
        self.context = multiprocessing.get_context("forkserver")
        preload = [f"varcheck.{m}" for m in PRELOAD] + ["rich.table", "hostile_cases"]
        preload += [m for m in ("gguf", "gguf.quants", "tokenizers") if _importable(m)]
        self.context.set_forkserver_preload(preload)

    def run(
        self, args: Sequence[str], folder: Path, *, hook: str | None, limit: int, timeout: float
    ) -> Ran:
        """Run ``args`` in a child with ``limit`` bytes of address space and ``timeout`` seconds
        of CPU (past which the kernel stops it: exit -24); a child still alive after
        ``WALL_SECONDS`` is blocked for good and killed (``"timeout"``)."""
        for name in ("stdout", "stderr", "peak", "cpu"):
            (folder / name).unlink(missing_ok=True)
        start = time.monotonic()
        child = self.context.Process(
            target=_child, args=(tuple(args), str(folder), hook, limit, timeout)
        )
        child.start()
        child.join(WALL_SECONDS)
        code: int | str
        if child.is_alive():
            child.kill()
            child.join()
            code = "timeout"
        else:
            code = child.exitcode if child.exitcode is not None else "?"
        seconds = time.monotonic() - start
        read = lambda name: (folder / name).read_text("utf-8", "replace")  # noqa: E731
        peak = int(read("peak")) if (folder / "peak").exists() else None
        cpu = float(read("cpu")) if (folder / "cpu").exists() else None
        return Ran(code, read("stdout"), read("stderr"), seconds, peak, cpu)


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
