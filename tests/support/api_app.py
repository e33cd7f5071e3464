"""The API app in-process, wired as `webhook-service api` wires it: its wake-ups published
through the workers' Celery app (a new one for these settings)."""

from __future__ import annotations

from aiohttp import web

from webhook_service.api.server import build_app
from webhook_service.config import Settings
from workers.celery_app import make_app


async def api_app(settings: Settings) -> web.Application:
    return await build_app(settings, make_app(settings) if settings.wake_workers else None)
