"""proctor.runtime.admission."""
