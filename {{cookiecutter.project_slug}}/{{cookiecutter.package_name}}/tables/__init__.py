"""One module per source table; each defines ``TABLE = TableSpec(...)``.

Add one with ``lakehouse add-table NAME`` (it introspects the source for the key).
"""
