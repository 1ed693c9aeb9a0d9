"""The ``lakehouse`` commands, one module each; each module's ``run`` takes the command's context
(and its typed options) and returns the exit code."""
