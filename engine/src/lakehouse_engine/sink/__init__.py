"""The Delta Lake sink: the Spark session, bronze changelog, silver MERGE and Delta log reading."""
