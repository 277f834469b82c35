"""``python -m proctor`` runs the CLI."""

from proctor.cli.main import main

main()
