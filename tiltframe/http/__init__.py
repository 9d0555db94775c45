"""Serving over HTTP: the read-only query API, the page and Prometheus metrics (``tiltframe serve``)."""
