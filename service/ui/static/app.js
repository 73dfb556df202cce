// goldenset web UI: keyboard shortcuts and confirmations. Pages work without it.
//
// An element with data-key="a" is clicked (or focused, for fields) when that key is pressed
// outside a text field; data-confirm="question" asks before a form is submitted.
(function () {
  "use strict";
  function typing(target) {
    if (!target) { return false; }
    var tag = target.tagName;
    return target.isContentEditable || tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT";
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    var key = event.key;
    var target = null;
    document.querySelectorAll("[data-key]").forEach(function (element) {
      if (!target && element.getAttribute("data-key") === key && !element.disabled) { target = element; }
    });
    if (!target) { return; }
    event.preventDefault();
    if (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.tagName === "SELECT") {
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
