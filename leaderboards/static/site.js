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
        // numbers start high-to-low (best first), text A-Z, ranks (data-order) low-to-high; a second click reverses
        var type = th.getAttribute("data-type") || "text";
        var current = th.getAttribute("aria-sort");
        var first = th.getAttribute("data-order") || (type === "number" ? "descending" : "ascending");
        var descending = current ? current === "ascending" : first === "descending";
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
    cell.textContent = text === null || text === undefined ? "" : String(text);  // never "null"/"undefined"
    return cell;
  }

  var FOLD = 160;  // outputs longer than this many characters are folded behind a preview of PREVIEW characters
  var PREVIEW = 120;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function seconds(t) { return t === null || t === undefined ? "?" : (Math.round(t * 10) / 10) + " s"; }

  // The frames the model received: thumbnails with their times, and a timeline of the video with the clip window.
  function frameStrip(f, root) {
    var box = el("div", "frames");
    if (f.missing) { box.appendChild(el("div", "sub", f.missing)); return box; }
    var strip = el("div", "strip");
    var w = f.window || null;
    f.thumbs.forEach(function (t) {
      var fig = el("figure", "thumb");
      var img = document.createElement("img");
      img.className = "thumb";
      img.alt = "frame " + t.i + " at " + seconds(t.t);
      img.src = root + t.src;
      fig.appendChild(img);
      fig.appendChild(el("figcaption", "", seconds(t.t)));
      strip.appendChild(fig);
    });
    box.appendChild(strip);
    if (f.duration) {
      var line = el("div", "timeline");
      line.title = "video: 0 – " + seconds(f.duration) + (w ? "; clip window " + seconds(w[0]) + " – " +
                   seconds(w[1] === null ? f.duration : w[1]) : "");
      if (w) {
        var span = el("span", "window");
        var start = Math.max(0, w[0] || 0), end = w[1] === null || w[1] === undefined ? f.duration : w[1];
        span.style.left = (100 * start / f.duration) + "%";
        span.style.width = Math.max(0.5, 100 * (end - start) / f.duration) + "%";
        line.appendChild(span);
      }
      f.thumbs.forEach(function (t) {
        var tick = el("span", "tick");
        tick.style.left = (100 * Math.min(1, (t.t || 0) / f.duration)) + "%";
        line.appendChild(tick);
      });
      box.appendChild(line);
    }
    var shown = f.thumbs.length < f.n ? f.thumbs.length + " of " : "";
    box.appendChild(el("div", "sub", shown + f.n + " frame" + (f.n === 1 ? "" : "s") + " sent" +
      (f.size ? " at " + f.size[1] + "×" + f.size[0] : "") + (w ? ", clip " + seconds(w[0]) + " – " +
      (w[1] === null ? "end" : seconds(w[1])) : "") + (f.origin ? " · from the " + f.origin : "")));
    return box;
  }

  function folded(text, cls) {
    var cell = el("td", cls);
    if (text === null || text === undefined) return cell;
    text = String(text);
    if (text.length <= FOLD) { cell.textContent = text; return cell; }
    var d = el("details");
    d.appendChild(el("summary", "", text.slice(0, PREVIEW) + "… (" + text.length + " characters)"));
    d.appendChild(el("div", "", text));
    cell.appendChild(d);
    return cell;
  }

  // Each cell names its column (data-label): a phone shows a sample table's row as a card, each value under the name
  // of its column (site.css).
  function headings(table) {
    return Array.prototype.map.call(table.tHead.rows[0].cells, function (th) { return th.textContent; });
  }

  function labelCells(tr, heads) {
    Array.prototype.forEach.call(tr.cells, function (c, i) { c.setAttribute("data-label", heads[i] || ""); });
  }

  function initSamples(table) {
    var rows = readJSON("sample-data") || [];
    var labels = readJSON("run-labels") || {};
    var root = table.getAttribute("data-root") || "";
    rows.forEach(function (r) {
      r._text = haystack(r); r._outcome = outcome(r);
      r._differ = !r.error_kind && r.official !== null && r.robust !== null && r.official !== undefined &&
                  r.robust !== undefined && r.official !== r.robust;
    });
    var q = document.getElementById("q"), run = document.getElementById("run");
    var which = document.getElementById("outcome"), count = document.getElementById("count");
    var cat = document.getElementById("category"), readings = document.getElementById("readings");
    var pageLabel = document.getElementById("page");
    var prev = document.getElementById("prev"), next = document.getElementById("next");
    var page = 0, shown = rows, heads = headings(table);

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
        var qcell = el("td", "text");
        if (r.frames) qcell.appendChild(frameStrip(r.frames, root));
        qcell.appendChild(el("div", "question", r.question));
        if (r.options && r.options.length) {
          var list = document.createElement("ul");
          r.options.forEach(function (o) { var li = document.createElement("li"); li.textContent = o; list.appendChild(li); });
          qcell.appendChild(list);
        }
        if (r.prompt) {
          var p = el("details", "prompt");
          p.appendChild(el("summary", "", "prompt as sent"));
          p.appendChild(el("div", "text", r.prompt));
          qcell.appendChild(p);
        }
        tr.appendChild(qcell);
        var truth = td(r.truth !== undefined && r.truth !== null ? r.truth : r.answer, "text truth");
        if (r.truth && r.truth !== r.answer) truth.title = "as stored: " + r.answer;
        tr.appendChild(truth);
        tr.appendChild(folded(r.output, "text output"));
        var hit = r._outcome === "correct" ? " hit" : (r._outcome === "wrong" || r._outcome === "partial" ? " miss" : "");
        tr.appendChild(td(r.extracted, "text extracted" + hit));
        var s = r.score === null || r.score === undefined ? "–" : (Math.round(r.score * 1000) / 1000).toString();
        var scell = td(s + (r.judge_verdict ? " (judge: " + r.judge_verdict + ")" : ""), "num");
        if (r._differ) scell.appendChild(el("div", "sub differ", "official " + r.official + " · robust " + r.robust));
        tr.appendChild(scell);
        tr.appendChild(td(r.error_kind ? r.error_kind + ": " + (r.error || "") : "", "text error"));
        labelCells(tr, heads);
        body.appendChild(tr);
      });
      count.textContent = shown.length + " of " + rows.length + " results";
      pageLabel.textContent = "page " + (page + 1) + " of " + pages;
      prev.disabled = page === 0;
      next.disabled = page >= pages - 1;
    }

    function apply() {
      var needle = q.value.trim().toLowerCase(), r = run.value, o = which.value;
      var c = cat ? cat.value : "", d = readings ? readings.value : "";
      shown = rows.filter(function (row) {
        return (!r || row.run === r) && (!o || row._outcome === o) && (!needle || row._text.indexOf(needle) >= 0) &&
               (!c || (row.categories || []).indexOf(c) >= 0) && (!d || row._differ);
      });
      page = 0;
      render();
    }

    // Filters may come in the address (`samples/x.html?readings=differ&run=r`), as the benchmark page links them.
    var params = new URLSearchParams(window.location.search);
    [["run", run], ["outcome", which], ["category", cat], ["readings", readings]].forEach(function (p) {
      var v = params.get(p[0]);
      if (v !== null && p[1] && Array.prototype.some.call(p[1].options, function (o) { return o.value === v; })) {
        p[1].value = v;
      }
    });
    q.addEventListener("input", apply);
    [run, which, cat, readings].forEach(function (e) { if (e) e.addEventListener("change", apply); });
    document.getElementById("filters").addEventListener("submit", function (e) { e.preventDefault(); });
    prev.addEventListener("click", function () { page -= 1; render(); });
    next.addEventListener("click", function () { page += 1; render(); });
    apply();
  }


  // ---- the index board: a view per benchmark group (its columns, its average and average rank), search, filters
  // by family and size, and the model-fact columns a reader shows or hides --------------------------------------
  function initBoard(table) {
    var views = readJSON("board-views") || [];
    var q = document.getElementById("board-q"), fam = document.getElementById("board-family");
    var size = document.getElementById("board-size"), view = document.getElementById("board-view");
    var count = document.getElementById("board-count"), picker = document.getElementById("board-columns");
    var body = table.tBodies[0];

    function cellsOf(attr, key) {
      return table.querySelectorAll("[" + attr + '="' + key.replace(/["\\]/g, "\\$&") + '"]');
    }

    function showView() {
      var v = views[parseInt(view.value, 10)] || views[0];
      if (!v) return;
      var keep = {};
      v.members.forEach(function (b) { keep[b] = true; });
      if (v.avg) keep[v.avg] = true;
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
        var col = th.getAttribute("data-col");
        if (col === null) return;
        var hide = !keep[col];
        Array.prototype.forEach.call(cellsOf("data-col", col), function (c) { c.classList.toggle("hidden", hide); });
      });
      // rank by the view's average: 1 = best, ties share a rank, rows without an average get none
      var scores = [];
      Array.prototype.forEach.call(body.rows, function (tr) {
        var cell = v.avg ? tr.querySelector('[data-col="' + v.avg + '"]') : null;
        var s = cell ? cell.getAttribute("data-v") : "";
        tr._avg = s === "" ? null : parseFloat(s);
        if (tr._avg !== null && scores.indexOf(tr._avg) < 0) scores.push(tr._avg);
      });
      scores.sort(function (a, b) { return b - a; });
      Array.prototype.forEach.call(body.rows, function (tr) {
        var r = tr._avg === null ? "" : String(scores.indexOf(tr._avg) + 1);
        tr.cells[0].setAttribute("data-v", r);
        tr.cells[0].textContent = r === "" ? "–" : r;
        // the average rank over the view's benchmarks, as the site computed it ([value, text])
        var ar = (v.avg_rank || {})[tr.getAttribute("data-run")] || [null, "–"];
        var cell = tr.querySelector("td.avgrank");
        cell.setAttribute("data-v", ar[0] === null ? "" : String(ar[0]));
        cell.textContent = ar[1];
      });
    }

    function filterRows() {
      var needle = q.value.trim().toLowerCase(), f = fam.value, z = size.value, n = 0;
      Array.prototype.forEach.call(body.rows, function (tr) {
        var show = (!f || tr.getAttribute("data-family") === f) && (!z || tr.getAttribute("data-size") === z) &&
                   (!needle || tr.getAttribute("data-search").indexOf(needle) >= 0);
        tr.classList.toggle("hidden", !show);
        if (show) n += 1;
      });
      count.textContent = n + " of " + body.rows.length + " runs";
    }

    function showColumn(box) {
      Array.prototype.forEach.call(cellsOf("data-meta", box.value), function (c) {
        c.classList.toggle("hidden", !box.checked);
      });
    }

    q.addEventListener("input", filterRows);
    fam.addEventListener("change", filterRows);
    size.addEventListener("change", filterRows);
    view.addEventListener("change", showView);
    if (picker) {
      // a phone starts with the fact columns hidden (the scores need the width); the reader can tick them
      var narrow = window.matchMedia && window.matchMedia("(max-width: 640px)").matches;
      Array.prototype.forEach.call(picker.querySelectorAll("input[type=checkbox]"), function (box) {
        if (narrow && box.checked === box.defaultChecked) box.checked = false;
        box.addEventListener("change", function () { showColumn(box); });
        showColumn(box);  // a reloaded page keeps the boxes the reader ticked
      });
    }
    document.getElementById("board-filters").addEventListener("submit", function (e) { e.preventDefault(); });
    showView();
    filterRows();
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), initSortable);
    var boardTable = document.getElementById("leaderboard");
    if (boardTable && document.getElementById("board-views")) initBoard(boardTable);
    var samples = document.getElementById("samples");
    if (samples) initSamples(samples);
    Array.prototype.forEach.call(document.querySelectorAll("table.flipped"), function (table) {
      var heads = headings(table);
      Array.prototype.forEach.call(table.tBodies[0].rows, function (tr) { labelCells(tr, heads); });
    });
  });
})();
