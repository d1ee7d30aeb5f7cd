"""The kernels family: the effective scale of a black-box attention function (``varcheck probe``).

The measurement and its tests live in :mod:`varcheck.core.probe` (claim files run them too);
this family names the result: the nearest simple law (:mod:`.laws`), the diagnostics, the
verdicts over heads and d_k (:mod:`.probe`), and its rendering (:mod:`.render`,
:mod:`.figures`). See docs/probe.md.
"""
