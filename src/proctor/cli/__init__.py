"""proctor.cli layer."""
