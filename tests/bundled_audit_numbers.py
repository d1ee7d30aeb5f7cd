"""The numbers the bundled-model audits print, flattened: what must not move when they gain figures.

``python tests/bundled_audit_numbers.py OUT.json`` writes them for MiniLM (layers 0 and 3) and
SmolLM2 (layers 0 and 2) on the built-in text, with whatever ``varcheck`` is importable: run it
against the code before a change to the audits' arithmetic and keep the file as
``tests/data/bundled_audit_numbers.json``; ``tests/test_audit_bundled_metrics.py`` compares.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from typing import Any

#: The audits compared: model, layers.
CASES = (("all-MiniLM-L6-v2", "0,3"), ("smollm2-135m", "0,2"))

#: The distance bands, a tuple of records: flattened below.
_SKIPPED = {"distance"}


def _flat(prefix: str, value: Any, out: dict[str, float]) -> None:
    """Floats and interval ends of ``value`` under ``prefix``."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int | float):
        out[prefix] = float(value)
    elif isinstance(value, tuple) and hasattr(value, "low"):
        out[prefix + ".low"], out[prefix + ".high"] = float(value.low), float(value.high)


def head_numbers(row: Any) -> dict[str, float]:
    """Every number a head's row carries (its fields, β, the scaled variance, distance bands)."""
    out: dict[str, float] = {}
    for f in dataclasses.fields(row):
        if f.name not in _SKIPPED:
            _flat(f.name, getattr(row, f.name), out)
    for name in ("measured_scaled_var", "beta_unit", "row_scaled_var"):
        _flat(name, getattr(row, name), out)
    for b, band in enumerate(getattr(row, "distance", ())):
        for f in dataclasses.fields(band):
            _flat(f"distance.{b}.{f.name}", getattr(band, f.name), out)
    return out


def audits() -> dict[str, Any]:
    """The audits of :data:`CASES`, by model."""
    from varcheck import audit

    return {model: audit(model, layers=layers) for model, layers in CASES}


def audit_numbers(results: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """``{model: {"layer.head": numbers}}`` of the audits ``results``."""
    return {
        model: {f"{r.layer}.{r.head}": head_numbers(r) for r in res.rows}
        for model, res in results.items()
    }


def _stored(v: float) -> float | None:
    """12 significant digits (the comparison is to 1e-9 relative); NaN as null (JSON has none)."""
    return float(f"{v:.12g}") if math.isfinite(v) else None


def _finite(numbers: dict) -> dict:
    return {
        m: {h: {k: _stored(v) for k, v in row.items()} for h, row in hs.items()}
        for m, hs in numbers.items()
    }


if __name__ == "__main__":
    with open(sys.argv[1], "w", encoding="utf-8") as handle:
        json.dump(
            _finite(audit_numbers(audits())),
            handle,
            indent=0,
            sort_keys=True,
            separators=(",", ":"),
        )
        handle.write("\n")
