"""The naive baseline: webhooks the way the usual Celery tutorials send them."""
