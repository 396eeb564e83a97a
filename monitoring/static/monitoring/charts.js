/* Draws the Plotly figures the server built (JSON in <script type="application/json">) with the
   locally served plotly.js, and again after htmx swaps in fresh ones (auto refresh). */
(function () {
  "use strict";

  var CONFIG = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  function draw(root) {
    if (typeof window.Plotly === "undefined") {
      return;
    }
    root.querySelectorAll("[data-figure]").forEach(function (element) {
      var source = document.getElementById(element.dataset.figure);
      if (!source) {
        return;
      }
      var figure = JSON.parse(source.textContent);
      window.Plotly.react(element, figure.data, figure.layout, CONFIG).then(function () {
        element.dataset.drawn = "true";
      });
    });
  }

  function purge(root) {
    if (typeof window.Plotly === "undefined") {
      return;
    }
    root.querySelectorAll(".js-plotly-plot").forEach(function (element) {
      window.Plotly.purge(element);
    });
  }

  function showCustomFields(form) {
    var select = form.querySelector("select[name=window]");
    if (!select) {
      return;
    }
    var custom = select.value === "custom";
    form.querySelectorAll(".custom-window").forEach(function (field) {
      field.hidden = !custom;
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    draw(document);
    document.querySelectorAll(".window-form").forEach(function (form) {
      showCustomFields(form);
      var select = form.querySelector("select[name=window]");
      if (select) {
        select.addEventListener("change", function () {
          showCustomFields(form);
          if (select.value !== "custom") {
            form.requestSubmit();
          }
        });
      }
    });
  });
  // Auto refresh polls only while its box is ticked (a check here rather than an htmx trigger
  // filter, which htmx would have to eval).
  document.addEventListener("htmx:beforeRequest", function (event) {
    var box = document.getElementById("auto-refresh");
    if (event.detail.elt.hasAttribute("data-auto-refresh") && box && !box.checked) {
      event.preventDefault();
    }
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    purge(event.detail.target);
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    draw(event.detail.target.isConnected ? event.detail.target : document);
  });
})();
