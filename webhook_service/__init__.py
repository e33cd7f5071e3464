"""Durable, signed webhook delivery: ingest API, Redis store, delivery engine."""

__version__ = "0.1.0"
