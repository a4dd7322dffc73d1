// Sagaway console: refresh each [data-poll] region from its fragment URL every few seconds.
// Plain JavaScript, no dependencies; the pages work without it (they are then not live).
(function () {
  "use strict";

  function setStale(stale) {
    var state = document.getElementById("live-state");
    if (!state) return;
    state.textContent = stale ? " · connection lost, retrying" : " · live";
    state.className = stale ? "live-state stale" : "live-state";
  }

  function ended(region) {
    return region.querySelector("[data-ended='true']") !== null;
  }

  function poll(region) {
    var url = region.getAttribute("data-poll");
    var interval = parseInt(region.getAttribute("data-interval"), 10) || 2000;
    var last = null;
    function tick() {
      if (ended(region)) {
        var state = document.getElementById("live-state");
        if (state) state.textContent = ""; // an ended workflow does not change any more
        return;
      }
      fetch(url, { credentials: "same-origin", cache: "no-store" })
        .then(function (response) {
          if (response.status === 401) {
            window.location.reload(); // logged out: the page goes to the login form
            return;
          }
          if (!response.ok) {
            setStale(true);
            return;
          }
          return response.text().then(function (html) {
            if (html !== last) {
              region.innerHTML = html; // the server's escaped HTML of this same page
              last = html;
            }
            setStale(false);
          });
        })
        .catch(function () {
          setStale(true);
        })
        .then(function () {
          window.setTimeout(tick, interval);
        });
    }
    window.setTimeout(tick, interval);
  }

  var regions = document.querySelectorAll("[data-poll]");
  if (regions.length > 0) setStale(false);
  regions.forEach(poll);
})();
