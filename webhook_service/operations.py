"""Operational events: what the service tells its operators about its own health.

They are stored and listed like any event, signed and delivered like any webhook, but only
to endpoints created with ``"operations": true``; producers may not post these types.

=====================  =====================================================================
type                   data
=====================  =====================================================================
delivery.exhausted     delivery_id, event_id, endpoint_id, event_type, attempts,
                       last_status_code, last_error: a delivery spent its whole schedule
endpoint.disabled      endpoint_id, reason (``gone``: it answered 410; ``failing``: nothing
                       but exhausted deliveries for ``WEBHOOK_DISABLE_AFTER``)
endpoint.recovered     endpoint_id: the first success after exhausted deliveries or a disable
=====================  =====================================================================

The Lua scripts that emit them (``store/lua/record.lua``) get this list as a preamble.
"""

from __future__ import annotations

OPERATIONAL_EVENT_TYPES = ("delivery.exhausted", "endpoint.disabled", "endpoint.recovered")
