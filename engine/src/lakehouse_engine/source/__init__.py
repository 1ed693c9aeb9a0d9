"""The MySQL/MariaDB source: connections, all SQL text, introspection, preflight checks and type mapping."""
