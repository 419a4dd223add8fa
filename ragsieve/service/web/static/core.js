/* ragsieve assistant core: streaming client, safe markdown, citations, trace panel, feedback.
   Shared by the chat page (page.js) and the widget (widget.js); bundled with DOMPurify and marked
   by ragsieve.service.web.assets (no globals leak from the bundle). Model output and document
   text are untrusted: markdown goes through DOMPurify with images, forms, styles and frames removed,
   and a link survives only when it points at one of the answer's own citations. */
var Core = (function () {
  "use strict";
  var md = markedLib.marked ? markedLib : markedLib.default || markedLib;
  var FORBID = ["img", "image", "style", "form", "input", "button", "textarea", "select", "option", "iframe", "frame",
    "object", "embed", "svg", "math", "video", "audio", "source", "picture", "link", "meta", "base", "dialog"];
  var INFERRED_NOTE = "Not cited by the model: ragsieve chose this passage because it shares most of the answer's words.";
  var allowedLinks = {};  // the hrefs a sanitised answer may keep: its citations, set before each sanitize
  DOMPurify.addHook("afterSanitizeAttributes", function (node) {
    if (node.tagName === "A") {
      var href = node.getAttribute("href");
      var abs = href === null ? null : absolute(href, location.href);
      if (abs === null || !allowedLinks[abs]) {
        node.removeAttribute("href");
      } else {
        node.setAttribute("href", abs);
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer nofollow");
      }
    }
  });

  function absolute(href, base) {
    try {
      var u = new URL(href, base);
      return (u.protocol === "http:" || u.protocol === "https:") ? u.href : null;
    } catch (e) { return null; }
  }

  function el(doc, tag, cls, text) {
    var n = doc.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = text;
    return n;
  }

  // A dunder name outside code (`__init__`, `obj.__dict__`) would render as bold "init": it is shown as code.
  var CODE_PARTS = /(```[\s\S]*?(?:```|$)|~~~[\s\S]*?(?:~~~|$)|`[^`\n]*`)/;
  var DUNDER = /(^|[^\w`\\.])((?:[A-Za-z_]\w*\.)*__[A-Za-z0-9]\w*?__(?:\.\w+)*)(?![\w`])/g;
  function dundersAsCode(text) {
    return text.split(CODE_PARTS).map(function (part, i) {
      return i % 2 ? part : part.replace(DUNDER, function (m, before, name) { return before + "`" + name + "`"; });
    }).join("");
  }

  function renderMarkdown(target, text, links) {
    allowedLinks = links || {};
    var html = md.parse(dundersAsCode(String(text || "")), { gfm: true, breaks: false, async: false });
    target.innerHTML = DOMPurify.sanitize(html, { FORBID_TAGS: FORBID, FORBID_ATTR: ["style", "srcset", "action",
      "formaction", "xlink:href"], ALLOW_DATA_ATTR: false });
    allowedLinks = {};
  }

  // [n] in the answer's text (outside code and links) becomes a link to citation n.
  function linkCitations(doc, target, byNumber) {
    var walker = doc.createTreeWalker(target, NodeFilter.SHOW_TEXT, null);
    var nodes = [];
    while (walker.nextNode()) {
      var p = walker.currentNode.parentNode, skip = false;
      for (; p && p !== target; p = p.parentNode) {
        if (p.nodeName === "CODE" || p.nodeName === "PRE" || p.nodeName === "A") { skip = true; break; }
      }
      if (!skip && /\[\d+\]/.test(walker.currentNode.nodeValue)) nodes.push(walker.currentNode);
    }
    nodes.forEach(function (node) {
      var frag = doc.createDocumentFragment(), text = node.nodeValue, last = 0, m, re = /\[(\d+)\]/g;
      while ((m = re.exec(text)) !== null) {
        var c = byNumber[m[1]];
        if (!c) continue;
        frag.appendChild(doc.createTextNode(text.slice(last, m.index)));
        var a = el(doc, "a", "rs-cite", "[" + m[1] + "]");
        a.href = c.abs;
        a.target = "_blank";
        a.rel = "noopener noreferrer";
        a.title = c.label;
        a.setAttribute("aria-label", "source " + m[1] + ": " + c.label);
        frag.appendChild(a);
        last = m.index + m[0].length;
      }
      frag.appendChild(doc.createTextNode(text.slice(last)));
      node.parentNode.replaceChild(frag, node);
    });
  }

  // POST a JSON body and call onEvent(name, data) for each server-sent event of the reply.
  function streamPost(url, body, headers, onEvent, signal) {
    return fetch(url, { method: "POST", headers: Object.assign({ "Content-Type": "application/json" }, headers),
      body: JSON.stringify(body), signal: signal, credentials: "omit" }).then(function (resp) {
      if (!resp.ok) {
        return resp.json().catch(function () { return {}; }).then(function (j) {
          throw new Error((j.error && j.error.message) || ("the server answered " + resp.status));
        });
      }
      var reader = resp.body.getReader(), decoder = new TextDecoder(), buffer = "";
      function pump() {
        return reader.read().then(function (r) {
          buffer += decoder.decode(r.value || new Uint8Array(), { stream: !r.done });
          var parts = buffer.split("\n\n");
          buffer = parts.pop();
          parts.forEach(function (block) {
            var name = "message", data = "";
            block.split("\n").forEach(function (line) {
              if (line.indexOf("event: ") === 0) name = line.slice(7);
              else if (line.indexOf("data: ") === 0) data += line.slice(6);
            });
            if (data) onEvent(name, JSON.parse(data));
          });
          if (!r.done) return pump();
        });
      }
      return pump();
    });
  }

  // The conversation UI inside `root` (a page element or a widget's shadow root container).
  // opts: base (server origin, "" = this page), auth() -> headers, target() -> {index, plan}
  function mount(root, opts) {
    var doc = root.ownerDocument || document;
    var history = [];
    var log = el(doc, "div", "rs-log");
    log.setAttribute("role", "log");
    log.setAttribute("aria-live", "polite");
    log.setAttribute("aria-label", "Conversation");
    var form = el(doc, "form", "rs-ask");
    var label = el(doc, "label", "rs-sr", "Your question");
    var input = el(doc, "textarea", "rs-input");
    var qid = "rs-q-" + Math.random().toString(36).slice(2);
    input.id = qid;
    label.htmlFor = qid;
    input.rows = 2;
    input.placeholder = opts.placeholder || "Ask a question…";
    var send = el(doc, "button", "rs-send", "Ask");
    send.type = "submit";
    form.appendChild(label); form.appendChild(input); form.appendChild(send);
    root.appendChild(log); root.appendChild(form);
    var busy = false, stopper = null, queued = [];  // questions asked while an answer streams, asked in turn

    input.addEventListener("keydown", function (e) {
      if (e.key !== "Enter" || e.shiftKey || e.isComposing) return;
      e.preventDefault();
      if (busy) { enqueue(); return; }  // Enter never stops the answer that is streaming: it queues the question
      if (form.requestSubmit) form.requestSubmit(); else submit(e);
    });
    form.addEventListener("submit", submit);

    function submit(e) {
      if (e) e.preventDefault();
      if (busy) {  // the button reads "Stop" while an answer streams: only a click on it cancels the question
        if (stopper) stopper.abort();
        return;
      }
      var q = input.value.trim();
      if (!q) return;
      input.value = "";
      ask(q);
    }

    function enqueue() {
      var q = input.value.trim();
      if (!q) return;
      input.value = "";
      var bubble = el(doc, "div", "rs-user rs-queued", q);
      var note = el(doc, "span", "rs-queued-note", " (asked when the answer above is done)");
      bubble.appendChild(note);
      log.appendChild(bubble);
      queued.push({ question: q, bubble: bubble });
      bubble.scrollIntoView({ block: "end" });
    }

    function next() {
      var item = queued.shift();
      if (!item) return;
      item.bubble.parentNode.removeChild(item.bubble);
      ask(item.question);
    }

    function ask(question) {
      busy = true;
      stopper = typeof AbortController === "function" ? new AbortController() : null;
      send.textContent = "Stop";
      var mine = el(doc, "div", "rs-user", question);
      log.appendChild(mine);
      var card = el(doc, "article", "rs-answer");
      card.setAttribute("aria-busy", "true");
      var searched = el(doc, "p", "rs-searched");
      searched.hidden = true;
      var body = el(doc, "div", "rs-md");
      var status = el(doc, "p", "rs-status", "Searching…");
      status.setAttribute("role", "status");
      var sources = el(doc, "ol", "rs-sources");
      sources.setAttribute("aria-label", "Sources");
      var trace = el(doc, "details", "rs-trace");
      trace.appendChild(el(doc, "summary", null, "How this answer was made"));
      var steps = el(doc, "ol", "rs-steps");
      trace.appendChild(steps);
      [searched, status, body, sources, trace].forEach(function (n) { card.appendChild(n); });
      log.appendChild(card);
      card.scrollIntoView({ block: "end" });
      var text = "", pending = null, finished = false;
      function draw() { pending = null; if (!finished) renderMarkdown(body, text, {}); }
      var target = opts.target();
      var req = { question: question, history: history.slice(-16) };
      if (target.index) req.index = target.index;
      if (target.plan) req.plan = target.plan;
      if (typeof opts.strict === "boolean") req.strict = opts.strict;  // else the server's (on for the widget)
      streamPost(opts.base + "/ui/api/ask", req, opts.auth(), function (name, data) {
        if (finished) return;
        if (name === "step") {
          Trace.step(doc, steps, data);
          status.textContent = Trace.name(data.step) + "…";
        } else if (name === "answer" && data.attempt > 1) {
          text = "";
          status.textContent = "Revising the answer after checking more passages…";
        } else if (name === "token") {
          text += data.text;
          status.textContent = "Answering…";
          if (!pending) pending = setTimeout(draw, 30);
        } else if (name === "done") {
          finished = true;
          clearTimeout(pending);
          finish(card, data, body, sources, steps, searched, status, question);
        } else if (name === "error") {
          finished = true;
          fail(card, status, data.error ? data.error.message : "the question failed");
        }
      }, stopper && stopper.signal).catch(function (err) {
        finished = true;
        clearTimeout(pending);
        if (err && err.name === "AbortError") {
          status.textContent = "Stopped.";
          card.classList.add("rs-stopped");
          return;
        }
        fail(card, status, err && err.name === "TypeError" ? "The assistant cannot be reached from this page."
          : String(err.message || err));
      }).then(function () {
        busy = false;
        stopper = null;
        send.textContent = "Ask";
        card.setAttribute("aria-busy", "false");
        next();
      });
    }

    function fail(card, status, message) {
      card.classList.add("rs-failed");
      status.textContent = message;
      status.setAttribute("role", "alert");
    }

    function finish(card, data, body, sources, steps, searched, status, question) {
      status.textContent = "";
      status.hidden = true;
      var byNumber = {}, links = {};
      (data.citations || []).forEach(function (c) {
        var abs = absolute(c.href, opts.base || location.href);
        if (!abs) return;
        c.abs = abs;
        byNumber[c.number] = c;
        links[abs] = true;
      });
      renderMarkdown(body, data.answer, links);
      linkCitations(doc, body, byNumber);
      sources.textContent = "";
      Object.keys(byNumber).forEach(function (n) {
        var c = byNumber[n], li = el(doc, "li");
        var a = el(doc, "a", "rs-source", "[" + c.number + "] " + shortLabel(c));
        a.href = c.abs;
        a.title = c.label;  // the full location, on hover and for assistive technology
        a.target = "_blank";
        a.rel = "noopener noreferrer";
        a.setAttribute("data-kind", c.kind);
        li.appendChild(a);
        if (c.cited === false) {  // a top retrieved passage the answer did not cite
          li.classList.add("rs-uncited");
          li.appendChild(el(doc, "span", "rs-source-note", " (retrieved, not cited)"));
        } else if (c.origin === "inferred") {  // the model cited nothing: ragsieve suggests this passage
          li.classList.add("rs-inferred");
          var note = el(doc, "span", "rs-source-note", " (suggested source)");
          note.title = INFERRED_NOTE;
          li.appendChild(note);
        }
        sources.appendChild(li);
      });
      if (data.asked && data.question && data.asked !== data.question) {
        searched.textContent = "Searched for: " + data.question;
        searched.hidden = false;
      }
      steps.textContent = "";
      (data.trace || []).forEach(function (ev) { Trace.step(doc, steps, ev); });
      if (data.grounding === "inferred") {  // who made the citations: ragsieve, not the model
        var hint = el(doc, "p", "rs-note rs-inferred-note", "The model cited no passage: the sources below are suggested by ragsieve.");
        hint.setAttribute("role", "note");
        hint.title = INFERRED_NOTE;
        card.insertBefore(hint, sources);
      }
      if (data.grounding === "none") {  // the answer cites none of the passages: said plainly, above the sources
        var warn = el(doc, "p", "rs-note rs-ungrounded", "Not grounded in the documents: this answer cites none of the passages, so it may come from the model's own knowledge.");
        warn.setAttribute("role", "note");
        card.insertBefore(warn, sources);
      }
      if (data.abstention || data.stopped) {
        card.appendChild(el(doc, "p", "rs-note", data.stopped ? "Stopped early: " + data.stopped : "No answer in the sources (" + data.abstention + ")."));
      }
      if (data.answer_id) card.appendChild(feedback(data.answer_id));
      history.push({ role: "user", content: question }, { role: "assistant", content: data.answer });
      card.scrollIntoView({ block: "end" });
    }

    function feedback(answerId) {
      var box = el(doc, "div", "rs-feedback");
      box.setAttribute("role", "group");
      box.setAttribute("aria-label", "Was this answer helpful?");
      var up = el(doc, "button", "rs-up", "Helpful"), down = el(doc, "button", "rs-down", "Not helpful");
      up.type = down.type = "button";
      up.setAttribute("aria-pressed", "false");
      down.setAttribute("aria-pressed", "false");
      var comment = el(doc, "textarea", "rs-comment");
      comment.hidden = true;
      comment.rows = 2;
      comment.maxLength = 2000;
      comment.placeholder = "What was right or wrong? (optional)";
      comment.setAttribute("aria-label", "Comment on this answer");
      var save = el(doc, "button", "rs-save", "Send comment");
      save.type = "button";
      save.hidden = true;
      var said = el(doc, "span", "rs-thanks");
      said.setAttribute("role", "status");
      var rating = null;
      function post() {
        return fetch(opts.base + "/ui/api/feedback", { method: "POST", credentials: "omit",
          headers: Object.assign({ "Content-Type": "application/json" }, opts.auth()),
          body: JSON.stringify({ answer_id: answerId, rating: rating, comment: comment.value.trim() }) })
          .then(function (r) {
            if (!r.ok) return r.json().catch(function () { return {}; }).then(function (j) { throw new Error((j.error && j.error.message) || r.status); });
            said.textContent = "Thanks, your feedback is saved.";
          }).catch(function (e) { said.textContent = "Feedback not saved: " + (e.message || e); });
      }
      function choose(value) {
        rating = value;
        up.setAttribute("aria-pressed", String(value === "up"));
        down.setAttribute("aria-pressed", String(value === "down"));
        comment.hidden = save.hidden = false;
        post();
      }
      up.addEventListener("click", function () { choose("up"); });
      down.addEventListener("click", function () { choose("down"); });
      save.addEventListener("click", post);
      [up, down, comment, save, said].forEach(function (n) { box.appendChild(n); });
      return box;
    }

    return { input: input, ask: ask, reset: function () { history = []; queued = []; log.textContent = ""; } };
  }

  // A source's label as a reader scans it: a web page by its title (else host and the path's last part), with
  // the section it cites; a file by its path and lines (already short). The full URL stays in href and title.
  function shortLabel(c) {
    var label = String(c.label || "");
    if (!/^https?:\/\//i.test(label)) return c.heading && label.indexOf("#") > 0 ? label.split("#")[0] + " § " + c.heading : label;
    try {
      // a section is named by its heading when the index knows it, else by its anchor id
      var u = new URL(label), section = u.hash ? " § " + (c.heading || decodeURIComponent(u.hash.slice(1))) : "";
      if (c.title) return c.title + section;
      var parts = u.pathname.split("/").filter(function (p) { return p; });
      var tail = parts.length ? parts[parts.length - 1] : "";
      return u.host + (parts.length > 1 ? "/…/" : "/") + tail + section;
    } catch (e) { return label; }
  }

  return { mount: mount, el: el, absolute: absolute, shortLabel: shortLabel };
})();
