"""proctor.runtime layer."""
