// Keyboard focus after htmx swaps, and Escape in editors, on every page (templates/base.html).
//
// Templates say where focus goes; this file only follows them.
//
// - `data-focus` on an element of a swap's answer: focus it. A control or link gets focus
//   itself (a text box with the cursor at the end); a form or a field's wrapper gives it to its
//   first invalid field (aria-invalid: a refused save), else its first field; anything else
//   (a note, a heading) is made focusable with tabindex="-1". The attribute acts in the swap
//   that brought it, once: those in a page as it loads are removed unread.
// - Controls that come back in a swap carry stable ids (the tab links, Pin, Save): htmx itself
//   puts focus back on the element with the id that had it.
// - A swap that replaced the element holding focus (or the one that made the request) and
//   left nothing marked hands focus on, in this order: the first invalid field of the new
//   content; else, when focus fell to <body>, what `data-return-focus="SELECTOR"` on the
//   container that held focus names (looked for in the new content, then in the page: an
//   editor returns to its Edit button, an Undo to the restored row's Edit button), the new
//   content's first heading, or the new content itself. Focus never falls to <body>.
// - This happens when htmx has settled the swap (its controls work); if focus moved meanwhile
//   to somewhere else than htmx put it (the person went on), it stays where they put it.
// - A swap the person caused (a click, a key, a submit; not a background refresh) has its notes
//   (`role="status"`) read out through the page's live region, #flash, where a note inserted
//   inside the swapped content would often go unannounced.
// - Escape inside a form with a `data-cancel` link or button activates it: an editor's Cancel,
//   so the read view comes back (and focus returns to the Edit button, as above). The Cancel
//   controls also carry `data-confirm-unsaved`, so with unsaved typing static/js/unsaved.js asks
//   first, whether Escape or a click cancels. Escape inside an open `<details data-cancel>`
//   closes it, keeping its text, and focuses its summary.
(function () {
  "use strict";

  var FIELDS =
    'input:not([type="hidden"]):not([disabled]), select:not([disabled]), textarea:not([disabled])';
  var FOCUSABLE = FIELDS + ", a[href], button:not([disabled]), summary, [tabindex]";
  var HEADINGS = "h1, h2, h3, h4, h5, h6";
  var INVALID = '[aria-invalid="true"]';
  var before = new WeakMap(); // a request's XMLHttpRequest -> where the person was before its swap

  function gone(element) {
    return !!element && !element.isConnected;
  }

  function focusLost() {
    var active = document.activeElement;
    return !active || active === document.body || !active.isConnected;
  }

  function focusable(element) {
    if (element.matches(FOCUSABLE)) return element;
    var field = element.querySelector(INVALID) || element.querySelector(FIELDS);
    if (field) return field;
    element.setAttribute("tabindex", "-1");
    return element;
  }

  function find(root, selector) {
    try {
      return root.querySelector(selector) || document.querySelector(selector);
    } catch (error) {
      return null; // not a selector: nothing to return to
    }
  }

  function focusOn(element) {
    var target = focusable(element);
    if (target === document.activeElement) return; // already there (htmx restored it): as it is
    target.focus();
    if (target.matches("textarea, input")) {
      try {
        var end = target.value.length;
        target.setSelectionRange(end, end);
      } catch (error) {
        // A field without a text cursor (a number, a checkbox): focus is enough.
      }
    }
  }

  function announce(root) {
    var region = document.getElementById("flash");
    if (!region) return;
    var notes = Array.prototype.slice.call(root.querySelectorAll('[role="status"]'));
    if (root.matches('[role="status"]')) notes.unshift(root);
    var text = notes
      .map(function (note) {
        return note.textContent.replace(/\s+/g, " ").trim();
      })
      .filter(Boolean)
      .join(" ");
    region.querySelectorAll("[data-announcement]").forEach(function (old) {
      old.remove();
    });
    if (!text) return;
    var said = document.createElement("p");
    said.className = "sr-only";
    said.setAttribute("data-announcement", "");
    said.textContent = text;
    region.appendChild(said);
  }

  // Marks in the page as loaded are not for it: only a swap's answer says where focus goes.
  document.querySelectorAll("[data-focus]").forEach(function (element) {
    element.removeAttribute("data-focus");
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    var detail = event.detail;
    if (!detail.xhr) return;
    var active = document.activeElement;
    var holder = active && active !== document.body ? active.closest("[data-return-focus]") : null;
    var trigger = detail.requestConfig && detail.requestConfig.triggeringEvent;
    before.set(detail.xhr, {
      active: active,
      elt: detail.elt,
      target: detail.target,
      targetId: detail.target ? detail.target.id : "",
      back: holder ? holder.getAttribute("data-return-focus") : "",
      caused: !!(trigger && trigger.isTrusted),
    });
  });

  // Focus moved during the swap's settle delay by someone else than htmx (a person's click or
  // key, a test's fill): theirs stands.
  function movedMeanwhile(was) {
    var active = document.activeElement;
    if (!active || active === document.body || active === was.active) return false;
    return !(was.active && was.active.id && active.id === was.active.id); // htmx's restore
  }

  // Fired once for each element the swap put in (out-of-band ones too), after htmx has made
  // them live: the first one does the work for the whole swap.
  document.addEventListener("htmx:afterSettle", function (event) {
    var detail = event.detail;
    var was = detail.xhr && before.get(detail.xhr);
    if (!was) return;
    before.delete(detail.xhr);
    var root =
      (was.targetId && document.getElementById(was.targetId)) ||
      (was.target && was.target.isConnected ? was.target : event.target);

    var marked = document.querySelectorAll("[data-focus]");
    var pick = movedMeanwhile(was) ? null : marked[0] || null;
    marked.forEach(function (element) {
      element.removeAttribute("data-focus");
    });
    if (!pick && !movedMeanwhile(was) && (gone(was.active) || gone(was.elt))) {
      pick = root.querySelector(INVALID);
      if (!pick && focusLost()) {
        pick =
          (was.back && find(root, was.back)) || root.querySelector(HEADINGS) || root;
      }
    }
    if (pick) focusOn(pick);
    if (was.caused) announce(root);
  });

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || event.defaultPrevented || event.isComposing) return;
    var from = event.target;
    if (!(from instanceof Element)) return;
    var form = from.closest("form");
    var cancel = form && form.querySelector("a[data-cancel], button[data-cancel]");
    if (cancel) {
      event.preventDefault();
      cancel.click();
      return;
    }
    var details = from.closest("details[data-cancel]");
    if (details && details.open) {
      event.preventDefault();
      details.open = false;
      var summary = details.querySelector("summary");
      if (summary) summary.focus();
    }
  });
})();
