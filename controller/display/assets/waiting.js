// The kiosk's waiting page (waiting.html): asks the controller every 2 s and loads the page the
// browser was asked for again once it answers (the service worker then lets it through).
"use strict";
(() => {
  const EVERY_MS = 2000;
  window.kioskAttempts = 0;
  async function poll() {
    window.kioskAttempts += 1;
    try {
      const response = await fetch("/messages.json", { cache: "no-store" });
      if (response.ok) {
        window.location.reload();
        return;
      }
    } catch (e) {
      // no answer yet
    }
    setTimeout(poll, EVERY_MS);
  }
  setTimeout(poll, EVERY_MS);
})();
