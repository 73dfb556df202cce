// goldenset web UI: keyboard shortcuts and confirmations. Pages work without it.
//
// An element with data-key="a" is clicked (or focused, for fields) when that key is pressed
// outside a text field; its data-key-help, else its label or text, says what it does. Escape in a
// text field leaves the field, so the next key is a shortcut again. "?" opens (and closes) a list
// of the page's shortcuts. data-confirm="question" asks before a form is submitted.
(function () {
  "use strict";
  var HELP_KEY = "?";

  function isField(element) {
    var tag = element.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT";
  }

  function typing(target) {
    return Boolean(target) && (target.isContentEditable || isField(target));
  }

  function shortcuts() {
    var found = [];
    document.querySelectorAll("[data-key]").forEach(function (element) {
      if (!element.disabled) { found.push(element); }
    });
    return found;
  }

  function describe(element) {
    var help = element.getAttribute("data-key-help");
    if (help) { return help; }
    if (element.labels && element.labels.length) { return element.labels[0].textContent.trim(); }
    return (element.getAttribute("aria-label") || element.textContent || "").trim();
  }

  function helpDialog() {
    var dialog = document.getElementById("keys-help");
    if (dialog) { return dialog; }
    dialog = document.createElement("dialog");
    dialog.id = "keys-help";
    dialog.className = "keys-help";
    dialog.setAttribute("aria-labelledby", "keys-help-title");
    var title = document.createElement("h2");
    title.id = "keys-help-title";
    title.textContent = "Keyboard shortcuts";
    var list = document.createElement("dl");
    var rows = shortcuts().map(function (element) { return [element.getAttribute("data-key"), describe(element)]; });
    rows.push(["Esc", "Leave a text field (then the keys above work again); close this list"]);
    rows.push([HELP_KEY, "Show or hide this list"]);
    rows.forEach(function (row) {
      var key = document.createElement("dt");
      var kbd = document.createElement("kbd");
      kbd.textContent = row[0];
      key.appendChild(kbd);
      var what = document.createElement("dd");
      what.textContent = row[1];
      list.appendChild(key);
      list.appendChild(what);
    });
    var note = document.createElement("p");
    note.className = "muted";
    note.textContent = rows.length > 2 ? "Keys work when no text field has the focus." : "This page has no shortcuts of its own.";
    var close = document.createElement("button");
    close.type = "button";
    close.textContent = "Close";
    close.addEventListener("click", function () { dialog.close(); });
    dialog.appendChild(title);
    dialog.appendChild(list);
    dialog.appendChild(note);
    dialog.appendChild(close);
    document.body.appendChild(dialog);
    return dialog;
  }

  function toggleHelp() {
    var dialog = helpDialog();
    if (dialog.open) { dialog.close(); } else { dialog.showModal(); }
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    var open = document.querySelector("dialog[open]");
    if (open) {
      // Escape closes the dialog natively; "?" closes the shortcut list too; nothing else fires.
      if (event.key === HELP_KEY && open.id === "keys-help") { event.preventDefault(); open.close(); }
      return;
    }
    if (typing(event.target)) {
      // Escape leaves the field as it is (a search field would otherwise clear itself).
      if (event.key === "Escape") { event.preventDefault(); event.target.blur(); }
      return;
    }
    var key = event.key;
    if (key === HELP_KEY) {
      event.preventDefault();
      toggleHelp();
      return;
    }
    var target = null;
    shortcuts().forEach(function (element) {
      if (!target && element.getAttribute("data-key") === key) { target = element; }
    });
    if (!target) { return; }
    event.preventDefault();
    if (isField(target)) {
      target.focus();
    } else {
      target.click();
    }
  });

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var submitter = event.submitter;
    var question = (submitter && submitter.getAttribute("data-confirm")) || form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) { event.preventDefault(); }
  });
})();
