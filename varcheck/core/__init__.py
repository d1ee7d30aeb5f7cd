"""What every command rests on: laws, theory, blocks, estimation, verdicts, options."""
