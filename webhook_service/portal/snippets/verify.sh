#!/bin/sh
# Check one request's signature with openssl alone.
#   WEBHOOK_SECRET: your endpoint's signing secret (whsec_...), from this portal;
#   WEBHOOK_ID, WEBHOOK_TIMESTAMP, WEBHOOK_SIGNATURE: the request's webhook-* headers;
#   standard input: the request's body, byte for byte.
# Prints "verified" and exits 0, or says why not and exits 1.
set -eu
key=$(printf '%s' "${WEBHOOK_SECRET#whsec_}" | openssl base64 -d -A | od -An -v -tx1 | tr -d ' \n')
expected=$({ printf '%s.%s.' "$WEBHOOK_ID" "$WEBHOOK_TIMESTAMP"; cat; } |
  openssl dgst -sha256 -mac HMAC -macopt "hexkey:$key" -binary | openssl base64 -A)
age=$(($(date +%s) - WEBHOOK_TIMESTAMP))
if [ "$age" -gt 300 ] || [ "$age" -lt -300 ]; then
  echo "signed more than five minutes from now: refused"
  exit 1
fi
# The header may hold several signatures (during a key rotation): one must match.
for signature in $WEBHOOK_SIGNATURE; do
  if [ "$signature" = "v1,$expected" ]; then
    echo verified
    exit 0
  fi
done
echo "no signature matches: refused"
exit 1
