"""`reversi demo`: a self-contained tour of the journal, the plan, resolve and rollback, in one folder.

`run_demo(workdir, echo)` is what the CLI's `demo` command calls. `reversi.demo.compensator` and
`reversi.demo.reader` are the bundled `--compensator-cmd` and `--reader-cmd` of the demo's world.
"""

from reversi.demo.scenario import run_demo

__all__ = ["run_demo"]
