/* The embeddable widget: <script src="https://HOST/widget.js" data-index="docs" data-key="pk-..."></script>
   adds a floating button and a chat panel in a shadow root (the host page's styles and ours do not mix). */
(function () {
  "use strict";
  var script = document.currentScript || document.querySelector("script[src*='widget.js'][data-key]");
  if (!script) return;
  var base = new URL(script.src, location.href).origin;
  var index = script.getAttribute("data-index") || null, key = script.getAttribute("data-key") || "";
  var plan = script.getAttribute("data-plan") || null;
  var strictAttr = script.getAttribute("data-strict");  // "false": show answers that cite nothing, marked as such
  var strict = strictAttr === null ? undefined : strictAttr !== "false";
  var title = script.getAttribute("data-title") || "Ask the docs";
  var CSS = ":host{all:initial}" +
    "*{box-sizing:border-box;font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif}" +
    ".launch{position:fixed;right:20px;bottom:20px;z-index:2147483000;border:0;border-radius:28px;padding:14px 20px;" +
    "background:#1f4fd1;color:#fff;font-size:15px;font-weight:600;box-shadow:0 4px 16px rgba(0,0,0,.25);cursor:pointer}" +
    ".launch:focus-visible,button:focus-visible,textarea:focus-visible,a:focus-visible{outline:3px solid #f5a524;outline-offset:2px}" +
    ".panel{position:fixed;right:20px;bottom:84px;z-index:2147483000;width:400px;max-width:calc(100vw - 24px);" +
    "height:600px;max-height:calc(100vh - 110px);display:flex;flex-direction:column;background:#fff;color:#1b1f24;" +
    "border-radius:12px;box-shadow:0 8px 32px rgba(0,0,0,.3);overflow:hidden;font-size:14px;line-height:1.45}" +
    ".panel[hidden]{display:none}" +
    ".head{display:flex;align-items:center;justify-content:space-between;padding:10px 14px;background:#1f4fd1;color:#fff}" +
    ".head h2{font-size:15px;margin:0}.close{background:none;border:0;color:#fff;font-size:22px;cursor:pointer;line-height:1}" +
    ".body{flex:1;display:flex;flex-direction:column;min-height:0}" +
    "@media (max-width:520px){.panel{right:0;bottom:0;width:100vw;max-width:100vw;height:100%;max-height:100%;border-radius:0}" +
    ".launch{right:12px;bottom:12px}}" + CHAT_CSS;
  function start() {
    var host = document.createElement("div");
    host.setAttribute("data-ragsieve-widget", "");
    document.body.appendChild(host);
    var shadow = host.attachShadow({ mode: "open" });
    try {
      var sheet = new CSSStyleSheet();
      sheet.replaceSync(CSS);
      shadow.adoptedStyleSheets = [sheet];
    } catch (e) {
      var style = document.createElement("style");
      style.textContent = CSS;
      shadow.appendChild(style);
    }
    var launch = Core.el(document, "button", "launch", title);
    launch.type = "button";
    launch.setAttribute("aria-expanded", "false");
    launch.setAttribute("aria-controls", "rs-panel");
    var panel = Core.el(document, "div", "panel");
    panel.id = "rs-panel";
    panel.hidden = true;
    panel.setAttribute("role", "dialog");
    panel.setAttribute("aria-label", title);
    var head = Core.el(document, "div", "head");
    head.appendChild(Core.el(document, "h2", null, title));
    var close = Core.el(document, "button", "close", "×");
    close.type = "button";
    close.setAttribute("aria-label", "Close");
    head.appendChild(close);
    var body = Core.el(document, "div", "body");
    panel.appendChild(head);
    panel.appendChild(body);
    shadow.appendChild(launch);
    shadow.appendChild(panel);
    var chat = Core.mount(body, {
      base: base, placeholder: "Ask a question…", strict: strict,
      auth: function () {
        var headers = key ? { Authorization: "Bearer " + key } : {};
        // the host page's signed user token (a JWT its sign-in issued), read at each question so the page
        // can renew it: answers then come only from the documents that user may read (docs/access.md)
        var user = script.getAttribute("data-user-token");
        if (user) headers["X-Ragsieve-User-Token"] = user;
        return headers;
      },
      target: function () { return { index: index, plan: plan }; }
    });
    function toggle(open) {
      panel.hidden = !open;
      launch.setAttribute("aria-expanded", String(open));
      if (open) chat.input.focus(); else launch.focus();
    }
    launch.addEventListener("click", function () { toggle(panel.hidden); });
    close.addEventListener("click", function () { toggle(false); });
    panel.addEventListener("keydown", function (e) { if (e.key === "Escape") { e.stopPropagation(); toggle(false); } });
  }
  if (document.body) start(); else document.addEventListener("DOMContentLoaded", start);
})();
