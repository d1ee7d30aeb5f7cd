"""What every family shares to show results: formats, numbers, figures."""
