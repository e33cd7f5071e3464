"""An endpoint's form, written once for the dashboard and the portal: what a person types,
read back as the API's fields, and the API's refusal shown beside the field it points at.

The portal's form holds the subscriber's fields (``EndpointForm``: URL, description, the
event types ticked in the catalog, channels). The dashboard's begins with the same and adds
the operator's (``DeliverySettings``: rate limit, retry schedule, timeout, ordering, payload
filter, headers, disabled, and the signature scheme when creating). Both post to the API routes the
command line uses (POST and PATCH ``…/endpoints``), as the signed-in key or portal session.

What a person typed is kept as typed (strings), so a refused form comes back unchanged.
Input that cannot even be put in a request (a filter that is not JSON, a schedule that is
not numbers) is refused here, beside its field; everything else is the API's to judge, and
its problem document (RFC 9457) is shown as it says: its detail above the form, each of its
``errors[]`` beside the field its pointer names.

A URL the service refuses to send to (a private, loopback or otherwise internal address:
the API's 422 ``destination-blocked``) is explained in plain words, rather than as the
API's terse reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from multidict import MultiDictProxy

from webhook_service.admin.api import JSON
from webhook_service.client.errors import APIError
from webhook_service.dashboard.access import explain
from webhook_service.dashboard.catalog import pretty
from webhook_service.dashboard.markup import Markup, join, render
from webhook_service.dashboard.session import CSRF_FIELD

# Why the service would not take a URL (the reason the API gives in the problem's
# errors[].detail, before its colon), said for someone who never saw our service.
_PRIVATE = (
    "We only send webhooks to addresses on the public internet, never to private, "
    "loopback or cloud-internal ones (such as localhost, 127.0.0.1, 10.x.x.x, 192.168.x.x "
    "or 169.254.169.254), so that nobody can use them to reach machines inside our "
    "network. Use your server's public domain name or address."
)
BLOCKED_REASONS = {
    "blocked_address": "That address is not on the public internet. " + _PRIVATE,
    "localhost_name": "That name points at this machine or at an internal network. " + _PRIVATE,
    "non_canonical_ip": "Write an IP address as four numbers with dots (such as "
    "203.0.113.7), or better, use a domain name.",
    "scheme": "The URL must start with https:// (or http://).",
    "https_required": "Only https:// URLs are accepted: your endpoint must use TLS.",
    "userinfo": "Leave the user name and password out of the URL. To authenticate us, check "
    "our signature instead (see Verify signatures).",
    "bad_port": "The port in the URL is not a valid one (1 to 65535).",
    "no_host": "The URL has no host name: write it whole, such as https://example.com/webhooks.",
    "invalid_url": "That is not a URL we can read: write it whole, such as "
    "https://example.com/webhooks.",
    "unresolvable": "We could not find that host name. Check its spelling, or wait until "
    "its DNS record is published.",
}


def refusal(error: APIError) -> str:
    """What to tell a person whose URL or fields the API refused."""
    problem = error.problem
    if problem.kind == "destination-blocked":
        for item in problem.errors:
            reason = item.get("detail", "").split(":", 1)[0]
            if reason in BLOCKED_REASONS:
                return BLOCKED_REASONS[reason]
        return f"We cannot send webhooks to this URL. {_PRIVATE}"
    return explain(error)


# A form field's name by the API field its problem pointers start with, where they differ.
_FIELD_OF = {"timeout_seconds": "timeout"}
Errors = Mapping[str, str]  # a form field's name: what is wrong with what was typed there


def field_errors(error: APIError) -> dict[str, str]:
    """The problem's ``errors[]`` by the form field each points at (``/filter/data.amount``:
    the filter, ``/retry_schedule/2``: the retry schedule), the rest of each pointer kept,
    so that a person sees which part was wrong."""
    found: dict[str, str] = {}
    for item in error.problem.errors:
        pointer = str(item.get("pointer", ""))
        head, _, rest = pointer.lstrip("/").partition("/")
        name = _FIELD_OF.get(head, head)
        detail = str(item.get("detail", ""))
        said = f"{rest}: {detail}" if rest else detail
        found[name] = f"{found[name]}; {said}" if name in found else said
    return found


@dataclass(frozen=True)
class EndpointForm:
    """The subscriber's fields, as typed, so a refused one is shown again unchanged."""

    url: str = ""
    description: str = ""
    event_types: tuple[str, ...] = ()
    channels: str = ""

    @classmethod
    def of(cls, endpoint: JSON) -> EndpointForm:
        return cls(
            endpoint["url"],
            endpoint.get("description") or "",
            tuple(endpoint.get("event_types") or ()),
            ", ".join(endpoint.get("channels") or ()),
        )

    @classmethod
    def read(cls, form: MultiDictProxy[str]) -> EndpointForm:
        return cls(
            form.get("url", "").strip(),
            form.get("description", "").strip(),
            tuple(form.getall("event_types", [])),
            form.get("channels", ""),
        )

    def fields(self) -> JSON:
        """The API's fields. No type ticked: every type; no channel: every event."""
        channels = [c.strip() for c in self.channels.split(",") if c.strip()]
        return {
            "url": self.url,
            "description": self.description,
            "event_types": list(self.event_types) or None,
            "channels": channels or None,
        }


class FormInvalid(Exception):
    """Input that cannot be put in a request, by form field."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def number_text(value: float) -> str:
    """A number as a person would type it back: 300, not 300.0; 0.25 whole, never rounded
    (the form is compared with the endpoint before saving, and must read back the same)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _number(text: str, name: str, errors: dict[str, str], what: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        errors[name] = f"{what}, such as {_EXAMPLES[name]}"
        return None
    if not math.isfinite(value):
        errors[name] = f"{what}, such as {_EXAMPLES[name]}"
        return None
    return value


_EXAMPLES = {"rate_limit": "10 or 0.5", "retry_schedule": "0, 5, 300", "timeout": "15"}


def _schedule(text: str, errors: dict[str, str]) -> list[float] | None:
    parts = [p.strip() for p in text.replace(";", ",").split(",")]
    if not any(parts):
        return None
    try:
        delays = [float(p) for p in parts]
    except ValueError:
        errors["retry_schedule"] = "seconds separated by commas, such as 0, 5, 300"
        return None
    if not all(math.isfinite(d) for d in delays):
        errors["retry_schedule"] = "seconds separated by commas, such as 0, 5, 300"
        return None
    return delays


def _filter(text: str, errors: dict[str, str]) -> dict[str, Any] | None:
    if not text.strip():
        return None
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        errors["filter"] = f"not JSON: {exc}"
        return None
    if not isinstance(parsed, dict):
        errors["filter"] = 'a JSON object, such as {"data.amount": {"$gte": 100}}'
        return None
    return parsed


def _headers(text: str, errors: dict[str, str]) -> dict[str, str] | None:
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            errors["headers"] = f"line {number}: Name: value"
            return None
        if name.strip() in found:
            errors["headers"] = f"line {number}: {name.strip()} is given twice"
            return None
        found[name.strip()] = value.strip()
    return found or None


SIGNATURES = ("hmac", "ed25519")
# An endpoint's ordering (the API's "ordering"): none, or first in, first out.
FIFO = "fifo"


@dataclass(frozen=True)
class DeliverySettings:
    """The operator's fields past the subscriber's: how fast, how often and in what order
    we send, what we send it, and whether at all. Empty: the service's default (no limit,
    the global retry schedule and timeout, several at once, no filter, no headers)."""

    rate_limit: str = ""
    retry_schedule: str = ""
    timeout: str = ""
    # FIFO, or "": several deliveries at once, in no promised order.
    ordering: str = ""
    filter: str = ""
    headers: str = ""
    disabled: bool = False
    # Chosen when creating only: the API keeps an endpoint's scheme for its life.
    signature: str = SIGNATURES[0]

    @classmethod
    def of(cls, endpoint: JSON) -> DeliverySettings:
        rate, schedule, timeout = (
            endpoint.get("rate_limit"),
            endpoint.get("retry_schedule"),
            endpoint.get("timeout_seconds"),
        )
        chosen = endpoint.get("filter")
        return cls(
            "" if rate is None else number_text(rate),
            "" if schedule is None else ", ".join(number_text(d) for d in schedule),
            "" if timeout is None else number_text(timeout),
            FIFO if endpoint.get("ordering") == FIFO else "",
            "" if chosen is None else pretty(chosen),
            # A value the API withheld (a key without endpoints:write) is shown empty: such
            # a key cannot save the form anyway (the API's 403).
            "\n".join(f"{k}: {v or ''}" for k, v in (endpoint.get("headers") or {}).items()),
            bool(endpoint.get("disabled")),
            str(endpoint.get("signature") or SIGNATURES[0]),
        )

    @classmethod
    def read(cls, form: MultiDictProxy[str]) -> DeliverySettings:
        signature = form.get("signature", SIGNATURES[0])
        return cls(
            form.get("rate_limit", ""),
            form.get("retry_schedule", ""),
            form.get("timeout", ""),
            FIFO if form.get("ordering") == FIFO else "",
            form.get("filter", ""),
            form.get("headers", ""),
            form.get("disabled") == "1",
            signature if signature in SIGNATURES else SIGNATURES[0],
        )

    def fields(self) -> JSON:
        """The API's fields (the signature left out: only a new endpoint takes it), or
        ``FormInvalid`` naming each field that cannot be sent."""
        errors: dict[str, str] = {}
        fields: JSON = {
            "rate_limit": _number(self.rate_limit, "rate_limit", errors, "requests a second"),
            "retry_schedule": _schedule(self.retry_schedule, errors),
            "timeout_seconds": _number(self.timeout, "timeout", errors, "seconds"),
            "ordering": FIFO if self.ordering == FIFO else None,
            "filter": _filter(self.filter, errors),
            "headers": _headers(self.headers, errors),
            "disabled": self.disabled,
        }
        if errors:
            raise FormInvalid(errors)
        return fields


def _same(value: Any) -> Any:
    """A field's value as compared: none, empty and an empty list or map are one; lists of
    names in any order are one (the API keeps them sorted)."""
    if value in (None, "", [], {}):
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return sorted(value)
    return value


def changed(endpoint: JSON, fields: JSON) -> JSON:
    """The fields whose value differs from the endpoint's: what a PATCH should carry, so
    that saving a form sends only what the person changed (an enable left alone keeps the
    endpoint's disabled reason; a header value the key could not read is not overwritten)."""
    return {k: v for k, v in fields.items() if _same(v) != _same(endpoint.get(k))}


def _error(errors: Errors, name: str) -> Markup:
    if name not in errors:
        return Markup("")
    return render('<p class="field-error" role="alert">$e</p>', e=errors[name])


_SUBSCRIBER_FIELDS = """<label>Endpoint URL <input type="url" name="url" value="$url" required
 placeholder="https://example.com/webhooks" autocomplete="off"></label>
<p class="hint">Where we POST each event. It must be reachable from the internet.</p>$url_error
<label>Description <input type="text" name="description" value="$description"
 placeholder="Production orders"></label>$description_error
<fieldset><legend>Event types</legend>
<p class="hint">Tick the events to receive; tick none to receive every type.</p>$types
</fieldset>$types_error
<label>Channels <input type="text" name="channels" value="$channels"
 placeholder="eu, priority"></label>
<p class="hint">Optional, separated by commas: only events sent to one of these channels
reach this endpoint. Leave empty for every event of its types.</p>$channels_error"""


def subscriber_fields(form: EndpointForm, types: Markup, errors: Errors) -> Markup:
    """The fields both forms have; ``types``: the catalog's choices (catalog.choices)."""
    return render(
        _SUBSCRIBER_FIELDS,
        url=form.url,
        description=form.description,
        types=types,
        channels=form.channels,
        url_error=_error(errors, "url"),
        description_error=_error(errors, "description"),
        types_error=_error(errors, "event_types"),
        channels_error=_error(errors, "channels"),
    )


_OPERATOR_FIELDS = """<fieldset><legend>Sending</legend>
<label>Rate limit <input type="text" inputmode="decimal" name="rate_limit" value="$rate_limit"
 placeholder="none"></label>
<p class="hint">At most this many requests a second to it (over 0, up to 10000). Empty: no
limit of its own.</p>$rate_limit_error
<label>Retry schedule <input type="text" name="retry_schedule" value="$retry_schedule"
 placeholder="the service's"></label>
<p class="hint">Seconds before each attempt, separated by commas, the first usually 0, such as
0, 5, 300: as many attempts as delays (at most 20, 7 days in all). Empty: the service's
schedule (WEBHOOK_RETRY_SCHEDULE).</p>$retry_schedule_error
<label>Request timeout <input type="text" inputmode="decimal" name="timeout" value="$timeout"
 placeholder="the service's"></label>
<p class="hint">Seconds to wait for its answer, 1 to 60. Empty: WEBHOOK_REQUEST_TIMEOUT.</p>
$timeout_error<label>Ordering <select name="ordering">$orderings</select></label>
<p class="hint">FIFO: one delivery at a time, in the order the events were accepted; the
next waits until the one before has succeeded or failed for good.</p>$ordering_error
</fieldset>
<label>Filter <textarea name="filter" rows="4" placeholder="$filter_example">$filter</textarea>
</label>
<p class="hint">A payload filter in JSON (README: Payload filters): only the events it passes
reach this endpoint. Empty: every event of its types and channels.</p>$filter_error
<label>Headers <textarea name="headers" rows="3" placeholder="X-Tenant: acme">$headers</textarea>
</label>
<p class="hint">Sent with every request, one <code>Name: value</code> a line (not the ones we
set: webhook-*, Content-Type, Host…). Empty: none.</p>$headers_error
$signature<label class="check"><input type="checkbox" name="disabled" value="1"$disabled>
Disabled: send it nothing, keep its events as disabled deliveries</label>$disabled_error"""


def _signature_choice(settings: DeliverySettings) -> Markup:
    options = join(
        render(
            '<option value="$v"$sel>$v</option>',
            v=v,
            sel=Markup(" selected") if v == settings.signature else Markup(""),
        )
        for v in SIGNATURES
    )
    return render(
        '<label>Signature <select name="signature">$options</select></label>'
        '<p class="hint">hmac: a shared secret (Standard Webhooks v1); ed25519: a key pair, '
        "the receiver holds only our public key. Fixed once made.</p>",
        options=options,
    )


_ORDERINGS = (("", "none: several at once"), (FIFO, "FIFO: one at a time, in order"))


def _ordering_choice(settings: DeliverySettings) -> Markup:
    return join(
        render(
            '<option value="$v"$sel>$label</option>',
            v=value,
            label=label,
            sel=Markup(" selected") if value == settings.ordering else Markup(""),
        )
        for value, label in _ORDERINGS
    )


def operator_fields(settings: DeliverySettings, errors: Errors, *, creating: bool) -> Markup:
    """The dashboard's fields past the subscriber's; the signature only when ``creating``."""
    return render(
        _OPERATOR_FIELDS,
        rate_limit=settings.rate_limit,
        retry_schedule=settings.retry_schedule,
        timeout=settings.timeout,
        orderings=_ordering_choice(settings),
        filter=settings.filter,
        filter_example='{"data.amount": {"$gte": 100}}',
        headers=settings.headers,
        signature=_signature_choice(settings) if creating else Markup(""),
        disabled=Markup(" checked") if settings.disabled else Markup(""),
        rate_limit_error=_error(errors, "rate_limit"),
        retry_schedule_error=_error(errors, "retry_schedule"),
        timeout_error=_error(errors, "timeout"),
        ordering_error=_error(errors, "ordering"),
        filter_error=_error(errors, "filter"),
        headers_error=_error(errors, "headers"),
        disabled_error=_error(errors, "disabled"),
    )


@dataclass(frozen=True)
class FormFrame:
    """Where a form posts and what its buttons say."""

    action: str
    submit: str
    cancel: str
    # The session's form token (a dashboard's or a portal's session: both send CSRF_FIELD).
    csrf: str = field(repr=False, default="")


def form_markup(frame: FormFrame, fields: Markup) -> Markup:
    return render(
        '<form method="post" action="$action" class="endpoint-form">\n'
        '<input type="hidden" name="$csrf_field" value="$csrf">\n$fields\n'
        '<button type="submit" class="primary">$submit</button> <a href="$cancel">Cancel</a>\n'
        "</form>",
        action=frame.action,
        csrf_field=CSRF_FIELD,
        csrf=frame.csrf,
        fields=fields,
        submit=frame.submit,
        cancel=frame.cancel,
    )
