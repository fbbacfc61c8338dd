"""Reversi's benchmarks: journaling cost, the planner at scale, and rollback throughput.

Run them all with `python -m bench` from the project root; see bench/README.md.
"""
