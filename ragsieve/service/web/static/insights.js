/* The insights page (/insights): every text from the server is set with textContent, never parsed as HTML. */
(function () {
  "use strict";
  var doc = document, keyName = "ragsieve-api-key";
  var $ = function (id) { return doc.getElementById(id); };
  var indexSel = $("ri-index"), sinceSel = $("ri-since"), filter = $("ri-filter"), notice = $("ri-notice");
  var LABELS = { questions: "questions", answered: "answered", passages: "quoted passages",
    abstained_model: "abstained (model)", abstained_calibration: "abstained (calibration)",
    abstained_ungrounded: "abstained (cited nothing)",
    low_confidence: "low confidence", thumbs_down: "thumbs down", thumbs_up: "thumbs up" };
  var HINTS = { passages: "the model declined, but the calibrated score said the passages answer it: the reply " +
    "quoted the closest passages instead" };
  var UPLOAD = /^file-[0-9a-f]{24}\//;
  // an uploaded document is cited as file-<id>/<name>: shown by its file name (the full id in the tooltip)
  function shown(source) { return String(source).replace(UPLOAD, ""); }
  function sourceCell(tag, cls, source) {
    var n = el(tag, cls, shown(source));
    n.title = source;
    return n;
  }

  function auth() {
    var key = sessionStorage.getItem(keyName);
    return key ? { Authorization: "Bearer " + key } : {};
  }
  function el(tag, cls, text) {
    var n = doc.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }
  function query() {
    return "index=" + encodeURIComponent(indexSel.value) + "&since=" + encodeURIComponent(sinceSel.value);
  }
  function askKey(message) {
    $("ri-keybox").hidden = false;
    $("ri-main").hidden = true;
    notice.textContent = message;
    $("ri-key").focus();
  }
  function failed(r) {
    return r.json().then(function (b) { return (b.error && b.error.message) || ("HTTP " + r.status); },
      function () { return "HTTP " + r.status; });
  }
  function day(t) { return new Date(t * 1000).toISOString().slice(0, 10); }

  function load() {
    return fetch("/insights/api/indexes", { headers: auth(), credentials: "omit" }).then(function (r) {
      if (r.status === 401 || r.status === 403) {
        return failed(r).then(function (m) { askKey(m); });
      }
      if (!r.ok) return failed(r).then(function (m) { notice.textContent = m; });
      return r.json().then(function (cfg) {
        indexSel.textContent = "";
        cfg.indexes.forEach(function (n) { var o = el("option", null, n); o.value = n; indexSel.appendChild(o); });
        return report();
      });
    }).catch(function (e) { notice.textContent = "The server cannot be reached: " + e.message; });
  }

  function report() {
    notice.textContent = "Computing…";
    doc.body.removeAttribute("data-ready");
    return fetch("/insights/api/report?" + query(), { headers: auth(), credentials: "omit" }).then(function (r) {
      if (!r.ok) return failed(r).then(function (m) { if (r.status === 403 || r.status === 401) askKey(m); else notice.textContent = m; });
      return r.json().then(function (rep) {
        render(rep);
        notice.textContent = "";
        $("ri-main").hidden = false;
        applyFilter();
        doc.body.setAttribute("data-ready", "true");
      });
    });
  }

  function render(rep) {
    var totals = $("ri-totals");
    totals.textContent = "";
    Object.keys(LABELS).forEach(function (k) {
      if (k === "passages" && !rep.totals[k]) return;  // shown (and explained) only when it happened
      var box = el("div", "ri-stat");
      if (HINTS[k]) box.title = HINTS[k];
      box.appendChild(el("b", null, rep.totals[k] || 0));
      box.appendChild(el("span", null, LABELS[k]));
      totals.appendChild(box);
    });
    $("ri-clustered").textContent = "(" + rep.clustered + ")";
    var groups = $("ri-groups");
    groups.textContent = "";
    if (!rep.groups.length) groups.appendChild(el("p", "ri-empty", "No unanswered question in this period."));
    rep.groups.forEach(function (g) { groups.appendChild(group(g)); });
    var flagged = $("ri-flagged").tBodies[0];
    flagged.textContent = "";
    rep.flagged.forEach(function (f) {
      var tr = el("tr", "ri-row");
      tr.appendChild(el("td", null, day(f.at)));
      var q = el("td", null, f.question);
      if (f.count > 1) q.appendChild(el("span", "ri-times", " ×" + f.count));
      tr.appendChild(q);
      tr.appendChild(el("td", null, f.why + (f.rating === -1 && f.low_confidence ? ", low confidence" : "")));
      tr.appendChild(el("td", null, f.sources.map(shown).join(", ")));
      flagged.appendChild(tr);
    });
    if (!rep.flagged.length) flagged.appendChild(emptyRow(4, "None in this period."));
    var cited = $("ri-cited").tBodies[0];
    cited.textContent = "";
    rep.most_cited.forEach(function (d) {
      var tr = el("tr", "ri-row");
      tr.appendChild(sourceCell("td", null, d[0]));
      tr.appendChild(el("td", null, d[1]));
      cited.appendChild(tr);
    });
    if (!rep.most_cited.length) cited.appendChild(emptyRow(2, "No answer cited a document."));
    var unreached = $("ri-unreached");
    unreached.textContent = "";
    rep.unreached.forEach(function (d) { unreached.appendChild(sourceCell("li", "ri-row", d)); });
    if (rep.unreached_total > rep.unreached.length) {
      unreached.appendChild(el("li", "ri-empty", "… and " + (rep.unreached_total - rep.unreached.length) + " more (see the JSON export)"));
    }
  }

  function emptyRow(span, text) {
    var tr = el("tr"), td = el("td", "ri-empty", text);
    td.colSpan = span;
    tr.appendChild(td);
    return tr;
  }

  function group(g) {
    var box = el("article", "ri-group ri-row");
    box.setAttribute("data-group", g.id);
    var h = el("h3");
    h.appendChild(el("span", "ri-label", g.label));
    h.appendChild(el("span", "ri-count", g.count + (g.count === 1 ? " question" : " questions")));
    box.appendChild(h);
    var trend = el("div", "ri-trend"), peak = Math.max.apply(null, g.trend.map(function (w) { return w[1]; }).concat([1]));
    trend.setAttribute("aria-label", "questions per week");
    g.trend.forEach(function (w) {
      var bar = el("div", "ri-bar");
      bar.style.height = Math.max(1, Math.round(32 * w[1] / peak)) + "px";
      bar.title = "week of " + w[0] + ": " + w[1];
      trend.appendChild(bar);
    });
    box.appendChild(trend);
    var cols = el("div", "ri-cols"), left = el("div"), right = el("div");
    left.appendChild(el("h4", null, "Example questions"));
    var ex = el("ul");
    g.examples.forEach(function (q) { ex.appendChild(el("li", "ri-example", q)); });
    left.appendChild(ex);
    right.appendChild(el("h4", null, "Closest passages we have"));
    var cl = el("ul");
    g.closest.forEach(function (p) {
      var li = el("li", "ri-passage");
      var head = el("span", null, (p.title ? p.title + " — " : "") + shown(p.source) + (p.cosine === null ? "" : " (cosine " + p.cosine.toFixed(2) + ")"));
      head.title = p.source;
      li.appendChild(head);
      li.appendChild(el("small", null, p.snippet));
      cl.appendChild(li);
    });
    if (!g.closest.length) cl.appendChild(el("li", "ri-empty", "none"));
    right.appendChild(cl);
    cols.appendChild(left);
    cols.appendChild(right);
    box.appendChild(cols);
    var btn = el("button", "ri-export", "Export as evaluation set"), done = el("span", "ri-done");
    btn.type = "button";
    btn.addEventListener("click", function () {
      btn.disabled = true;
      fetch("/insights/api/export-eval", { method: "POST", credentials: "omit",
        headers: Object.assign({ "Content-Type": "application/json" }, auth()),
        body: JSON.stringify({ index: indexSel.value, since: sinceSel.value, group: g.id, label: g.label }) })
        .then(function (r) {
          if (!r.ok) return failed(r).then(function (m) { done.textContent = m; });
          return r.json().then(function (b) { done.textContent = "Written: " + b.folder + " — run: " + b.command; });
        }).finally(function () { btn.disabled = false; });
    });
    box.appendChild(btn);
    box.appendChild(done);
    return box;
  }

  function applyFilter() {
    var words = filter.value.trim().toLowerCase();
    Array.prototype.forEach.call(doc.querySelectorAll(".ri-row"), function (row) {
      row.hidden = !!words && row.textContent.toLowerCase().indexOf(words) < 0;
    });
  }

  function download(ext) {
    return function (e) {
      e.preventDefault();
      fetch("/insights/api/export." + ext + "?" + query(), { headers: auth(), credentials: "omit" }).then(function (r) {
        if (!r.ok) return failed(r).then(function (m) { notice.textContent = m; });
        return r.blob().then(function (blob) {
          var a = el("a"), url = URL.createObjectURL(blob);
          a.href = url;
          a.download = "insights-" + indexSel.value + "." + ext;
          doc.body.appendChild(a);
          a.click();
          a.remove();
          setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
        });
      });
    };
  }

  $("ri-keyform").addEventListener("submit", function (e) {
    e.preventDefault();
    var v = $("ri-key").value.trim();
    if (v) sessionStorage.setItem(keyName, v);
    $("ri-key").value = "";
    $("ri-keybox").hidden = true;
    load();
  });
  indexSel.addEventListener("change", report);
  sinceSel.addEventListener("change", report);
  filter.addEventListener("input", applyFilter);
  $("ri-csv").addEventListener("click", download("csv"));
  $("ri-json").addEventListener("click", download("json"));
  load();
})();
