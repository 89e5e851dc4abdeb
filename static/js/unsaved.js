// Unsaved edits on the Context page (templates/pages/context.html) and the Documents page
// (templates/pages/documents.html): nothing typed is lost.
//
// - A form marked `data-guard` has unsaved edits when a field differs from what the page
//   was rendered with, or when it carries `data-unsaved` (the server sent it back after a
//   refused save, with the text as typed). Saving replaces the form with a fresh one, which
//   clears both.
// - Leaving the page with unsaved edits asks first (`beforeunload`), except for the page
//   load that is the guarded form's own save (a plain submit without htmx).
// - An htmx request from an element marked `data-confirm-unsaved` (the tab links, the document
//   tree and breadcrumbs, an editor's Cancel, which Escape also activates: static/js/keyboard.js)
//   asks first when the region it replaces holds unsaved edits; cancelling keeps you where you
//   are, with the text.
// - An htmx request that refreshes a region (the entry list, the styles panel) sends, in the
//   `Mnemo-Keep` header, the ids of the elements inside it that hold typing: those marked
//   `data-keep="open"` (an open entry editor) always, `data-keep="dirty"` (a style row) when
//   edited. The server marks them `hx-preserve` in its answer, so htmx keeps the live
//   elements, typed text included (pages/views/context_shared.py `kept_ids`).
(function () {
  "use strict";

  var QUESTION = "You have changes that are not saved. Leave without saving them?";
  var saving = null; // a guarded form submitted without htmx: the next page load is its save

  function selectChanged(select) {
    var options = Array.prototype.slice.call(select.options);
    if (select.multiple) {
      return options.some(function (option) {
        return option.selected !== option.defaultSelected;
      });
    }
    var initial = options.findIndex(function (option) {
      return option.defaultSelected;
    });
    return select.selectedIndex !== (initial < 0 ? 0 : initial);
  }

  function fieldChanged(field) {
    switch (field.type) {
      case "hidden":
      case "submit":
      case "button":
      case "reset":
      case "file":
        return false;
      case "checkbox":
      case "radio":
        return field.checked !== field.defaultChecked;
      default:
        if (field.tagName === "SELECT") return selectChanged(field);
        return "defaultValue" in field && field.value !== field.defaultValue;
    }
  }

  function unsaved(form) {
    return (
      form.hasAttribute("data-unsaved") ||
      Array.prototype.some.call(form.elements, fieldChanged)
    );
  }

  function unsavedForms(root) {
    return Array.prototype.filter.call(root.querySelectorAll("form[data-guard]"), unsaved);
  }

  window.addEventListener("beforeunload", function (event) {
    var forms = unsavedForms(document).filter(function (form) {
      return form !== saving;
    });
    if (forms.length) {
      event.preventDefault();
      event.returnValue = ""; // older browsers show the prompt only when this is set
    }
  });

  // htmx cancels the default of the submits it handles, on the form itself, before this
  // listener on the document runs: what is left is a submit that loads a new page.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    saving = !event.defaultPrevented && form.matches("form[data-guard]") ? form : null;
  });

  document.addEventListener("htmx:confirm", function (event) {
    var elt = event.detail.elt;
    var target = event.detail.target;
    if (!elt.closest("[data-confirm-unsaved]") || !target) return;
    if (unsavedForms(target).length && !window.confirm(QUESTION)) {
      event.preventDefault(); // no request: the tab and its text stay
    }
  });

  document.addEventListener("htmx:configRequest", function (event) {
    var elt = event.detail.elt;
    var target = event.detail.target;
    if (!target) return;
    var keep = [];
    target.querySelectorAll("[data-keep]").forEach(function (element) {
      if (!element.id || element.contains(elt)) return; // the request replaces it itself
      var always = element.getAttribute("data-keep") === "open";
      if (always || unsavedForms(element).length) keep.push(element.id);
    });
    if (keep.length) event.detail.headers["Mnemo-Keep"] = keep.join(" ");
  });
})();
