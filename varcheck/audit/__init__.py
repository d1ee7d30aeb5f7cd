"""The encoder audit: a BERT forward pass and the per-head scale audit."""
