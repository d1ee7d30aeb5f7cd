"""The planning family: how large a run must be to catch a given error (``varcheck plan``)."""
