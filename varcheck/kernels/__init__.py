"""The kernels family: the effective scale of a black-box attention function (``varcheck probe``).

A kernel ``fn(q, k, v)`` returns ``softmax(s · q kᵀ + bias) v`` without showing its logits. Given
values that make its output the attention weight matrix, the log-weights are affine in the dot
products with slope ``s`` (:mod:`.analysis`); independent calls are the blocks of an interval
(:mod:`.probe`). See docs/probe.md.
"""
