"""proctor.runtime.records."""
