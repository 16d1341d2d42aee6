/* genbench leaderboard page behaviour: sortable tables and row filters (no dependencies).
 * Part of genbench. Copyright the genbench authors. Licensed under the Apache License, Version 2.0
 * (https://www.apache.org/licenses/LICENSE-2.0). */
(function () {
  "use strict";

  function sortKey(row, col, type) {
    var cell = row.cells[col];
    if (!cell) { return null; }
    var raw = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent.trim();
    if (raw === "") { return null; }
    if (type === "num") {
      var x = parseFloat(raw);
      return isNaN(x) ? null : x;
    }
    return raw.toLowerCase();
  }

  function sortBy(table, th, dir) {
    var tbody = table.tBodies[0];
    var col = th.cellIndex;
    var type = th.getAttribute("data-type") || "text";
    var rows = Array.prototype.slice.call(tbody.rows);
    rows.sort(function (a, b) {
      var ka = sortKey(a, col, type), kb = sortKey(b, col, type);
      var oa = +a.getAttribute("data-order"), ob = +b.getAttribute("data-order");
      if (ka === null || kb === null) {          /* missing values last in both directions */
        if (ka === null && kb === null) { return oa - ob; }
        return ka === null ? 1 : -1;
      }
      var c = type === "num" ? ka - kb : ka.localeCompare(kb);
      if (dir === "descending") { c = -c; }
      return c || oa - ob;
    });
    rows.forEach(function (r) { tbody.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) {
      h.setAttribute("aria-sort", h === th ? dir : "none");
    });
  }

  function initSortable(table) {
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r, i) { r.setAttribute("data-order", i); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      if (th.hasAttribute("data-nosort")) { return; }
      th.classList.add("sortable");
      th.addEventListener("click", function () {
        var now = th.getAttribute("aria-sort");
        var first = th.getAttribute("data-first") || "ascending";
        var dir = now === "ascending" ? "descending" : now === "descending" ? "ascending" : first;
        sortBy(table, th, dir);
      });
    });
  }

  function initFilter(input) {
    var table = document.getElementById(input.getAttribute("data-table"));
    var count = document.getElementById(input.getAttribute("data-count"));
    if (!table) { return; }
    function apply() {
      var terms = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      var shown = 0, rows = table.tBodies[0].rows;
      Array.prototype.forEach.call(rows, function (r) {
        var text = r.getAttribute("data-search") || r.textContent.toLowerCase();
        var ok = terms.every(function (t) { return text.indexOf(t) !== -1; });
        r.hidden = !ok;
        if (ok) { shown += 1; }
      });
      if (count) { count.textContent = shown + " of " + rows.length + " entries shown"; }
    }
    input.addEventListener("input", apply);
    apply();
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable-table"), initSortable);
    Array.prototype.forEach.call(document.querySelectorAll("input.row-filter"), initFilter);
    document.documentElement.setAttribute("data-ready", "1");
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
}());
