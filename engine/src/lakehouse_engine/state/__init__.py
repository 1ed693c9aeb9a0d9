"""Ingestion state: binlog positions, per-table checkpoints and the exact encoding of their key values."""
