"""Reversi inside agent frameworks: one call wraps a framework's tools so every call is journaled.

Each module needs its framework, an optional extra: `reversi.integrations.langchain`
(`reversi-undo[langchain]`), `reversi.integrations.openai_agents` (`reversi-undo[openai-agents]`) and
`reversi.integrations.pydantic_ai` (`reversi-undo[pydantic-ai]`); `reversi.integrations.google_adk` needs
Google ADK (`pip install google-adk`) and `reversi.integrations.crewai` CrewAI (`pip install crewai`).
Importing `reversi` never imports them.
"""
