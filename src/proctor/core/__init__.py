"""proctor.core layer."""
