"""Lakehouse ingestion of MySQL/MariaDB tables into Delta Lake."""
