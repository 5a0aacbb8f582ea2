// claudemesh web view: keeps the page's main section live. The section
// names the daemon events that change it (data-live) and, for what no
// event announces (an outbox row done), a slow refresh (data-every,
// seconds, only while the page is visible). On either, the section is
// drawn again by the server (?fragment=1: escaped by html/template) and
// swapped in. EventSource reconnects by itself and sends Last-Event-ID,
// so nothing published while the stream was down is missed.
"use strict";
(function () {
  const live = document.getElementById("live");
  const main = document.getElementById("main");
  if (!main || !live) return;
  let queued = false;
  function refresh() {
    if (queued) return;
    queued = true;
    setTimeout(async function () {
      queued = false;
      const section = main.querySelector("section");
      if (!section || document.activeElement && main.contains(document.activeElement) &&
          document.activeElement.matches("input, textarea, select")) return;
      const sep = location.search ? "&" : "?";
      try {
        const r = await fetch(location.pathname + location.search + sep + "fragment=1", {credentials: "same-origin"});
        if (r.ok) main.innerHTML = await r.text();
      } catch (e) { /* the next event or tick tries again */ }
    }, 200);
  }
  function watch() {
    const section = main.querySelector("section[data-live], section[data-every]");
    return section ? section : null;
  }
  if (window.EventSource) {
    const es = new EventSource("/web/events");
    let down = false;
    es.onopen = function () {
      live.textContent = "live"; live.className = "live on";
      if (down) refresh(); // what changed while the stream was down and no event says
      down = false;
    };
    es.onerror = function () { live.textContent = "reconnecting…"; live.className = "live off"; down = true; };
    const names = new Set(["message", "peer_join", "peer_leave", "broker_status", "daemon_disconnect",
      "daemon_reconnect", "agent_event", "member_revoked", "lock_lost", "reservation_lost", "outbox_pressure_high"]);
    names.forEach(function (name) {
      es.addEventListener(name, function () {
        const s = watch();
        if (s && (s.dataset.live || "").split(" ").indexOf(name) >= 0) refresh();
      });
    });
  }
  let ticks = 0;
  setInterval(function () {
    ticks++;
    const s = watch();
    if (!document.hidden && s && s.dataset.every && ticks % Number(s.dataset.every) === 0) refresh();
  }, 1000);
})();
