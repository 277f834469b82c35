"""proctor.runtime.engine."""
