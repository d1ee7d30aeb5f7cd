"""A sampler module that fails when imported (the user's own bug)."""

raise RuntimeError("weights.pt not found\nsecond line")


def logits(rng, dk):  # pragma: no cover - never reached
    return rng.standard_normal(dk)
