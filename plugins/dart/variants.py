"""DART's named variants: its ablations and the rollback baselines it is measured against."""

from __future__ import annotations

ABLATIONS = (
    ("dart-no-consumer-check", {"consumer_check": False}, "DART without the committed-consumer check"),
    ("dart-no-certify", {"certify": False}, "DART without boundary certification (any checkpoint is a candidate)"),
    ("dart-entry-only", {"entry_only": True},
     "DART restoring only the failed instance's entry (no commit checkpoints)"),
    ("dart-wide-search", {"wide_search": True},
     "DART searching every stable checkpoint up to the aligned boundary, other instances' included"),
)
BASELINES = (
    ("retry-only", "RetryOnly", "rerun the whole task on every observable failure"),
    ("coarse-retry", "CoarseRetry", "rerun the failing call's entity (its subtasks) from its start, unchecked"),
    ("entry-only", "EntryOnly", "restore the failing instance's entry, unchecked"),
    ("checkpoint-latest", "CheckpointLatest", "restore the latest checkpoint before the failing call"),
)
