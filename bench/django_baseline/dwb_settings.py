"""Django settings of the django-webhook baseline: PostgreSQL and the broker from the bench."""
# mypy: ignore-errors
# (Django is only in the baseline's own venv; see README.md.)

import os

SECRET_KEY = "bench-only"  # nothing here is served or signed with it
INSTALLED_APPS = ["django.contrib.contenttypes", "django_webhook", "shop"]
USE_TZ = True
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ["DWB_DB_NAME"],
        "USER": os.environ["DWB_DB_USER"],
        "HOST": "127.0.0.1",
        "PORT": os.environ["DWB_DB_PORT"],
        # Kept open across tasks, as the issue asks: no connect per delivery.
        "CONN_MAX_AGE": None,
    }
}
DJANGO_WEBHOOK = {"MODELS": ["shop.Order"]}
CELERY_BROKER_URL = os.environ["DWB_BROKER_URL"]
# Its own queue on the rig's Valkey, on the same db as ours and the naive baseline's, so
# the bench's Celery control commands (pause, resume, ping) reach its worker too.
CELERY_TASK_DEFAULT_QUEUE = "django_webhook"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
