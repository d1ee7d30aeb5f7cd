"""``varcheck audit`` bounded and interruptible (#17): every input checked before work, files
read only if regular and small, a memory and time estimate with a one-line refusal, and the
layers finished kept on Ctrl-C and SIGTERM in every format."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from processes import default_sigint
from rich.console import Console
from test_audit import _tiny_checkpoint

from varcheck.audit import bert, encoder
from varcheck.audit.command import audit
from varcheck.audit.encoder import parse_layers, plan_audit
from varcheck.audit.render import render_audit
from varcheck.errors import VarcheckError

HAVE_EXTRA = all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers"))
needs_extra = pytest.mark.skipif(
    not HAVE_EXTRA,
    reason="safetensors/tokenizers are not installed (pip install 'varcheck[models]')",
)
ROOT = Path(__file__).resolve().parents[1]
TEXT = ["the cat sat on the mat .", "a dog ran far away .", "the dog", "cat sat", "a mat"]


def _one_line(message: str, fragment: str) -> None:
    assert fragment in message, message
    assert "\n" not in message and len(message) < 400, message


# --- config.json ----------------------------------------------------------------------------------


@needs_extra
@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"num_hidden_layers": 1_000_000}, "num_hidden_layers 1000000 is not accepted"),
        ({"num_hidden_layers": 1e8}, "num_hidden_layers 100000000.0 is not accepted"),
        ({"num_hidden_layers": -5}, "num_hidden_layers -5 is not accepted"),
        ({"num_hidden_layers": 0}, "from 1 to 1,024"),
        ({"num_hidden_layers": 3}, "num_hidden_layers 3, but the weights hold 2"),
        ({"hidden_size": 8.9}, "hidden_size 8.9 is not accepted; accepted: a whole number"),
        ({"hidden_size": float("inf")}, "hidden_size inf is not accepted"),
        ({"hidden_size": True}, "hidden_size True is not accepted"),
        ({"hidden_size": "8"}, "hidden_size '8' is not accepted"),
        ({"layer_norm_eps": "abc"}, "layer_norm_eps 'abc' is not accepted; accepted: a number"),
        ({"layer_norm_eps": -1}, "layer_norm_eps -1 is not accepted"),
        ({"layer_norm_eps": 0}, "above 0 and below 1"),
        ({"layer_norm_eps": float("nan")}, "layer_norm_eps nan is not accepted"),
        ({"max_position_embeddings": "x"}, "max_position_embeddings 'x' is not accepted"),
        ({"max_position_embeddings": 2}, "from 3 to 1,048,576"),
        ({"intermediate_size": [16]}, "intermediate_size [16] is not accepted"),
        ({"model_type": "x" * 5000}, "model_type is 'xxxx"),
        ({"hidden_act": {"a": 1}}, "hidden_act {'a': 1} is not supported"),
    ],
)
def test_bad_config_values_are_one_line(tmp_path, changes, fragment):
    folder = _tiny_checkpoint(tmp_path, config_changes=changes)
    with pytest.raises(VarcheckError) as info:
        bert.load_checkpoint(folder)
    _one_line(str(info.value), fragment)


@needs_extra
def test_whole_floats_are_read_as_counts(tmp_path):
    folder = _tiny_checkpoint(tmp_path, config_changes={"hidden_size": 8.0, "layer_norm_eps": 1})
    with pytest.raises(VarcheckError, match="layer_norm_eps 1 is not accepted"):
        bert.load_checkpoint(folder)
    folder = _tiny_checkpoint(tmp_path, config_changes={"hidden_size": 8.0})
    assert bert.load_checkpoint(folder).config.hidden_size == 8


@needs_extra
def test_deeply_nested_config_is_refused(tmp_path):
    folder = _tiny_checkpoint(tmp_path)
    (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(VarcheckError) as info:
        bert.load_checkpoint(folder)
    _one_line(str(info.value), "nested too deeply")


@needs_extra
def test_large_config_is_refused_before_reading(tmp_path):
    folder = _tiny_checkpoint(tmp_path)
    (folder / "config.json").write_bytes(b" " * (bert.MAX_CONFIG_BYTES + 1))
    with pytest.raises(VarcheckError) as info:
        bert.load_checkpoint(folder)
    _one_line(str(info.value), "accepted: at most 1,048,576 bytes")


@needs_extra
@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (bytes(range(256)) * 20, "not a vocabulary (not UTF-8 text)"),
        (b"hello\nworld\n", "no [CLS], [SEP], [UNK] line"),
        (b"[CLS]\n[SEP]\n", "no [UNK] line"),
    ],
)
def test_garbage_vocab_is_refused(tmp_path, content, fragment):
    folder = _tiny_checkpoint(tmp_path)
    (folder / "vocab.txt").write_bytes(content)
    with pytest.raises(VarcheckError) as info:
        bert.load_checkpoint(folder)
    _one_line(str(info.value), fragment)


@needs_extra
def test_garbage_tokenizer_json_is_refused(tmp_path):
    folder = _tiny_checkpoint(tmp_path)
    (folder / "tokenizer.json").write_text("{garbage", encoding="utf-8")
    with pytest.raises(VarcheckError) as info:
        bert.load_checkpoint(folder)
    _one_line(str(info.value), "cannot read the tokenizer")


# --- files that are not regular: refused at once, in a subprocess with a deadline ---------------


def _varcheck(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``varcheck`` in a child process under a 3 GiB address-space limit and a deadline."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    exe = Path(sys.executable).with_name("varcheck")
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=timeout, preexec_fn=limit
    )


@needs_extra
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
@pytest.mark.parametrize("where", ["config", "text"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_fifo_and_devices_are_refused_without_reading(tmp_path, where, kind):
    folder = _tiny_checkpoint(tmp_path)
    target = folder / "config.json" if where == "config" else tmp_path / "text.txt"
    target.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    args = ["audit", str(folder)] + (["--text", str(target)] if where == "text" else [])
    start = time.perf_counter()
    done = _varcheck(*args)
    assert time.perf_counter() - start < 30
    assert done.returncode == 2 and done.stdout == "", done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not a regular file; accepted: a regular file" in lines[0]


@needs_extra
@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"num_hidden_layers": 1_000_000}, "num_hidden_layers 1000000 is not accepted"),
        ({"num_hidden_layers": 1e8}, "num_hidden_layers 100000000.0 is not accepted"),
        ({"layer_norm_eps": -1}, "layer_norm_eps -1 is not accepted"),
        ({"hidden_size": 8.9}, "hidden_size 8.9 is not accepted"),
    ],
)
def test_cli_refuses_bad_configs_fast_and_small(tmp_path, changes, fragment):
    """The command line, in a child under a 3 GiB address-space limit: exit 2, one line, no
    partial output, well within the deadline (today's 2.7 GB and out-of-memory runs)."""
    folder = _tiny_checkpoint(tmp_path, config_changes=changes)
    start = time.perf_counter()
    done = _varcheck("audit", str(folder), "--format", "json")
    assert time.perf_counter() - start < 30
    assert done.returncode == 2 and done.stdout == "", done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in done.stderr


@needs_extra
def test_large_text_is_refused_before_reading(tmp_path):
    text = tmp_path / "big.txt"
    with open(text, "wb") as handle:
        handle.truncate(encoder.MAX_TEXT_BYTES + 1)  # sparse: no disk used
    with pytest.raises(VarcheckError) as info:
        encoder.read_text_file(text)
    _one_line(str(info.value), "accepted: at most 16,777,216 bytes")


# --- layers and lengths ---------------------------------------------------------------------------


def test_huge_layer_range_is_refused_before_it_is_built():
    start = time.perf_counter()
    with pytest.raises(VarcheckError) as info:
        parse_layers("0-99999999999999999999", 6)
    assert time.perf_counter() - start < 1
    _one_line(str(info.value), "layer 99999999999999999999 is out of range")
    assert "layer indices 0 to 5" in str(info.value) and "0--" not in str(info.value)


def test_layer_messages_read_well_and_echo_at_most_60_characters():
    with pytest.raises(VarcheckError) as info:
        parse_layers("3", 1)
    assert "accepted: layer index 0," in str(info.value)
    spec = "1," * 5000 + "9"
    with pytest.raises(VarcheckError) as info:
        parse_layers(spec, 6)
    assert len(str(info.value)) < 250 and "…" in str(info.value)
    with pytest.raises(VarcheckError) as info:
        parse_layers([10**30], 6)
    assert len(str(info.value)) < 200


@needs_extra
def test_max_length_message_names_the_range(tmp_path):
    ckpt = bert.load_checkpoint(_tiny_checkpoint(tmp_path))
    with pytest.raises(VarcheckError) as info:
        ckpt.encode(["the cat"], 2)
    _one_line(str(info.value), "max_length 2 is out of range; accepted: 3 to 16")


# --- memory and time, estimated before any forward pass -----------------------------------------


def _fake_checkpoint(d=384, f=1536, heads_=12, layers=6, weights_bytes=90e6):
    cfg = SimpleNamespace(hidden_size=d, intermediate_size=f, num_heads=heads_, num_layers=layers)
    weights = {"w": SimpleNamespace(nbytes=weights_bytes)}
    return SimpleNamespace(config=cfg, weights=weights)


def test_plan_accepts_the_built_in_text_size():
    plan = plan_audit(_fake_checkpoint(), [16] * 42, range(6), 32)
    assert plan.batch_size == 32 and plan.memory_bytes < 2**30 and plan.seconds < 60


def test_plan_refuses_too_much_memory_in_one_line():
    with pytest.raises(VarcheckError) as info:
        plan_audit(_fake_checkpoint(d=65536, f=4096), [512] * 200, [0], 32)
    message = str(info.value)
    _one_line(message, "GiB of memory (limit 4 GiB); accepted: a shorter --text")
    assert "200 sequences (102,400 tokens, up to 512 each) through 1 layer" in message


def test_plan_refuses_too_long_a_run_in_one_line():
    with pytest.raises(VarcheckError) as info:
        plan_audit(_fake_checkpoint(layers=1000), [128] * 200, range(1000), 32)
    _one_line(str(info.value), "s (limit 1,800 s); accepted: a shorter --text, a smaller")


def test_plan_cuts_the_batch_to_fit_long_sequences():
    plan = plan_audit(_fake_checkpoint(heads_=16, d=1024, f=4096), [512] * 64, [0], 32)
    assert 1 <= plan.batch_size < 32


# --- interruptions ------------------------------------------------------------------------------


def _interrupt_at_call(monkeypatch, number):
    """Ctrl-C during the ``number``-th batch measured (counting from 1)."""
    real, calls = encoder._measure_batch, []

    def measured(*args):
        calls.append(1)
        if len(calls) == number:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(encoder, "_measure_batch", measured)


@needs_extra
@pytest.mark.parametrize("fmt", ["json", "table", "csv-meta", "markdown"])
def test_interrupt_keeps_the_finished_layers_in_every_format(tmp_path, monkeypatch, fmt):
    folder = _tiny_checkpoint(tmp_path)
    _interrupt_at_call(monkeypatch, 3)  # 40 sentences: 2 batches per layer, stopped in layer 1
    res = audit(folder, sentences=TEXT * 8, layers="all")
    assert res.interrupted and res.finished_layers == (0,)
    assert {r.layer for r in res.rows} == {0} and len(res.rows) == 2
    out = io.StringIO()
    render_audit(res, fmt, Console(file=out, width=100, color_system=None))
    text = out.getvalue()
    if fmt == "json":
        data = json.loads(text)
        assert data["interrupted"] is True and data["layers_finished"] == [0]
        assert data["layers"] == [0, 1] and len(data["rows"]) == 2
    elif fmt == "csv-meta":
        assert "interrupted=True" in text.splitlines()[0]
        assert len(text.strip().splitlines()) == 2 + 2
    else:
        assert "partial" in text and "layers finished: 0 (of 0, 1)" in text


@needs_extra
def test_interrupt_before_any_layer_gives_no_rows(tmp_path, monkeypatch):
    folder = _tiny_checkpoint(tmp_path)
    _interrupt_at_call(monkeypatch, 1)
    res = audit(folder, sentences=TEXT, layers="1")
    assert res.interrupted and res.rows == () and res.finished_layers == ()
    out = io.StringIO()
    render_audit(res, "json", Console(file=out))
    assert json.loads(out.getvalue())["rows"] == []


@needs_extra
def test_cli_interrupted_exits_130_with_the_partial_json(tmp_path, monkeypatch, run_cli):
    folder = _tiny_checkpoint(tmp_path)
    text = tmp_path / "t.txt"
    text.write_text("\n".join(TEXT) + "\n", encoding="utf-8")
    _interrupt_at_call(monkeypatch, 2)  # one batch per layer: stopped in layer 1
    result = run_cli("audit", str(folder), "--text", str(text), "--format", "json")
    assert result.exit_code == 130
    data = json.loads(result.stdout)
    assert data["interrupted"] is True and data["layers_finished"] == [0]


_SLOW_AUDIT = """
import pathlib, sys, time
from varcheck.audit import encoder
real, calls, ready = encoder._measure_batch, [], pathlib.Path(sys.argv[4])
def measured(*args):
    calls.append(1)
    if len(calls) == 5:  # layer 0 done (4 batches): say so, then be slow in layer 1
        ready.write_text("ready")
        time.sleep(60)
    return real(*args)
encoder._measure_batch = measured
sys.argv = ["varcheck", "audit", sys.argv[1], "--text", sys.argv[2], "--format", sys.argv[3]]
from varcheck.cli import main
main()
"""


@needs_extra
@pytest.mark.parametrize(
    ("sig", "status", "fmt"),
    [(signal.SIGINT, 130, "json"), (signal.SIGTERM, 143, "json"), (signal.SIGTERM, 143, "table")],
)
def test_signals_keep_the_layers_finished(tmp_path, sig, status, fmt):
    """A real signal to a real process once layer 0 is done: exit 128 + signal, layer 0 kept."""
    folder = _tiny_checkpoint(tmp_path)
    text = tmp_path / "t.txt"
    text.write_text("\n".join(TEXT * 20) + "\n", encoding="utf-8")  # 100 lines: 4 batches
    ready = tmp_path / "ready"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(_SLOW_AUDIT),
            str(folder),
            str(text),
            fmt,
            str(ready),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=default_sigint,
    )
    try:
        # guards against a hang, not speed limits (a loaded machine starts a child slowly)
        deadline = time.monotonic() + 600
        while not ready.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), "the child never finished layer 0"
        child.send_signal(sig)
        out, err = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == status, err
    if fmt == "json":
        data = json.loads(out)
        assert data["interrupted"] is True and data["layers_finished"] == [0]
        assert {r["layer"] for r in data["rows"]} == {0}
    else:
        assert "partial" in out and "layers finished: 0 (of 0, 1)" in out
