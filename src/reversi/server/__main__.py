"""`python -m reversi.server`: the same as `reversi-server`."""

from reversi.server.main import main

main()
