"""The one settings class: every knob, read from ``WEBHOOK_*`` environment variables."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from webhook_service.delivery.transport import EgressProxy
from webhook_service.store.redis_url import parse_cluster

# Svix's schedule, the reference: immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h.
DEFAULT_RETRY_SCHEDULE = (0.0, 5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 36000.0)
# The bootstrap key has every scope and no rate limit, so it must not be guessable:
# 32 characters of `openssl rand -hex 24` (48) or of what `up` generates (38) are far
# beyond any online guessing.
ADMIN_KEY_MIN_LENGTH = 32
# What WEBHOOK_MODE=tick sets where the variable is not set: no Celery wake-ups (no worker
# consumes them), and a new delivery due at once (its due entry is its only wake-up, which
# the next tick finds).
TICK_DEFAULTS: dict[str, object] = {"wake_workers": False, "wakeup_grace": 0.0}


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    # Errors never quote what was given: several settings are secrets (a short admin key
    # refused at start-up must not be printed in the refusal).
    model_config = SettingsConfigDict(
        env_prefix="WEBHOOK_", extra="ignore", frozen=True, hide_input_in_errors=True
    )

    redis_url: str | None = None
    # The Celery broker apart from the store: redis:// (a plain Redis or Valkey), sentinel://
    # (as WEBHOOK_REDIS_URL spells it) or amqp:// (RabbitMQ). Unset: the store itself, which
    # a Redis Cluster cannot be (the validator below refuses that). A secret, as a URL's
    # password may be in it.
    broker_url: SecretStr | None = None
    data_dir: Path = Path("./var")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    # The service's public base URL (https://webhooks.example.com), which portal links
    # start with; unset, a link starts with the scheme and host its request came to.
    public_url: str | None = None
    admin_key: SecretStr | None = None
    # base64 of 32 bytes; endpoint secrets are sealed with it (AES-GCM) before they reach Redis.
    master_key: SecretStr | None = None
    # Comma-separated earlier master keys that still open secrets during a master-key rotation.
    previous_master_keys: SecretStr | None = None

    retry_schedule: Annotated[tuple[float, ...], NoDecode] = DEFAULT_RETRY_SCHEDULE
    retry_jitter: float = Field(0.2, ge=0, lt=1)
    # Timeouts and 429 answers wait at least this long before the next attempt.
    throttle_floor: float = Field(60.0, ge=0, allow_inf_nan=False)
    request_timeout: float = Field(15.0, gt=0)
    connect_timeout: float = Field(5.0, gt=0)
    max_payload_bytes: int = Field(256 * 1024, gt=0)
    # Shape of accepted JSON: nesting levels, and object keys counted over the whole body.
    max_json_depth: int = Field(32, ge=2)
    max_json_keys: int = Field(10_000, ge=1)
    # Values of any kind (containers and scalars) over the whole body: what bounds the cost of
    # validating, storing and re-serialising a body of 80 000 empty objects.
    max_json_nodes: int = Field(20_000, ge=1)
    # Slow clients: the request line and headers (and an idle keep-alive connection) must
    # come within header_timeout, a body within body_timeout; past max_connections open
    # connections a process answers 503 at once and closes.
    header_timeout: float = Field(20.0, gt=0, allow_inf_nan=False)
    body_timeout: float = Field(20.0, gt=0, allow_inf_nan=False)
    max_connections: int = Field(1000, ge=1)
    # On SIGTERM an API process takes no new connection and serves the requests it has begun
    # for up to this long: above the body timeout, so a request whose body is arriving can
    # finish; below the supervisor's grace before its SIGKILL.
    shutdown_timeout: float = Field(30.0, gt=0, allow_inf_nan=False)
    # Requests one API key may have in flight in one API process; more get a 429.
    key_concurrency: int = Field(64, ge=1)
    # Request line plus header lines, in bytes, and how many headers: beyond either, a 431.
    # The HTTP parser itself cuts off at twice these (a plain-text 400; see api/limits.py).
    max_header_bytes: int = Field(16 * 1024, ge=1024)
    max_headers: int = Field(100, ge=10)
    response_body_limit: int = Field(4096, ge=0)
    idempotency_ttl: int = Field(86400, gt=0)
    # Every Redis client, the Celery broker's too: a connection is made within
    # redis_connect_timeout and every reply comes within redis_socket_timeout, or the caller
    # gets an error (the API a 503) instead of a hang on a dead network. A pooled connection
    # idle for redis_health_check_interval is PINGed before it is used again (kombu also
    # drops a BRPOP whose reply is that long overdue). An API request waits at most
    # redis_pool_timeout for a free pooled connection.
    redis_connect_timeout: float = Field(2.0, gt=0, allow_inf_nan=False)
    redis_socket_timeout: float = Field(5.0, gt=0, allow_inf_nan=False)
    redis_health_check_interval: float = Field(15.0, gt=0, allow_inf_nan=False)
    redis_pool_timeout: float = Field(5.0, gt=0, allow_inf_nan=False)
    durability: Literal["everysec", "strict"] = "everysec"
    allowed_networks: Annotated[tuple[str, ...], NoDecode] = ()
    https_only: bool = False
    # http://[user:password@]host:port: every delivery goes through this HTTP proxy (CONNECT
    # for https), for a fixed egress address. A secret: the URL may hold the proxy's password.
    # The SSRF guard still checks each receiver's host first (delivery/transport.py).
    egress_proxy: SecretStr | None = None

    # An endpoint that only fails, exhausting deliveries, for this long is disabled.
    disable_after: float = Field(5 * 86400.0, ge=0, allow_inf_nan=False)
    # Requests in flight to one endpoint, across every worker: a slow receiver holds at most
    # this many, so it cannot take all the workers' capacity from the others.
    endpoint_concurrency: int = Field(10, ge=1)
    # Requests in flight for one application's events, across every worker (0: no cap): a
    # tenant whose endpoints all hang holds at most this many. 50 is a quarter of one
    # default worker's slots (worker_concurrency 2 x worker_max_in_flight 100) and half of
    # one process's, so one tenant never fills even a single process. Not for the default
    # application (a single-tenant deployment's every endpoint) nor our operational events.
    app_concurrency: int = Field(50, ge=0)
    # Endpoints one application may have, which is also the most deliveries one event fans
    # out to (only within its application): each event's single ingest step writes one
    # record per subscribed endpoint.
    max_endpoints_per_app: int = Field(100, ge=1)
    # Ingest checks an event's data against its catalog type's schema, where it has one
    # (api/validation.py): off; warn (stored, counted and logged); enforce (a 422).
    validate_events: Literal["off", "warn", "enforce"] = "warn"

    # A lease outlasts the longest send (connect and request timeouts) by this much: the
    # lease's and the record's round trips to Redis, and a busy machine's delays. A worker
    # killed mid-send has its deliveries sent again that long after it leased them.
    lease_margin: float = Field(15.0, gt=0, allow_inf_nan=False)

    worker_concurrency: int = Field(2, ge=1)
    # Sends one worker process keeps in flight; a wake-up waits for room below this.
    worker_max_in_flight: int = Field(100, ge=1)
    # Seconds between a process's attempts and their adding to the metrics and endpoint
    # stats in Redis (store/counts.py): what a killed process may leave uncounted.
    counts_interval: float = Field(1.0, gt=0, le=60, allow_inf_nan=False)
    batch_size: int = Field(50, ge=1)
    scheduler_interval: float = Field(0.5, gt=0)
    # A wake-up not picked up within this long is presumed lost and sent again: a new,
    # retried or replayed delivery's due entry comes this long after it. 0 only in tick
    # mode (its default there), where no wake-up is sent and that entry is the only one.
    wakeup_grace: float = Field(30.0, ge=0, allow_inf_nan=False)
    # service: workers and a scheduler send. tick: the API alone, and POST /v1/cron/tick
    # sends (docs/deploy.md); it sets TICK_DEFAULTS where not set, needs the cron secret,
    # and /readyz expects no worker or scheduler.
    mode: Literal["service", "tick"] = "service"
    # Tick mode (no always-on workers): the bearer secret of POST /v1/cron/tick, which is
    # not served (404) while this is unset; and whether the API publishes Celery wake-ups,
    # which nobody would consume there.
    cron_secret: SecretStr | None = None
    wake_workers: bool = True
    # Events, deliveries and attempts older than this are trimmed by the scheduler.
    retention_days: float = Field(30.0, gt=0, allow_inf_nan=False)
    # The delivery log in SQL (webhook_service/history): None is SQLite in the data dir;
    # postgresql://user:pass@host/db in production. A secret: the URL holds a password.
    log_url: SecretStr | None = None
    # A hot standby of that PostgreSQL (postgresql://…, streaming replication) that the
    # history's reads go to, sparing the primary's I/O for the shipper; None: the log itself.
    # Its replay lag must stay under WEBHOOK_HOT_SECONDS, or what has just left Redis is
    # missing from the history until it catches up. A secret, as the log's URL is.
    log_read_url: SecretStr | None = None
    # Every wait on the log's database: a connection, a statement, a pooled connection.
    log_timeout: float = Field(5.0, gt=0, allow_inf_nan=False)
    # Outbox records one shipper transaction writes, and how long an idle shipper sleeps:
    # an attempt is in the SQL history within about this long of its record.
    log_batch_size: int = Field(2000, ge=1)
    log_ship_interval: float = Field(0.2, gt=0, allow_inf_nan=False)
    # Outbox records Redis may hold while SQL is away; past it ingest answers 503 rather
    # than let Redis fill. About 0.5 KiB each at fan-out 3: the default is ~500 MiB.
    log_backlog_max: int = Field(1_000_000, ge=1)
    # /readyz reports the log `lagging` once its oldest unshipped record is this old; the
    # API stays ready (it still takes events) until the backlog reaches the cap above.
    log_max_lag: float = Field(60.0, gt=0, allow_inf_nan=False)
    # A finished delivery, and an event whose deliveries are all finished, stay in Redis
    # this long after their log records are in SQL; then only SQL holds them.
    hot_seconds: float = Field(60.0, ge=0, le=3600, allow_inf_nan=False)
    # /readyz fails when a bucket has had no scheduler pass for this long.
    scheduler_max_lag: float = Field(30.0, gt=0)
    log_level: str = "INFO"
    log_format: Literal["console", "json"] = "console"
    # One line per HTTP request (aiohttp's access log). Off by default, as in gunicorn: at
    # INFO it was 30 % of the API's CPU under ingest load, and the history API, /metrics
    # and a load balancer's own log already tell who sent what.
    access_log: bool = False
    # The asyncio event loop of the API and of each worker's delivery thread: uvloop (libuv)
    # or the standard library's. bench/bench_event_loop.py measures the two in one run.
    event_loop: Literal["uvloop", "asyncio"] = "uvloop"

    @field_validator("retry_schedule", mode="before")
    @classmethod
    def _parse_schedule(cls, value: object) -> object:
        value = _split_csv(value)
        if isinstance(value, list | tuple) and not value:
            raise ValueError("the retry schedule needs at least one delay")
        return value

    @field_validator("retry_schedule")
    @classmethod
    def _non_negative(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(not math.isfinite(delay) or delay < 0 for delay in value):
            raise ValueError("retry delays must be finite and not negative")
        if value[0] != 0:
            # The first attempt goes out as soon as the event is stored.
            raise ValueError("the first entry is the first attempt and must be 0")
        return value

    @field_validator("admin_key")
    @classmethod
    def _long_admin_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < ADMIN_KEY_MIN_LENGTH:
            raise ValueError(
                f"WEBHOOK_ADMIN_KEY must be at least {ADMIN_KEY_MIN_LENGTH} characters; "
                "generate one with `openssl rand -hex 24`"
            )
        return value

    @field_validator("public_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
            raise ValueError("WEBHOOK_PUBLIC_URL is a base URL: http(s)://host[:port][/path]")
        return value.rstrip("/")

    @field_validator("egress_proxy")
    @classmethod
    def _proxy_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None
        # Parsed at start-up as the transport will parse it; the message never quotes the
        # URL (it may hold the password).
        try:
            EgressProxy.parse(value.get_secret_value())
        except ValueError as exc:
            raise ValueError(f"WEBHOOK_EGRESS_PROXY: {exc}") from None
        return value

    @model_validator(mode="before")
    @classmethod
    def _mode_defaults(cls, data: Any) -> Any:
        # Before the fields: what is set explicitly (the environment, arguments) wins.
        if isinstance(data, dict) and data.get("mode") == "tick":
            return {**TICK_DEFAULTS, **data}
        return data

    @model_validator(mode="after")
    def _mode_fits(self) -> Settings:
        if self.mode == "tick":
            if self.cron_secret is None:
                raise ValueError(
                    "WEBHOOK_MODE=tick needs WEBHOOK_CRON_SECRET, the bearer secret of "
                    "POST /v1/cron/tick, which alone sends in tick mode; make one with "
                    "`openssl rand -hex 32`"
                )
            if self.wake_workers:
                # No worker runs: every wake-up would stay in Redis, unconsumed.
                raise ValueError(
                    "WEBHOOK_MODE=tick runs no worker to wake: unset WEBHOOK_WAKE_WORKERS"
                )
        elif self.wakeup_grace == 0:
            # The scheduler would claim each delivery again on every pass until it is leased.
            raise ValueError("WEBHOOK_WAKEUP_GRACE may be 0 only with WEBHOOK_MODE=tick")
        return self

    @model_validator(mode="after")
    def _broker_fits(self) -> Settings:
        if self.broker_url is None and self.redis_url and parse_cluster(self.redis_url):
            # kombu's Redis transport talks to one server; wake-ups need a broker of their own.
            raise ValueError(
                "WEBHOOK_REDIS_URL is a Redis Cluster, which cannot be the Celery broker: set "
                "WEBHOOK_BROKER_URL (a plain Redis or Valkey, sentinel:// or amqp://)"
            )
        return self

    @field_validator("allowed_networks", mode="before")
    @classmethod
    def _parse_networks(cls, value: object) -> object:
        return _split_csv(value)

    @property
    def max_attempts(self) -> int:
        return len(self.retry_schedule)

    @property
    def lease_seconds(self) -> float:
        # Long enough for the slowest request plus the bookkeeping around it. An endpoint's
        # own timeout_seconds adds to its deliveries' leases (common.lua lease_one).
        return self.request_timeout + self.connect_timeout + self.lease_margin

    @property
    def broker_apart(self) -> bool:
        """Whether wake-ups go to a broker of their own, not the store: then no script can
        push them, and each is published after its step."""
        return self.broker_url is not None

    @property
    def effective_broker_url(self) -> str | None:
        if self.broker_url is not None:
            return self.broker_url.get_secret_value()
        return self.redis_url

    @property
    def effective_redis_url(self) -> str:
        if self.redis_url is None:
            raise RuntimeError("WEBHOOK_REDIS_URL is not set and no embedded server was started")
        return self.redis_url
