"""The measurement behind ``varcheck probe`` and probe claims: a black-box kernel's scale.

A kernel ``fn(q, k, v)`` returns ``softmax(s · q kᵀ + bias) v`` without showing its logits. Given
values that make its output the attention weight matrix (:mod:`.weights`), the log-weights are
affine in the dot products with slope ``s`` (:mod:`.analysis`); independent calls are the blocks
of an interval (:mod:`.measure`), tested against the expected scale (:mod:`.expectation`) on
core's verdict ladder (:mod:`.judge`). The kernels family shows it (``varcheck probe``); the
checks family runs it for ``probe = "TARGET"`` claims. See docs/probe.md.
"""
