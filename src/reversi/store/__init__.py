"""The store: one interface over SQLite and PostgreSQL, and the SQL both share."""
