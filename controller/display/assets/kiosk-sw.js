// The kiosk's service worker (registered by display.js, scope /): a page of the controller
// loaded while the controller does not answer (a reload, the browser restarted) shows the
// kiosk's own waiting page (waiting.html, from this worker's cache), never the browser's error
// page. Only page loads are handled; the stream, the catalogue and the rest go to the network.
// The cache is filled at install and renewed after every page load that reached the controller.
"use strict";

const CACHE = "paigow-kiosk-waiting";
const WAITING = "/waiting.html";
const FILES = [
  WAITING, "/waiting.js", "/display.css",
  "/fonts/sans-400.woff2", "/fonts/sans-700.woff2",
  "/fonts/cjk-tc-400.woff2", "/fonts/cjk-tc-700.woff2",
  "/fonts/symbols-400.woff2", "/fonts/math-400.woff2",
  "/fonts/mono-400.woff2", "/fonts/mono-700.woff2",
];

async function refill() {
  const cache = await caches.open(CACHE);
  await cache.addAll(FILES.map((path) => new Request(path, { cache: "no-store" })));
}

self.addEventListener("install", (event) => {
  event.waitUntil(refill().then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(self.clients.claim());
});

async function navigate(event) {
  try {
    const response = await fetch(event.request);
    event.waitUntil(refill().catch(() => null));  // the controller answers: its current files
    return response;
  } catch (e) {
    const waiting = await caches.match(WAITING);
    return waiting || Response.error();
  }
}

self.addEventListener("fetch", (event) => {
  if (event.request.mode === "navigate") {
    event.respondWith(navigate(event));
    return;
  }
  const path = new URL(event.request.url).pathname;
  if (FILES.includes(path) && path !== WAITING) {
    // the waiting page's own files: from the network, else from the cache
    event.respondWith(fetch(event.request).catch(() => caches.match(path)
      .then((cached) => cached || Response.error())));
  }
});
