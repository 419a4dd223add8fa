/* The "How this answer was made" panel: one entry per plan step from its trace event (step, outcome,
   duration, summary), with a one-line account and every summary field under "details". Text only. */
var Trace = (function () {
  "use strict";
  var STEPS = {
    rewrite: "Follow-up rewritten as a standalone question", retrieve: "Retrieval (BM25 + dense, fused)",
    judge: "LLM judge: which chunks are relevant", expand: "Re-query with the relevant chunks until the set stops growing",
    conformal: "Conformal similarity cutoff", outliers: "GMM outlier removal", segments: "Relevant segment extraction",
    validate: "Validation: does the answer resolve the question?", fallback: "Fallback to the sparse-information chunks",
    draft: "Draft answer", answer: "Answer"
  };

  var el = Core.el;  // core.js comes first in the bundle

  function short(value) {
    if (Array.isArray(value)) {
      var head = value.slice(0, 6).map(function (v) {
        if (v !== null && typeof v === "object" && v.id !== undefined) {
          return v.id + (typeof v.score === "number" ? " (" + v.score.toFixed(3) + ")" : "");
        }
        return typeof v === "string" ? v : JSON.stringify(v);
      });
      return value.length + (value.length ? " (" + head.join(", ") + (value.length > 6 ? ", …" : "") + ")" : "");
    }
    if (value !== null && typeof value === "object") return JSON.stringify(value).slice(0, 240);
    return String(value).slice(0, 300);
  }

  // One line per step: what it found, kept, dropped or decided (the details list has everything).
  function headline(s) {
    var parts = [], n = function (v) { return Array.isArray(v) ? v.length : 0; };
    if (s.status) parts.push(String(s.status));
    if (typeof s.retrieved === "number") parts.push("found " + s.retrieved + " chunks");
    if (Array.isArray(s.new_relevant)) parts.push(n(s.new_relevant) + " new relevant of " + s.judged + " judged");
    if (typeof s.relevant_total === "number") parts.push(s.relevant_total + " relevant in all");
    if (Array.isArray(s.kept)) parts.push("kept " + n(s.kept) + (Array.isArray(s.removed) ? ", dropped " + n(s.removed) : ""));
    if (typeof s.qhat === "number") parts.push("threshold " + s.qhat.toFixed(3) + (s.coverage ? " for coverage " + s.coverage : ""));
    if (Array.isArray(s.added)) parts.push("added " + n(s.added) + " sparse-information chunks");
    if (Array.isArray(s.cited)) parts.push("cited " + n(s.cited) + " of " + n(s.context) + " passages");
    if (typeof s.resolved === "boolean") parts.push(s.resolved ? "resolved" : "not resolved");
    if (typeof s.reason === "string" && s.reason) parts.push(s.reason.slice(0, 200));
    if (typeof s.stop === "string") parts.push(s.stop.slice(0, 200));
    return parts.join(" · ");
  }

  function renderStep(doc, list, ev) {
    var li = el(doc, "li", "rs-step");
    li.setAttribute("data-step", ev.step);
    var head = el(doc, "div", "rs-step-head");
    head.appendChild(el(doc, "strong", null, STEPS[ev.step] || ev.step));
    head.appendChild(el(doc, "span", "rs-step-meta", " · " + ev.outcome +
      (ev.duration_s !== undefined ? " · " + Number(ev.duration_s).toFixed(2) + " s" : "")));
    li.appendChild(head);
    var summary = ev.summary || {}, keys = Object.keys(summary), line = headline(summary);
    if (line) li.appendChild(el(doc, "div", "rs-step-line", line));
    if (keys.length) {
      var more = el(doc, "details", "rs-step-more");
      more.appendChild(el(doc, "summary", null, "details"));
      var dl = el(doc, "ul", "rs-step-detail");
      keys.slice(0, 24).forEach(function (k) { dl.appendChild(el(doc, "li", null, k.replace(/_/g, " ") + ": " + short(summary[k]))); });
      more.appendChild(dl);
      li.appendChild(more);
    }
    list.appendChild(li);
  }


  return { step: renderStep, name: function (step) { return STEPS[step] || step; } };
})();
