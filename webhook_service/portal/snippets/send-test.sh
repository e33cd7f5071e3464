#!/bin/sh
# Sign a test request as we sign ours, and POST it with curl to your endpoint, to try
# your receiver before our first event arrives.
#   WEBHOOK_SECRET: your endpoint's signing secret (whsec_...); ENDPOINT_URL: its URL.
set -eu
body='{"type":"test.ping","timestamp":"2026-01-01T00:00:00Z","data":{"hello":"world"}}'
id="msg_test_$(date +%s)"
timestamp=$(date +%s)
key=$(printf '%s' "${WEBHOOK_SECRET#whsec_}" | openssl base64 -d -A | od -An -v -tx1 | tr -d ' \n')
signature=$(printf '%s.%s.%s' "$id" "$timestamp" "$body" |
  openssl dgst -sha256 -mac HMAC -macopt "hexkey:$key" -binary | openssl base64 -A)
curl -sS -X POST "$ENDPOINT_URL" \
  -H "content-type: application/json" \
  -H "webhook-id: $id" \
  -H "webhook-timestamp: $timestamp" \
  -H "webhook-signature: v1,$signature" \
  --data-binary "$body"
