// The API docs page (templates/api/swagger_ui.html) in the site's theme.
//
// Swagger UI ships dark styles of its own (under html.dark-mode in swagger-ui.css), which only
// its standalone layout's toggle turns on; drf-spectacular's page uses the plain layout. This
// turns them on from what static/js/theme.js put on <html> (data-theme="light" or "dark": the
// theme switch's choice, made on any other page), else from the system's setting, and follows
// either when it changes (the switch in another tab, the system at dusk).
(function () {
  "use strict";

  var root = document.documentElement;
  var system = window.matchMedia("(prefers-color-scheme: dark)");

  function follow() {
    var chosen = root.getAttribute("data-theme");
    root.classList.toggle("dark-mode", chosen ? chosen === "dark" : system.matches);
  }

  follow();
  system.addEventListener("change", follow);
  new MutationObserver(follow).observe(root, { attributes: true, attributeFilter: ["data-theme"] });
})();
