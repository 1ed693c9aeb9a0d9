"""The Delta transaction log (``_delta_log``), read and committed to directly by the engine.

- :mod:`.commitfile`: one commit file's own facts (commit info, transaction ids), no Spark.
- :mod:`.localfiles`: a local table's log read as plain files, no Spark (``status``, the
  snapshot's silver seeding, an app id's last version).
- :mod:`.deltalog`: the newest commits, snapshot and properties through Delta's ``DeltaLog``
  (any Hadoop file system).
- :mod:`.logstate`: a local table's state (protocol, metadata, live files) replayed in Python.
- :mod:`.transaction`: a Delta transaction opened for one app id's next version, and committed.

Nothing is imported here: ``status`` reads :mod:`.localfiles` without importing pyspark.
"""
