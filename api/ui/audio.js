// The desktop's sound in the live view (docs/audio.md).
//
// The server sends the sound as an Opus track in the same MediaStream as the video, so the live view's
// <video> already holds it; it starts muted because browsers only autoplay muted media. This module adds
// a "Sound on/off" toggle to the live view's actions: turning it on unmutes the element (a click is the
// user gesture browsers ask for before playing sound). The toggle is disabled while the view carries no
// sound (not connected, or the desktop has no sound server).

const video = document.getElementById("live-video");
const actions = document.querySelector("#live .panel-head .actions");

function mount() {
  if (!video || !actions || document.getElementById("live-sound")) return;
  const button = document.createElement("button");
  button.type = "button";
  button.id = "live-sound";
  button.className = "secondary";
  button.setAttribute("aria-pressed", "false");
  button.title = "Play the desktop's sound in this page";
  actions.insertBefore(button, document.getElementById("stream-stop"));

  const hasSound = () => {
    const stream = video.srcObject;
    return stream instanceof MediaStream && stream.getAudioTracks().some((t) => t.readyState === "live");
  };

  const render = () => {
    const available = hasSound();
    const on = available && !video.muted;
    button.disabled = !available;
    button.textContent = !available ? "No sound" : on ? "Sound off" : "Sound on";
    button.setAttribute("aria-pressed", String(on));
    button.dataset.sound = !available ? "unavailable" : on ? "on" : "off";
  };

  button.addEventListener("click", () => {
    if (!hasSound()) return;
    video.muted = !video.muted;
    if (!video.muted) void video.play().catch(() => undefined);
    render();
  });

  // srcObject changes fire no event of their own; a new stream starts loading, and tracks come and go.
  let watched = null;
  const watch = () => {
    const stream = video.srcObject instanceof MediaStream ? video.srcObject : null;
    if (stream !== watched) {
      if (watched) {
        watched.removeEventListener("addtrack", render);
        watched.removeEventListener("removetrack", render);
      }
      if (stream) {
        stream.addEventListener("addtrack", render);
        stream.addEventListener("removetrack", render);
      }
      watched = stream;
    }
    render();
  };
  for (const event of ["loadstart", "loadedmetadata", "emptied", "volumechange", "play"]) {
    video.addEventListener(event, watch);
  }
  // A track that ends (the server dropped its sound) changes no event on the element: check now and then.
  setInterval(watch, 1000);
  watch();
}

mount();
