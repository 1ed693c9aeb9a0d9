"""The shared ingestion engine used by every table module.

Kept import-light on purpose: importing the package must not start Spark or load Great
Expectations, so the CLI answers ``--help`` and the template hooks run in a blink.
"""
