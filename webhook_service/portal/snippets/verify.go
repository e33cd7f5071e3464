// go get github.com/standard-webhooks/standard-webhooks/libraries
package webhooks

import (
	"io"
	"net/http"
	"os"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func Handle(w http.ResponseWriter, r *http.Request) {
	// Your endpoint's signing secret (whsec_...), from this portal.
	wh, err := standardwebhooks.NewWebhook(os.Getenv("WEBHOOK_SECRET"))
	if err != nil {
		http.Error(w, "bad secret", http.StatusInternalServerError)
		return
	}
	// The body exactly as it arrived: verify before parsing any JSON.
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	// Refuses a request that we did not sign, or signed more than five minutes ago.
	if err := wh.Verify(body, r.Header); err != nil {
		http.Error(w, "invalid signature", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
