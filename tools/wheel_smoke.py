"""Install the built wheel into a fresh virtual environment and use it as a user would.

Usage::

    .venv/bin/python tools/wheel_smoke.py dist     # run by `make dist-check`, after `make dist`

Checks, each printed as it passes (the first failure stops the run with exit 1):

1. the wheel holds the package's data file, ``py.typed`` and the licence;
2. it installs, with its run-time dependencies only (no extras), into a new venv;
3. ``varcheck -V`` prints the wheel's version;
4. a short sweep runs and writes valid JSON;
5. the pytest plugin is found by a pytest installed beside it, and a one-test project that uses
   the ``varcheck`` fixture passes;
6. ``varcheck audit`` without the ``models`` extra is one line on stderr naming the extra, exit 2;
7. the default text that ``audit`` reads ships inside the installed package.

Nothing here runs in `make test` (building a venv takes about a minute and reaches the package
index).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import venv
import zipfile
from pathlib import Path

TEST_PROJECT = """\
def test_normal_dot_products_have_variance_dk(varcheck):
    varcheck.assert_variance(16, claim="dk", precision=0.05)
"""


def run(args: list[str], cwd: Path | None = None, ok: tuple[int, ...] = (0,)) -> str:
    """Run a command; its stdout, or exit 1 showing what it printed."""
    res = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600)
    if res.returncode not in ok:
        print(f"FAILED ({res.returncode}): {' '.join(args)}\n{res.stdout}\n{res.stderr}")
        sys.exit(1)
    return res.stdout + res.stderr if res.returncode else res.stdout


def step(text: str) -> None:
    print(f"ok  {text}", flush=True)


def check_wheel(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for wanted in ("varcheck/py.typed", "varcheck/data/default_text.txt"):
        if wanted not in names:
            sys.exit(f"FAILED: {wanted} is not in {wheel.name}")
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
        sys.exit(f"FAILED: no LICENSE in {wheel.name}'s metadata")
    step(f"{wheel.name} holds py.typed, data/default_text.txt and LICENSE")


def main(dist: str) -> None:
    wheels = sorted(Path(dist).glob("varcheck-*.whl"))
    if len(wheels) != 1:
        sys.exit(f"FAILED: expected one varcheck wheel in {dist}, found {len(wheels)}")
    wheel = wheels[0].resolve()
    version = wheel.name.split("-")[1]
    check_wheel(wheel)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="varcheck-wheel-") as tmp:
        root = Path(tmp)
        venv.create(root / "venv", with_pip=True)
        bin_ = root / "venv" / "bin"
        pip = [str(bin_ / "python"), "-m", "pip", "--quiet", "--disable-pip-version-check"]
        run([*pip, "install", str(wheel), "pytest"])
        step(f"installed into a fresh venv with its dependencies, no extras ({wheel.name})")

        shown = run([str(bin_ / "varcheck"), "-V"]).strip()
        if version not in shown:
            sys.exit(f"FAILED: varcheck -V printed {shown!r}, not version {version}")
        step(f"varcheck -V: {shown}")

        sweep = [str(bin_ / "varcheck"), "sweep", "--dk", "2..16", "--precision", "0.05"]
        out = run([*sweep, "--seed", "1", "--format", "json"], cwd=root, ok=(0, 1))
        rows = json.loads(out)["rows"]
        step(f"varcheck sweep --dk 2..16 --precision 0.05: {len(rows)} rows of JSON")

        project = root / "project"
        project.mkdir()
        (project / "test_variance.py").write_text(TEST_PROJECT)
        tests = run([str(bin_ / "python"), "-m", "pytest", "-p", "no:cacheprovider"], project)
        if "varcheck: seed" not in tests or "1 passed" not in tests:
            sys.exit(f"FAILED: the pytest plugin's one-test project:\n{tests}")
        step(
            "pytest with the plugin, one-test project: "
            + tests.strip().splitlines()[-1].strip("= ")
        )

        # a well-formed one-tensor file: its header is checked before anything needs the extra
        header = json.dumps({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})
        header += " " * (-len(header) % 8)
        size = len(header).to_bytes(8, "little")
        (root / "model.safetensors").write_bytes(size + header.encode() + bytes(4))
        res = subprocess.run(
            [str(bin_ / "varcheck"), "audit", "model.safetensors"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = res.stderr.strip().splitlines()
        if res.returncode != 2 or len(lines) != 1 or "models extra" not in lines[0]:
            sys.exit(
                f"FAILED: audit without the models extra gave exit {res.returncode}:\n{res.stderr}"
            )
        step(f"audit without the models extra (exit 2): {lines[0]}")

        data = run(
            [
                str(bin_ / "python"),
                "-c",
                "import importlib.resources as r; "
                "print(r.files('varcheck').joinpath('data/default_text.txt').read_text()[:40])",
            ]
        )
        step(f"the installed package reads its data file: {data.strip()[:40]!r}...")
    print(f"the wheel works in a fresh venv ({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "dist")
