"""proctor.runtime.boundary."""
