// npm install standardwebhooks
const { Webhook } = require("standardwebhooks");

// Your endpoint's signing secret (whsec_...), from this portal.
const webhook = new Webhook(process.env.WEBHOOK_SECRET);

// body: the request's raw body (a string or Buffer, before JSON parsing: with Express,
// express.raw({ type: "application/json" })); headers: its headers (Express: req.headers).
// Throws for a request that we did not sign, or signed more than five minutes ago:
// answer it 400 and ignore it.
function verifiedEvent(body, headers) {
  return webhook.verify(body, headers);
}

module.exports = { verifiedEvent };
