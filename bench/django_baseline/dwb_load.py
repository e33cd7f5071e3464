"""Load a backlog into the baseline: ``python dwb_load.py EVENTS '{"url": "secret", ...}'``.

Migrates, replaces the webhooks with one per url (with its secret, all on
``shop.Order/create``), then saves EVENTS orders: each save fires one ``fire_webhook``
task per webhook, onto the broker, for a worker that is paused meanwhile.
"""
# mypy: ignore-errors
# (Django is only in the baseline's own venv; see README.md.)

import json
import sys

import django
import dwb_celery  # noqa: F401  # binds the tasks to the app configured for the broker

django.setup()

from django.core.management import call_command  # noqa: E402
from django_webhook.models import Webhook, WebhookTopic  # noqa: E402
from shop.models import Order  # noqa: E402


def main() -> None:
    events, targets = int(sys.argv[1]), json.loads(sys.argv[2])
    call_command("migrate", verbosity=0)
    Webhook.objects.all().delete()
    topic, _ = WebhookTopic.objects.get_or_create(name="shop.Order/create")
    for url, secret in targets.items():
        webhook = Webhook.objects.create(url=url)
        webhook.topics.add(topic)
        webhook.secrets.create(token=secret)
    for _ in range(events):
        Order.objects.create(invoice=42, amount=1999)


if __name__ == "__main__":
    main()
