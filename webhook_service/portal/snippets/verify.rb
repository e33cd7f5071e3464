# gem install standardwebhooks
require "standardwebhooks"

# Your endpoint's signing secret (whsec_...), from this portal.
WEBHOOK = StandardWebhooks::Webhook.new(ENV.fetch("WEBHOOK_SECRET"))

# body: the request's body exactly as it arrived (Rack: request.body.read).
# Raises StandardWebhooks::WebhookVerificationError for a request that we did not sign,
# or signed more than five minutes ago: answer it 400 and ignore it.
def verified_event(request, body)
  headers = {
    "webhook-id" => request.get_header("HTTP_WEBHOOK_ID"),
    "webhook-timestamp" => request.get_header("HTTP_WEBHOOK_TIMESTAMP"),
    "webhook-signature" => request.get_header("HTTP_WEBHOOK_SIGNATURE"),
  }
  WEBHOOK.verify(body, headers)
end
