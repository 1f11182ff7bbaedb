// Refreshes the status page every 2 s without reloading it: fetches the
// page again and swaps its <main id="status"> in place. A failed fetch
// keeps the last answer on screen, dimmed, and says so.
(function () {
  'use strict';
  var every = 2000;
  var state = document.getElementById('refresh-state');
  function say(text, failing) {
    state.textContent = text;
    state.parentNode.classList.toggle('failing', failing);
    var cur = document.getElementById('status');
    if (cur) cur.classList.toggle('stale', failing);
  }
  function tick() {
    if (document.hidden) { setTimeout(tick, every); return; }
    fetch(location.pathname, { cache: 'no-store', credentials: 'same-origin' })
      .then(function (r) {
        return r.text().then(function (body) {
          var next = new DOMParser().parseFromString(body, 'text/html').getElementById('status');
          var cur = document.getElementById('status');
          if (!next || !cur) throw new Error('HTTP ' + r.status);
          cur.replaceWith(document.adoptNode(next));
          var b = document.body;
          b.dataset.refreshes = String(Number(b.dataset.refreshes) + 1);
          say('updated ' + new Date().toLocaleTimeString() + ', every 2 s', false);
        });
      })
      .catch(function (e) {
        say('cannot reach pgdns (' + e.message + '): showing the last answer', true);
      })
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
