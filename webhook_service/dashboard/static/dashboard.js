// The dashboard's only script: pages work without it, it just saves a few clicks.
"use strict";

// A page showing something under way (a pending delivery, a running job) follows it.
const refresh = Number(document.body.dataset.refresh);
if (refresh > 0) {
  setTimeout(() => window.location.reload(), refresh * 1000);
}

// Forms that stop, replace or re-send things ask first.
for (const form of document.querySelectorAll("form[data-confirm]")) {
  if (!form.dataset.confirm) continue;
  form.addEventListener("submit", (event) => {
    if (!window.confirm(form.dataset.confirm)) event.preventDefault();
  });
}
