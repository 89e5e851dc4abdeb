// "Copy" buttons: <button data-copy-target="ID"> copies the text of #ID.
// Uses the Clipboard API; where that is missing or refused, selects the text instead
// so the person can press Ctrl+C / Cmd+C. Delegated, so buttons swapped in by htmx work.
(function () {
  "use strict";

  function selectText(element) {
    var range = document.createRange();
    range.selectNodeContents(element);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  function say(button, text) {
    var status = button.parentNode.querySelector(".copy-status");
    if (status) status.textContent = text;
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy-target]");
    if (!button) return;
    var target = document.getElementById(button.getAttribute("data-copy-target"));
    if (!target) return;
    var text = target.textContent.trim();
    var fallback = function () {
      selectText(target);
      say(button, "Selected: press Ctrl+C (or \u2318C) to copy.");
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () {
        say(button, "Copied.");
      }, fallback);
    } else {
      fallback();
    }
  });
})();
