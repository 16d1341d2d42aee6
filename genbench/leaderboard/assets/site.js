/* genbench leaderboard page behaviour: sortable tables, row filters, the overview charts that follow their tables,
 * and columns a reader can hide (remembered in localStorage). No dependencies; works from file://.
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
    syncChart(table);
  }

  var SLOT_MIN = 26;  /* px per mark at least, as site.py draws it: narrower, the chart scrolls */

  /* Lay the overview chart of `table` out in the table's order, showing the marks of its shown rows only. */
  function syncChart(table) {
    var fig = document.querySelector('figure.overview[data-table="' + table.id + '"]');
    if (!fig) { return; }
    var svg = fig.querySelector("svg.overview-marks");
    var marks = {};
    Array.prototype.forEach.call(svg.querySelectorAll("svg.mark"), function (m) {
      marks[m.getAttribute("data-name")] = m;
      m.style.display = "none";
    });
    var shown = [];
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
      var m = marks[r.getAttribute("data-name")];
      if (m && !r.hidden) { shown.push(m); }
    });
    var w = 100 / Math.max(shown.length, 1), prev = null;
    shown.forEach(function (m, i) {
      var g = m.getAttribute("data-group");
      m.style.display = "";
      m.setAttribute("x", (i * w).toFixed(4) + "%");
      m.setAttribute("width", w.toFixed(4) + "%");
      m.classList.toggle("first", i === 0);
      m.classList.toggle("run-start", i > 0 && g !== prev);
      prev = g;
      svg.appendChild(m);  /* the document order follows too (screen readers, tests) */
    });
    var ref = svg.querySelector("line.reference");
    if (ref) { svg.appendChild(ref); }  /* the reference line stays last: above the group bands */
    svg.style.minWidth = (shown.length * SLOT_MIN) + "px";
  }

  /* ---- columns a reader hides: one set of column keys for every leaderboard table, kept in localStorage */
  var STORE = "genbench.hidden-columns";

  function loadHidden() {
    try {
      var v = JSON.parse(window.localStorage.getItem(STORE) || "[]");
      return Array.isArray(v) ? v : [];
    } catch (e) { return []; }
  }

  function saveHidden(keys) {
    try { window.localStorage.setItem(STORE, JSON.stringify(keys)); } catch (e) { /* file:// without storage */ }
  }

  function showColumn(key, show) {
    var sel = 'table.leaderboard [data-col="' + key + '"]';
    Array.prototype.forEach.call(document.querySelectorAll(sel), function (c) {
      c.classList.toggle("col-off", !show);
    });
    var boxes = document.querySelectorAll('details.columns input[data-col="' + key + '"]');
    Array.prototype.forEach.call(boxes, function (b) { b.checked = show; });
  }

  function initColumns() {
    var hidden = loadHidden();
    hidden.forEach(function (k) { showColumn(k, false); });
    Array.prototype.forEach.call(document.querySelectorAll("details.columns input[data-col]"), function (box) {
      box.addEventListener("change", function () {
        var key = box.getAttribute("data-col"), keys = loadHidden().filter(function (k) { return k !== key; });
        if (!box.checked) { keys.push(key); }
        saveHidden(keys);
        showColumn(key, box.checked);
      });
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
      syncChart(table);
    }
    input.addEventListener("input", apply);
    apply();
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable-table"), initSortable);
    Array.prototype.forEach.call(document.querySelectorAll("input.row-filter"), initFilter);
    initColumns();
    document.documentElement.setAttribute("data-ready", "1");
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
}());
