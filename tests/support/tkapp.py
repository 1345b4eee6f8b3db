"""A small Tk app for end-to-end tests: widgets that log what they receive as JSON lines.

Run as `python -m tests.tkapp --out FILE [--geometry 600x400+100+100]` with DISPLAY set. Records:
{"event": "geometry", "widgets": {name: {x, y, width, height}}, "items": [...], "rect": {...}} (root
coordinates, logged again whenever the window moves), {"event": "click", "button": name},
{"event": "entry", "text": ...}, {"event": "select", "index": i}, {"event": "dropped", "rect": {...}},
{"event": "colour", "colour": ...} (the background changed, 300 ms after the "colour" button).
"""

from __future__ import annotations

import argparse
import json
import tkinter as tk
from typing import Any, TextIO

ITEMS = ("alpha", "bravo", "charlie", "delta", "echo")
COLOURS = ("#d02020", "#20a040")  # the background after each press of the "colour" button
RECT = (20, 20, 60, 50)  # the draggable rectangle, in canvas coordinates


class TkApp:
    """The window and its widgets; every handler writes one record."""

    def __init__(self, root: tk.Tk, out: TextIO) -> None:
        self.root, self.out = root, out
        self.presses = 0
        self.last_geometry: dict[str, Any] | None = None
        self.grab: tuple[int, int] | None = None
        root.title("tkapp")
        root.configure(bg="#ffffff")
        self.widgets: dict[str, tk.Widget] = {
            "one": tk.Button(root, text="One", command=lambda: self.log(event="click", button="one")),
            "two": tk.Button(root, text="Two", command=lambda: self.log(event="click", button="two")),
            "colour": tk.Button(root, text="Colour", command=self.change_colour),
        }
        self.text = tk.StringVar(root)
        self.text.trace_add("write", lambda *_: self.log(event="entry", text=self.text.get()))
        self.widgets["entry"] = tk.Entry(root, textvariable=self.text, width=30)
        self.listbox = tk.Listbox(root, height=len(ITEMS), exportselection=False)
        self.listbox.insert(tk.END, *ITEMS)
        self.listbox.bind("<<ListboxSelect>>", lambda _: self.log(event="select", index=self.selected()))
        self.widgets["listbox"] = self.listbox
        self.canvas = tk.Canvas(root, width=260, height=150, bg="#eeeeee", highlightthickness=0)
        self.rect = self.canvas.create_rectangle(*RECT, fill="#3366cc", outline="")
        self.canvas.tag_bind(self.rect, "<ButtonPress-1>", self.press)
        self.canvas.tag_bind(self.rect, "<B1-Motion>", self.motion)
        self.canvas.tag_bind(self.rect, "<ButtonRelease-1>", self.release)
        self.widgets["canvas"] = self.canvas
        # Fixed places leave the right and bottom of the window as bare background for the colour check.
        for name, (x, y) in {"one": (10, 10), "two": (110, 10), "colour": (210, 10), "entry": (10, 60),
                             "listbox": (10, 100), "canvas": (200, 100)}.items():
            self.widgets[name].place(x=x, y=y)
        root.bind("<Configure>", lambda _: root.after_idle(self.log_geometry))

    def log(self, **record: Any) -> None:
        self.out.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.out.flush()

    def box(self, widget: tk.Misc) -> dict[str, int]:
        return {"x": widget.winfo_rootx(), "y": widget.winfo_rooty(),
                "width": widget.winfo_width(), "height": widget.winfo_height()}

    def rect_box(self) -> dict[str, int]:
        x1, y1, x2, y2 = (round(v) for v in self.canvas.coords(self.rect))
        return {"x": self.canvas.winfo_rootx() + x1, "y": self.canvas.winfo_rooty() + y1,
                "width": x2 - x1, "height": y2 - y1}

    def log_geometry(self) -> None:
        """Root-relative boxes of every widget, the listbox rows and the rectangle, when they change."""
        lx, ly = self.listbox.winfo_rootx(), self.listbox.winfo_rooty()
        items = []
        for i in range(len(ITEMS)):
            bbox = self.listbox.bbox(i)
            if not bbox:
                return  # not laid out yet: another Configure follows
            items.append({"x": lx + bbox[0], "y": ly + bbox[1], "width": bbox[2], "height": bbox[3]})
        geometry = {"window": self.box(self.root), "widgets": {n: self.box(w) for n, w in self.widgets.items()},
                    "items": items, "rect": self.rect_box()}
        if geometry != self.last_geometry:
            self.last_geometry = geometry
            self.log(event="geometry", **geometry)

    def selected(self) -> int | None:
        chosen = self.listbox.curselection()
        return int(chosen[0]) if chosen else None

    def change_colour(self) -> None:
        colour = COLOURS[self.presses % len(COLOURS)]
        self.presses += 1
        self.root.after(300, self.paint, colour)

    def paint(self, colour: str) -> None:
        self.root.configure(bg=colour)
        self.log(event="colour", colour=colour)

    def press(self, event: tk.Event) -> None:
        self.grab = (event.x, event.y)

    def motion(self, event: tk.Event) -> None:
        if self.grab is not None:
            self.canvas.move(self.rect, event.x - self.grab[0], event.y - self.grab[1])
            self.grab = (event.x, event.y)

    def release(self, event: tk.Event) -> None:
        self.motion(event)
        self.grab = None
        self.log(event="dropped", rect=self.rect_box())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--geometry", default="600x400+100+100")
    args = parser.parse_args()
    root = tk.Tk()
    root.geometry(args.geometry)
    with open(args.out, "a", encoding="utf-8") as out:
        TkApp(root, out)
        root.mainloop()


if __name__ == "__main__":
    main()
