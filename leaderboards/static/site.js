// vbench-async leaderboard: sortable tables and the per-sample browser. No dependencies, no network: data comes from
// <script type="application/json"> blocks, and every piece of result text is inserted with textContent (never as HTML).
"use strict";

(function () {
  // ---- sortable tables: click a header button; numbers sort numerically, empty cells always last ----------------
  function cellValue(row, index) {
    var cell = row.cells[index];
    if (!cell) return "";
    return cell.hasAttribute("data-v") ? cell.getAttribute("data-v") : cell.textContent.trim();
  }

  function sortTable(table, index, type, descending) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var keyed = rows.map(function (row, i) { return { row: row, v: cellValue(row, index), i: i }; });
    keyed.sort(function (a, b) {
      var ea = a.v === "", eb = b.v === "";
      if (ea || eb) return ea === eb ? a.i - b.i : (ea ? 1 : -1);
      var c;
      if (type === "number") c = parseFloat(a.v) - parseFloat(b.v);
      else c = a.v.localeCompare(b.v, undefined, { numeric: true, sensitivity: "base" });
      if (c === 0) return a.i - b.i;  // stable
      return descending ? -c : c;
    });
    keyed.forEach(function (k) { body.appendChild(k.row); });
  }

  function initSortable(table) {
    var headers = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(headers, function (th, index) {
      var button = th.querySelector("button");
      if (!button) return;
      button.addEventListener("click", function () {
        // numbers start high-to-low (best first), text A-Z; a second click reverses
        var type = th.getAttribute("data-type") || "text";
        var current = th.getAttribute("aria-sort");
        var descending = current ? current === "ascending" : type === "number";
        Array.prototype.forEach.call(headers, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        sortTable(table, index, type, descending);
      });
    });
  }

  // ---- per-sample browser -------------------------------------------------------------------------------------------
  var PAGE = 50;

  function readJSON(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  function outcome(row) {
    if (row.error_kind) return "failed";
    if (row.score === null || row.score === undefined) return "unscored";
    if (row.score >= 1) return "correct";
    if (row.score <= 0) return "wrong";
    return "partial";
  }

  function haystack(row) {
    return [row.sample_id, row.question, row.answer, row.output, row.extracted, row.task_type, row.error,
            (row.options || []).join("\n")].join("\n").toLowerCase();
  }

  function td(text, cls) {
    var cell = document.createElement("td");
    if (cls) cell.className = cls;
    cell.textContent = text === null || text === undefined ? "" : String(text);
    return cell;
  }

  function initSamples(table) {
    var rows = readJSON("sample-data") || [];
    var labels = readJSON("run-labels") || {};
    rows.forEach(function (r) { r._text = haystack(r); r._outcome = outcome(r); });
    var q = document.getElementById("q"), run = document.getElementById("run");
    var which = document.getElementById("outcome"), count = document.getElementById("count");
    var pageLabel = document.getElementById("page");
    var prev = document.getElementById("prev"), next = document.getElementById("next");
    var page = 0, shown = rows;

    function render() {
      var body = table.tBodies[0];
      while (body.firstChild) body.removeChild(body.firstChild);
      var pages = Math.max(1, Math.ceil(shown.length / PAGE));
      page = Math.min(page, pages - 1);
      shown.slice(page * PAGE, page * PAGE + PAGE).forEach(function (r) {
        var tr = document.createElement("tr");
        tr.className = "outcome-" + r._outcome;
        tr.appendChild(td(labels[r.run] || r.run));
        tr.appendChild(td(r.sample_id, "mono"));
        var qcell = td(r.question, "text");
        if (r.options && r.options.length) {
          var list = document.createElement("ul");
          r.options.forEach(function (o) { var li = document.createElement("li"); li.textContent = o; list.appendChild(li); });
          qcell.appendChild(list);
        }
        tr.appendChild(qcell);
        tr.appendChild(td(r.answer, "text"));
        tr.appendChild(td(r.output, "text output"));
        tr.appendChild(td(r.extracted, "text"));
        var s = r.score === null || r.score === undefined ? "–" : (Math.round(r.score * 1000) / 1000).toString();
        tr.appendChild(td(s + (r.judge_verdict ? " (judge: " + r.judge_verdict + ")" : ""), "num"));
        tr.appendChild(td(r.error_kind ? r.error_kind + ": " + (r.error || "") : "", "text error"));
        body.appendChild(tr);
      });
      count.textContent = shown.length + " of " + rows.length + " results";
      pageLabel.textContent = "page " + (page + 1) + " of " + pages;
      prev.disabled = page === 0;
      next.disabled = page >= pages - 1;
    }

    function apply() {
      var needle = q.value.trim().toLowerCase(), r = run.value, o = which.value;
      shown = rows.filter(function (row) {
        return (!r || row.run === r) && (!o || row._outcome === o) && (!needle || row._text.indexOf(needle) >= 0);
      });
      page = 0;
      render();
    }

    q.addEventListener("input", apply);
    run.addEventListener("change", apply);
    which.addEventListener("change", apply);
    document.getElementById("filters").addEventListener("submit", function (e) { e.preventDefault(); });
    prev.addEventListener("click", function () { page -= 1; render(); });
    next.addEventListener("click", function () { page += 1; render(); });
    apply();
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), initSortable);
    var samples = document.getElementById("samples");
    if (samples) initSamples(samples);
  });
})();
