// The browsable page's buttons for the methods an HTML form cannot send (PATCH, DELETE).
// Each is sent to the comment's URL with the session's CSRF token (the page's
// csrf-token meta, when the sign-in cookie signed the viewer in); on success the page is
// read again, on an error the answer's detail is shown beside the button.
"use strict";

document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-method]");
  if (!button) {
    return;
  }
  const headers = { Accept: "application/json" };
  const token = document.querySelector('meta[name="csrf-token"]');
  if (token) {
    headers["X-CSRFToken"] = token.content;
  }
  if (button.dataset.body) {
    headers["Content-Type"] = "application/json";
  }
  button.disabled = true;
  const error = button.closest(".actions").querySelector(".action-error");
  try {
    const response = await fetch(button.dataset.url, {
      method: button.dataset.method,
      headers,
      body: button.dataset.body || null,
      credentials: "same-origin",
    });
    if (response.ok) {
      window.location.reload();
      return;
    }
    let detail = `${response.status} ${response.statusText}`;
    try {
      detail = JSON.stringify((await response.json()).detail);
    } catch (ignored) {
      // not JSON: the status line says enough
    }
    error.textContent = detail;
  } catch (failure) {
    error.textContent = String(failure);
  }
  error.hidden = false;
  button.disabled = false;
});
