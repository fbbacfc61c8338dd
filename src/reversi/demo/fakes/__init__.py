"""Small fakes of Stripe's API, Slack's Web API and a mail API, each a Starlette app served on 127.0.0.1.

`reversi demo` runs its agent's charge, message and email against them, so the tour needs no network
and no account; the connector tests use the same fakes. `base.serving(app, fake)` serves one in a
thread and yields its URL.
"""
