// Making the desktop fit the browser window (docs/display.md).
//
// Adds a "Fit to window" button to the live view's actions: it asks the server to change the desktop's
// screen to the size of the live view's video area (`POST .../display`, CSS pixels rounded down to even
// numbers, at least 64 and at most the desktop's maximum from `GET .../display/info`), so the picture is
// shown 1:1. Apps and windows stay; viewers get the new size with the next frame. The size now is shown
// next to the live view's statistics.

import { call, desktopPath } from "./api.js";
import { action } from "./ui.js";

const MIN_SIDE = 64;
const video = document.getElementById("live-video");
const actions = document.querySelector("#live .panel-head .actions");
const statusLine = document.querySelector("#live .status-line");

/** An even size that fits `area` (a DOMRect-like width/height) within the desktop's limits. */
export function fitSize(area, maxWidth, maxHeight) {
  const side = (value, limit) => Math.max(MIN_SIDE, Math.min(limit, Math.floor(value / 2) * 2));
  return { width: side(area.width, maxWidth), height: side(area.height, maxHeight) };
}

function mount() {
  if (!video || !actions || document.getElementById("live-fit")) return;
  const frame = video.parentElement || video;
  const button = document.createElement("button");
  button.type = "button";
  button.id = "live-fit";
  button.className = "secondary";
  button.textContent = "Fit to window";
  button.title = "Change the desktop's screen size to this view's size (apps and windows stay)";
  actions.insertBefore(button, document.getElementById("stream-stop"));

  const size = document.createElement("span");
  size.id = "live-display";
  size.className = "muted";
  if (statusLine) statusLine.append(size);

  const show = (result) => {
    size.textContent = `Screen ${result.width}×${result.height}`;
    size.dataset.width = String(result.width);
    size.dataset.height = String(result.height);
  };

  button.addEventListener("click", () => action(button, "Fit to window", async () => {
    const info = await call("GET", desktopPath("/display/info"));
    const limits = info.resolution;
    const target = fitSize(frame.getBoundingClientRect(), limits.maxWidth || limits.width,
                           limits.maxHeight || limits.height);
    button.dataset.requested = `${target.width}x${target.height}`;
    const result = await call("POST", desktopPath("/display"), { json: target });
    show(result);
    button.dataset.applied = `${result.width}x${result.height}`;
  }));

  // The video's own size follows the desktop's (after a Fit from here or a change by anyone else).
  video.addEventListener("resize", () => {
    if (video.videoWidth > 0) show({ width: video.videoWidth, height: video.videoHeight });
  });
}

mount();
