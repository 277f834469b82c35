"""proctor.runtime.tools layer."""
