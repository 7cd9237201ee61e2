// The operator page's script: times in the operator's zone, and live
// updates: on each "update" event of /events
// (the ledger changed), fetch the board again and swap it in. The page
// works without this file, minus the live updates. A board on which the
// operator is filling in a form is not swapped (it would lose what was
// typed): the swap waits until the form is left empty or sent.
(function () {
  // Times come in UTC (RFC 3339, kept in the title for hover); they are
  // shown in the operator's own zone, and again after every swap.
  function localTimes(root) {
    if (!root || !window.Intl) return;
    var ts = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < ts.length; i++) {
      var d = new Date(ts[i].getAttribute("datetime"));
      if (isNaN(d.getTime())) continue;
      ts[i].textContent = d.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", timeZoneName: "short" });
    }
  }
  localTimes(document);
  if (!window.EventSource || !window.fetch) return;
  var board = document.getElementById("board");
  if (!board) return;
  var pending = false;
  function busy() {
    var b = document.getElementById("board");
    var a = document.activeElement;
    if (b && a && b.contains(a) && /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName)) return true;
    var typed = b ? b.querySelectorAll("form.act input[name=reason], form.act input[name=limit], form.act input[name=ref]") : [];
    for (var i = 0; i < typed.length; i++) if (typed[i].value) return true;
    return false;
  }
  function redraw() {
    if (busy()) { pending = true; return; }
    pending = false;
    fetch("/board" + window.location.search, { cache: "no-store", credentials: "same-origin" }).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (html && !busy()) {
        // A group the operator opened stays open.
        var open = {};
        var ds = document.querySelectorAll("#board details[data-key][open]");
        for (var i = 0; i < ds.length; i++) open[ds[i].dataset.key] = true;
        document.getElementById("board").outerHTML = html;
        var nb = document.getElementById("board");
        ds = nb.querySelectorAll("details[data-key]");
        for (var j = 0; j < ds.length; j++) if (open[ds[j].dataset.key]) ds[j].open = true;
        localTimes(nb);
      }
      else if (html) pending = true;
    });
  }
  setInterval(function () { if (pending) redraw(); }, 1000);
  var es = new EventSource("/events?since=" + encodeURIComponent(board.dataset.marker || ""));
  es.addEventListener("update", redraw);
})();
