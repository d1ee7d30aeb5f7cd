"""The one table from a result type to how it is shown: its table, its JSON and its figure.

Results are leaf data: a result class imports none of its presenters. The command line and the
notebook methods of :class:`~varcheck.output.display.Displayable` (``str()``, ``_repr_html_``,
``to_dict()``, ``plot()``) both look a result up here. Presenters are named, not imported, and
imported on first use, so that ``output/`` imports no family and ``import varcheck.cli`` loads
no numpy. A new command adds one line to :data:`PRESENTERS` (see docs/architecture.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["PRESENTERS", "Presenter", "figure_of", "presenter_of"]


class Presenter(NamedTuple):
    """Where a result type's presenters live, as ``"module:function"`` names.

    Attributes
    ----------
    render : str
        ``render(result, format, console)``: the table, CSV, Markdown or JSON text.
    data : str
        ``data(result)``: the JSON document as plain data.
    figure : str or None
        ``figure(result, path)``: what ``--plot`` draws; ``None`` for a result without one.
    no_figure : str
        What ``plot()`` says for a result without a figure (the command's name by default).
    """

    render: str
    data: str
    figure: str | None = None
    no_figure: str = ""


def _family(family: str, render: str, data: str, figure: str | None = None) -> Presenter:
    def name(function: str, module: str) -> str:
        return f"varcheck.{family}.{module}:{function}"

    drawn = None if figure is None else name(figure, "figures")
    return Presenter(name(render, "render"), name(data, "render"), drawn)


#: result class (``module.Class``) -> its presenters
PRESENTERS: dict[str, Presenter] = {
    "varcheck.checks.sweep.SweepResult": _family(
        "checks", "render_sweep", "sweep_dict", "plot_sweep"
    ),
    "varcheck.checks.verify.VerifyResult": _family("checks", "render_verify", "verify_dict"),
    "varcheck.checks.claim_file.CheckResult": _family("checks", "render_check", "check_dict"),
    "varcheck.teaching.explain.ExplainResult": _family(
        "teaching", "render_explain", "explain_dict", "plot_explain"
    ),
    "varcheck.teaching.softmax.SoftmaxResult": _family(
        "teaching", "render_softmax", "softmax_dict", "plot_softmax"
    ),
    "varcheck.teaching.derive.DeriveResult": _family(
        "teaching", "render_derive", "derive_dict", "plot_derive"
    ),
    "varcheck.paper.projection.ProjectionResult": _family(
        "paper", "render_project", "project_dict", "plot_project"
    ),
    "varcheck.paper.training.TrainResult": _family(
        "paper", "render_train", "train_dict", "plot_train"
    ),
    "varcheck.paper.beta.BetaReport": _family("paper", "render_beta", "beta_dict"),
    "varcheck.audit.encoder.AuditResult": _family(
        "audit", "render_audit", "audit_dict", "plot_audit"
    ),
    "varcheck.audit.decoder.DecoderAuditResult": _family(
        "audit", "render_decoder", "decoder_dict", "plot_decoder_audit"
    ),
    "varcheck.audit.results.CheckpointAudit": Presenter(
        "varcheck.audit.hf_render:render_checkpoint",
        "varcheck.audit.hf_render:checkpoint_dict",
        "varcheck.audit.hf_figures:plot_checkpoint",
    ),
    "varcheck.audit.results.TrendResult": Presenter(
        "varcheck.audit.hf_render:render_trend",
        "varcheck.audit.hf_render:trend_dict",
        "varcheck.audit.hf_figures:plot_trend",
    ),
    "varcheck.kernels.probe.ProbeSweepResult": _family(
        "kernels", "render_probe", "probe_sweep_dict", "plot_probe"
    ),
    "varcheck.checks.plan_result.PlanResult": Presenter(
        "varcheck.checks.plan_render:render_plan",
        "varcheck.checks.plan_render:plan_dict",
    ),
    "varcheck.kernels.probe.ProbeResult": _family(
        "kernels", "render_probe_row", "probe_row_dict"
    )._replace(
        no_figure="one d_k's probe draws no figure; probe_sweep's result draws s against d_k"
    ),
}


def _load(name: str) -> Callable[..., Any]:
    module, function = name.split(":")
    return getattr(importlib.import_module(module), function)


def _entry(result: object) -> Presenter:
    for cls in type(result).__mro__:
        entry = PRESENTERS.get(f"{cls.__module__}.{cls.__qualname__}")
        if entry is not None:
            return entry
    raise TypeError(f"varcheck has no presenter for {type(result).__name__}")


def presenter_of(result: object) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """A result's ``render(result, format, console)`` and its JSON ``data(result)``."""
    entry = _entry(result)
    return _load(entry.render), _load(entry.data)


def figure_of(result: object) -> Callable[..., Any] | str:
    """A result's ``figure(result, path)``, or, for a result without a figure, the sentence
    that says so (without its command's name when the table gives none)."""
    entry = _entry(result)
    return entry.no_figure if entry.figure is None else _load(entry.figure)
