"""proctor.policy layer."""
