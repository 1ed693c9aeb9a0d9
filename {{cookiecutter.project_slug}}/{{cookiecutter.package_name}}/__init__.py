"""{{ cookiecutter.project_name }}: lakehouse ingestion of MySQL/MariaDB tables into Delta Lake."""
