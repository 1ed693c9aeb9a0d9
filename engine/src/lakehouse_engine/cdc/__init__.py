"""Change data capture: binlog reading, transaction assembly and the exactly-once filter."""
