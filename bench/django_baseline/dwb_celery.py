"""The baseline's Celery app, as django-webhook's docs set one up."""
# mypy: ignore-errors
# (Django is only in the baseline's own venv; see README.md.)

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dwb_settings")
app = Celery("dwb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["django_webhook"])
