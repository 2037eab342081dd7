"""Reference models and their training entry points (``python -m models.train``)."""
