"""The state machine's example counts: small in CI; `--hypothesis-profile=soak` (what `make soak` passes) runs many."""

from hypothesis import HealthCheck, settings

settings.register_profile("soak", max_examples=400, stateful_step_count=50, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
