"""Reversi inside agent frameworks: one call wraps a framework's tools so every call is journaled.

Each module needs its framework, an optional extra: `reversi.integrations.langchain`
(`reversi-undo[langchain]`), `reversi.integrations.openai_agents` (`reversi-undo[openai-agents]`) and
`reversi.integrations.pydantic_ai` (`reversi-undo[pydantic-ai]`). Importing `reversi` never imports them.
"""
