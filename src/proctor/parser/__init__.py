"""proctor.parser layer."""
