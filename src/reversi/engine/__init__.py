"""The engine: recording, rollback, approvals, halts and access, reached through the `Ledger`."""
