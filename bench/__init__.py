"""End-to-end benchmarks: ``python -m bench.run`` (``make bench``, ``make bench-full``).

Everything runs on one machine in one invocation: the service, a naive Celery baseline and
the floors (minimal servers) share the Redis and the receivers, so that the ratios between
them mean something even when the absolute figures move with the machine's load.
"""
