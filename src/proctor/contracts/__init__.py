"""proctor.contracts layer."""
