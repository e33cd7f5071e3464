"""Admin tooling over the HTTP API: the ``webhook-service`` admin commands and the client,
text formatting and job polling they share with the dashboard."""
