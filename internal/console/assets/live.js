// Live updates of the operator page: on each "update" event of /events
// (the ledger changed), fetch the board again and swap it in. The page
// works without this file, minus the live updates.
(function () {
  if (!window.EventSource || !window.fetch) return;
  var board = document.getElementById("board");
  if (!board) return;
  var es = new EventSource("/events?since=" + encodeURIComponent(board.dataset.marker || ""));
  es.addEventListener("update", function () {
    fetch("/board", { cache: "no-store" }).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (html) document.getElementById("board").outerHTML = html;
    });
  });
})();
