"""Project configuration: lakehouse_project.yml, profiles, targets and table selection."""
