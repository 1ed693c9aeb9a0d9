"""One module per source table; each defines ``TABLE = TableSpec(...)``.

Add one with ``python -m <package> add-table NAME`` (it introspects the source for the key).
"""
