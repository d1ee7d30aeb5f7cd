"""The sweep and CI jobs: settings, claims, claim files and their output."""
