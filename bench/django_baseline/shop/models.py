"""The one model the baseline fires webhooks on."""
# mypy: ignore-errors
# (Django is only in the baseline's own venv; see README.md.)

from django.db import models


class Order(models.Model):
    invoice = models.IntegerField()
    amount = models.IntegerField()
