"""Data quality: source/silver comparison, Great Expectations checks and offline Data Docs."""
