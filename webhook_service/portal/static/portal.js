// The portal's own script, beside the dashboard's (confirmations, reloads): pages work
// without it, it only follows something under way.
"use strict";

// A part of a page that names a fragment URL (data-follow) is fetched again each second
// and replaced, until the fragment comes back naming none: a delivery has settled.
const FOLLOW_EVERY_MS = 1000;

function follow(element) {
  const url = element.dataset.follow;
  if (!url) return;
  setTimeout(async () => {
    try {
      const response = await fetch(url, { credentials: "same-origin" });
      if (!response.ok) return; // signed out or gone: leave the page as it is
      const holder = document.createElement("div");
      holder.innerHTML = await response.text();
      const fresh = holder.firstElementChild;
      if (!fresh) return;
      element.replaceWith(fresh);
      follow(fresh);
    } catch {
      follow(element); // the network blinked: try again
    }
  }, FOLLOW_EVERY_MS);
}

for (const element of document.querySelectorAll("[data-follow]")) follow(element);
