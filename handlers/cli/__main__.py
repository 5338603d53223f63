"""`python -m handlers.cli`: the `ledger` command."""

from handlers.cli.main import main

main()
