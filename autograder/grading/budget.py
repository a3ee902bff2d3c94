"""A grading's time budget: each cell, each call of a check into the child, the sandbox's
restarts and the whole grading (grading.submission spends it; the audit log records it).

Its own module, without the sandbox and PyTorch that the submission imports: a batch's process
writes it into every audit line, and a pool batch's process never grades."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Budget:
    cell_timeout: float = 60.0
    call_timeout: float = 30.0
    max_restarts: int = 3
    total_seconds: float = 900.0
