"""`python -m flows` is the `subrun` command."""

from flows.cli import main

main()
