"""proctor.runtime.home."""
