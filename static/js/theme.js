// The theme switch: light, dark, or the system's setting (the default, with no choice stored).
//
// Loaded in <head> before the stylesheets and without defer, so a stored choice is on <html>
// (data-theme="light" or "dark") before anything of the body is drawn: no flash of the other
// theme. static/css/mnemo.css holds both themes' colours; with no data-theme it follows
// prefers-color-scheme. The choice is kept in localStorage, per browser, and other open tabs
// follow it (the storage event).
//
// The switch (templates/partials/theme_switch.html) is a labelled <select> in the top bar. It
// is hidden until this script shows it: without JavaScript the page follows the system.
(function () {
  "use strict";

  var KEY = "mnemo-theme";
  var CHOICES = ["system", "light", "dark"];
  var root = document.documentElement;

  function stored() {
    var value = null;
    try {
      value = window.localStorage.getItem(KEY);
    } catch (error) {
      // Storage refused (private mode, blocked site data): follow the system.
    }
    return CHOICES.indexOf(value) > 0 ? value : "system";
  }

  function store(choice) {
    try {
      if (choice === "system") window.localStorage.removeItem(KEY);
      else window.localStorage.setItem(KEY, choice);
    } catch (error) {
      // Not kept, but this page still shows the choice.
    }
  }

  function apply(choice) {
    if (choice === "system") root.removeAttribute("data-theme");
    else root.setAttribute("data-theme", choice);
  }

  function showSwitches() {
    var choice = stored();
    document.querySelectorAll("select[data-theme-switch]").forEach(function (select) {
      select.value = choice;
      var control = select.closest("[data-theme-control]");
      if (control) control.hidden = false;
    });
  }

  apply(stored());

  document.addEventListener("change", function (event) {
    var select = event.target;
    if (!select.matches || !select.matches("select[data-theme-switch]")) return;
    var choice = CHOICES.indexOf(select.value) >= 0 ? select.value : "system";
    store(choice);
    apply(choice);
  });

  window.addEventListener("storage", function (event) {
    if (event.key !== KEY && event.key !== null) return;
    apply(stored());
    showSwitches();
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", showSwitches);
  } else {
    showSwitches();
  }
})();
