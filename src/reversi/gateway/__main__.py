"""`python -m reversi.gateway`: the same as `reversi-gateway`."""

from reversi.gateway.main import main

main()
