<?php
// composer require standard-webhooks/standard-webhooks
require __DIR__ . '/vendor/autoload.php';

// Your endpoint's signing secret (whsec_...), from this portal.
$webhook = new \StandardWebhooks\Webhook(getenv('WEBHOOK_SECRET'));

// The body exactly as it arrived: verify before parsing any JSON.
$body = file_get_contents('php://input');
$headers = [
    'webhook-id' => $_SERVER['HTTP_WEBHOOK_ID'] ?? '',
    'webhook-timestamp' => $_SERVER['HTTP_WEBHOOK_TIMESTAMP'] ?? '',
    'webhook-signature' => $_SERVER['HTTP_WEBHOOK_SIGNATURE'] ?? '',
];
try {
    // Refuses a request that we did not sign, or signed more than five minutes ago.
    $event = $webhook->verify($body, $headers);
} catch (\Exception $e) {
    http_response_code(400);
    exit;
}
http_response_code(204);
