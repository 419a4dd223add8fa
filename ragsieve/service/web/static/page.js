/* The chat page at `/`: pick an index and plan, then the shared conversation UI (core.js). */
(function () {
  "use strict";
  var doc = document, keyName = "ragsieve-api-key";
  var indexSel = doc.getElementById("rs-index"), planSel = doc.getElementById("rs-plan");
  var keyBox = doc.getElementById("rs-keybox"), keyInput = doc.getElementById("rs-key"), notice = doc.getElementById("rs-notice");
  var keyChange = doc.getElementById("rs-keychange");

  function auth() {
    var key = sessionStorage.getItem(keyName);
    return key ? { Authorization: "Bearer " + key } : {};
  }

  function option(value, text) {
    var o = doc.createElement("option");
    o.value = value;
    o.textContent = text;
    return o;
  }

  function askForKey(message) {
    keyBox.hidden = false;
    keyChange.hidden = true;
    notice.textContent = message;
    keyInput.focus();
  }

  function load() {
    if (doc.body.getAttribute("data-needs-key") === "true" && !sessionStorage.getItem(keyName)) {
      askForKey("This server needs an API key.");  // no request that can only fail before a key is entered
      return Promise.resolve();
    }
    return fetch("/ui/api/config", { headers: auth(), credentials: "omit" }).then(function (r) {
      if (r.status === 401) {
        askForKey(sessionStorage.getItem(keyName) ? "This API key is not accepted: enter another."
          : "This server needs an API key.");
        return;
      }
      return r.json().then(function (cfg) {
        keyBox.hidden = true;  // a working key (or none needed): the field goes, "Change API key" stays
        keyChange.hidden = !sessionStorage.getItem(keyName);
        notice.textContent = cfg.indexes.length ? "" : "No index is served to this key.";
        indexSel.textContent = "";
        cfg.indexes.forEach(function (ix) { indexSel.appendChild(option(ix.name, ix.name)); });
        function plans() {
          var ix = cfg.indexes.filter(function (i) { return i.name === indexSel.value; })[0];
          planSel.textContent = "";
          planSel.appendChild(option("", "default plan" + (ix ? " (" + ix.default_plan + ")" : "")));
          cfg.plans.forEach(function (p) { planSel.appendChild(option(p, p)); });
        }
        indexSel.onchange = function () { plans(); chat.reset(); };
        plans();
        doc.body.setAttribute("data-ready", "true");
      });
    }).catch(function (e) { notice.textContent = "The server cannot be reached: " + e.message; });
  }

  keyChange.addEventListener("click", function () {
    keyBox.hidden = false;
    keyChange.hidden = true;
    keyInput.focus();
  });

  doc.getElementById("rs-keyform").addEventListener("submit", function (e) {
    e.preventDefault();
    if (keyInput.value.trim()) sessionStorage.setItem(keyName, keyInput.value.trim());
    keyInput.value = "";
    load();
  });

  var chat = Core.mount(doc.getElementById("rs-chat"), {
    base: "", auth: auth, placeholder: "Ask a question about the documents…",
    target: function () { return { index: indexSel.value || null, plan: planSel.value || null }; }
  });
  doc.getElementById("rs-new").addEventListener("click", function () { chat.reset(); chat.input.focus(); });
  load();
})();
