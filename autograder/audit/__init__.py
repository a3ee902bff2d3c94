"""The audit log, and what reads it again: replay, verify, regrade --diff."""
