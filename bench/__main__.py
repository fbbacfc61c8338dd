"""`python -m bench`: every benchmark, one table."""

from bench.run import main

raise SystemExit(main())
