"""A real GTK 3 app (zenity's dialogs) driven the way a user works it: by its labelled fields and buttons
(accessibility), and checked by what it answers and by its pixels."""

from __future__ import annotations

import time

from pytest_sandbox_desktop import Desktop

ANSWER = "dialog-answer.txt"
"""Where the dialog's shell writes its answer: a file of the desktop's HOME (the desktop is a sandbox of its own,
so the test reads it back through the desktop's API, not from its own disk)."""


class Dialog:
    """A zenity dialog on the desktop, its answer (what it prints, then `exit=<its exit code>`) to a file."""

    def __init__(self, desktop: Desktop, command: str) -> None:
        self.desktop = desktop
        launched = desktop.launch("sh", ["-c", f'{command} > "$HOME/{ANSWER}"; echo "exit=$?" >> "$HOME/{ANSWER}"'])
        self.process_id = launched.process_id

    def answer(self, timeout: float = 10.0) -> str:
        """The answer, once the dialog's shell has exited (its window closes a moment before it does)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(p.status == "exited" for p in self.desktop.processes(owner="desktop") if p.id == self.process_id):
                return self.desktop.read_file(f"~/{ANSWER}").decode()
            time.sleep(0.05)
        raise AssertionError(f"the dialog's shell {self.process_id} did not exit within {timeout:g} s")


def test_a_form_is_filled_and_sent_by_element(desktop: Desktop) -> None:
    dialog = Dialog(desktop, 'zenity --forms --title=Shipping --text="Where to?" --add-entry="Full name" '
                    "--add-entry=City")
    desktop.expect_window(title="Shipping")
    desktop.expect_element(role="textbox", name="Full name")

    desktop.act({"role": "textbox", "name": "Full name"}, "setValue", value="Ada Lovelace")
    desktop.act({"role": "textbox", "name": "City"}, "setValue", value="London")
    desktop.act({"role": "button", "name": "OK"}, "click")

    desktop.expect_window(title="Shipping", until="gone")
    assert dialog.answer().splitlines() == ["Ada Lovelace|London", "exit=0"]


def test_typing_redraws_the_entry(desktop: Desktop) -> None:
    dialog = Dialog(desktop, 'zenity --entry --title=Rename --text="New name"')
    field = desktop.expect_element(role="textbox", until="focused")
    box = field["bounds"]

    region = (box["x"], box["y"], box["width"], box["height"])
    with desktop.expect_screen_change(region=region):
        desktop.type_text("report.txt")
    # The first key drawn ends the block above; the app has taken every key once the field stops redrawing.
    desktop.wait_settled(region=region)
    [typed] = desktop.find(role="textbox")
    assert typed.value == "report.txt"

    desktop.press("Return")
    desktop.expect_window(title="Rename", until="gone")
    assert dialog.answer().splitlines() == ["report.txt", "exit=0"]


def test_a_question_is_declined(desktop: Desktop) -> None:
    dialog = Dialog(desktop, 'zenity --question --title=Delete --text="Delete the file?"')
    desktop.expect_element(role="button", name="No")

    desktop.act({"role": "button", "name": "No"}, "click")

    desktop.expect_window(title="Delete", until="gone")
    assert dialog.answer().splitlines() == ["exit=1"]
