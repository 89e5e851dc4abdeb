// Bulk selection in the Context page's entry list (templates/pages/context.html).
//
// "Select all on this page" ticks or clears every entry's box, and shows as mixed when only
// some are ticked; ticking every box ticks it. Without this script the checkbox still works:
// the server acts on every entry of the page (its `bulk-page_ids`) when it is ticked.
// Delegated, so lists swapped in by htmx work.
(function () {
  "use strict";

  function boxes(form) {
    return Array.prototype.slice.call(
      document.querySelectorAll('input.select-entry[form="' + form.id + '"]')
    );
  }

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.matches("input[data-select-all]") && target.form) {
      boxes(target.form).forEach(function (box) {
        box.checked = target.checked;
      });
      target.indeterminate = false;
      return;
    }
    if (!target.matches("input.select-entry") || !target.form) return;
    var all = target.form.querySelector("input[data-select-all]");
    if (!all) return;
    var ticked = boxes(target.form).filter(function (box) {
      return box.checked;
    }).length;
    all.checked = ticked > 0 && ticked === boxes(target.form).length;
    all.indeterminate = ticked > 0 && !all.checked;
  });
})();
