"""Names for unnamed fields, as a person reading the form would give them.

A text field's accessible name is its label when the app ties the two together (GTK's mnemonic widget,
HTML's `<label for>`), but many dialogs only put a label beside the field: zenity's forms, hand-made
GTK and Qt dialogs. Such a field then has no name, and "the field called City" finds nothing. So an
unnamed field takes the name of its `labelled-by` relation's target, else of the label just left of it
on the same row, else of the one right above it, within one window (docs/accessibility.md "Names").
"""

from __future__ import annotations

from collections.abc import Iterable

from desktop.accessibility.atspi import ACCESSIBLE, AtspiBus, AtspiError
from desktop.accessibility.reading import Prefilter, matching, read_objects
from desktop.accessibility.tree import Element, Snapshot, element_id, fill_details
from desktop.core.geometry import Bounds

FIELD_ROLES = frozenset({"entry", "text", "password-text", "spin-button", "combo-box", "slider"})
LABEL_ROLES = frozenset({"label", "static"})
LABELLED_BY = 2
"""`AtspiRelationType.LABELLED_BY`."""
MAX_LEFT_GAP = 400
"""A label further left of its field than this (screen pixels) belongs to something else."""


def unnamed_fields(elements: Iterable[Element]) -> list[Element]:
    return [e for e in elements if e.role in FIELD_ROLES and not e.name.strip() and e.showing]


def _label_for(field: Bounds, labels: list[tuple[str, Bounds]]) -> str | None:
    """The nearest label left of the field on its row, else the nearest right above it."""
    middle = field.y + field.height // 2
    left = [(field.x - (b.x + b.width), name) for name, b in labels
            if b.y <= middle < b.y + b.height and b.x + b.width <= field.x + 4
            and field.x - (b.x + b.width) <= MAX_LEFT_GAP]
    if left:
        return min(left)[1]
    above = [(field.y - (b.y + b.height), name) for name, b in labels
             if b.y + b.height <= field.y + 4 and field.y - (b.y + b.height) <= 2 * field.height
             and b.x < field.x + field.width and field.x < b.x + b.width]
    return min(above)[1] if above else None


async def name_fields(bus: AtspiBus, snapshot: Snapshot, fields: list[Element], windows: dict[str, Element],
                      *, labels_read: bool = False) -> None:
    """Give each unnamed field in `fields` a name (see the module docstring). `windows` maps each field's
    id to the top-level object it lies in, where its labels are looked for: in the snapshot when
    `labels_read` (a whole tree, bounds filled), else asked of the window."""
    if not fields:
        return
    relations = await bus.call_all([(f.bus, f.path, ACCESSIBLE, "GetRelationSet", "", ()) for f in fields])
    targets: dict[str, tuple[str, str]] = {}
    for field, answer in zip(fields, relations, strict=True):
        if isinstance(answer, AtspiError):
            continue
        for kind, refs in answer[0]:
            if kind == LABELLED_BY and refs:
                targets[field.id] = (str(refs[0][0]), str(refs[0][1]))
    missing = [ref for ref in targets.values() if element_id(*ref) not in snapshot.elements]
    names = {element_id(*ref): str(answer[0].value) for ref, answer in zip(missing, await bus.call_all(
        [(b, p, "org.freedesktop.DBus.Properties", "Get", "ss", (ACCESSIBLE, "Name")) for b, p in missing]),
        strict=True) if isinstance(answer, list)}
    for field in fields:
        if field.id in targets:
            key = element_id(*targets[field.id])
            field.name = snapshot.elements[key].name if key in snapshot.elements else names.get(key, "")
    await _name_by_position(bus, snapshot, [f for f in fields if not f.name.strip()], windows, labels_read)


async def _name_by_position(bus: AtspiBus, snapshot: Snapshot, fields: list[Element],
                            windows: dict[str, Element], labels_read: bool) -> None:
    roots = {windows[f.id].id: windows[f.id] for f in fields if f.id in windows and f.bounds is not None}
    if not roots:
        return
    labels_of: dict[str, list[tuple[str, Bounds]]] = {}
    if labels_read:
        for root_id, root in roots.items():
            labels_of[root_id] = [(e.name.strip(), e.bounds) for e in snapshot.subtree(root, None)
                                  if e.role in LABEL_ROLES and e.bounds is not None and e.name.strip()]
    matches = [] if labels_read else await matching(bus, list(roots.values()), Prefilter(roles=LABEL_ROLES))
    for root_id, refs in zip(roots, matches, strict=False):
        known = [snapshot.elements[element_id(*ref)] for ref in refs if element_id(*ref) in snapshot.elements]
        labels = known + await read_objects(bus, snapshot.applications,
                                            [ref for ref in refs if element_id(*ref) not in snapshot.elements])
        await fill_details(bus, labels, values=False)
        labels_of[root_id] = [(e.name.strip(), e.bounds) for e in labels if e.bounds is not None and e.name.strip()]
    for field in fields:
        window = windows.get(field.id)
        if window is not None and field.bounds is not None:
            field.name = _label_for(field.bounds, labels_of.get(window.id, [])) or ""
