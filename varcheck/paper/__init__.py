"""The paper family: projections, the adaptive scale beta, training."""
