"""Batches from the wire to screen-pixel steps and back (`POST /v1/desktop/actions`, the vendor endpoints and the
approval gate plan with the same code): the coordinate space, each action's step, the results and images."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

from Xlib.display import Display

from api.convert.elements import target_of
from api.convert.waits import CONDITIONS, condition_of, result_fields
from api.http.problems import problem_document
from desktop.accessibility.service import Accessibility
from desktop.actions import batch as steps
from desktop.core.errors import DomainError, FieldError, invalid_action
from desktop.input.coordinates import Area, CoordinateSpace, ImageFit, fit_image
from desktop.input.keys import keysym_for_name, parse_chord, parse_keys, text_keysyms
from desktop.screen.screenshots import Region, Screenshot, ShotOptions
from desktop.windows.control import managed, parse_window_id
from desktop.windows.query import WindowInfo, WindowNotViewable
from desktop.x11.session import Session
from sandbox_desktop_wire.actions import (
    ActionResult,
    ActionsRequest,
    ClickAction,
    CursorPositionAction,
    DownAction,
    DragAction,
    HoldKeyAction,
    Image,
    ImageFrame,
    ImageLimits,
    KeyAction,
    MoveAction,
    Rect,
    ScreenshotAction,
    ScrollAction,
    TypeAction,
    UpAction,
    WaitAction,
    ZoomAction,
)
from sandbox_desktop_wire.enums import CoordinateSpaceKind


def _fit(limits: ImageLimits, width: int, height: int) -> ImageFit:
    return fit_image(width, height, scale=limits.scale, target_width=limits.target_width,
                     target_height=limits.target_height, max_long_edge=limits.max_long_edge,
                     max_pixels=limits.max_pixels)


def _viewable(d: Display, wid: int) -> WindowInfo:
    info = managed(d, wid, hidden=True)
    if not info.viewable:
        raise WindowNotViewable.of(info)
    return info


async def window_of(body: ActionsRequest, session: Session) -> WindowInfo | None:
    """The window of a window-space batch (404 unknown, 409 minimised); None for the other spaces."""
    options = body.coordinates
    if options is None:
        return None
    if (options.window_id is not None) != (options.space == CoordinateSpaceKind.WINDOW):
        raise invalid_action("coordinates.windowId goes with the window space, and the window space needs it",
                             "coordinates.windowId")
    if options.window_id is None:
        return None
    return await session.x.call(_viewable, parse_window_id(options.window_id))


def coordinate_space(body: ActionsRequest, session: Session, final: ImageFit,
                     window: WindowInfo | None = None) -> CoordinateSpace:
    """The batch's space; a window-space batch needs its `window` (`window_of`)."""
    options = body.coordinates
    w, h = session.width, session.height
    if options is None or options.space == CoordinateSpaceKind.SCREEN:
        return CoordinateSpace.screen(w, h)
    if options.space == CoordinateSpaceKind.NORMALIZED:
        return CoordinateSpace.normalized(w, h)
    if (options.width is None) != (options.height is None):
        default = "the window" if options.space == CoordinateSpaceKind.WINDOW else "this request's screenshots"
        raise invalid_action("give coordinates.width and coordinates.height together, or neither to use "
                             f"the size of {default}", "coordinates.width")
    if options.space == CoordinateSpaceKind.WINDOW:
        if window is None:
            raise invalid_action("the window space needs coordinates.windowId", "coordinates.windowId")
        c = window.client
        return CoordinateSpace.window(w, h, Area(c.x, c.y, c.width, c.height), options.width, options.height)
    return CoordinateSpace.image(w, h, options.width or final.width, options.height or final.height)


class Planner:
    """Turns the wire actions into screen-pixel steps, raising a 400 naming `actions[i].field`."""

    def __init__(self, space: CoordinateSpace, shot: ShotOptions, session: Session,
                 accessibility: Accessibility) -> None:
        self.space = space
        self.shot = shot
        self.session = session
        self.accessibility = accessibility

    def point(self, x: int, y: int, prefix: str) -> tuple[int, int]:
        space = self.space
        for value, axis, limit in ((x, "x", space.max_x), (y, "y", space.max_y)):
            if not 0 <= value <= limit:
                raise invalid_action(f"{prefix}{axis}={value} is outside the {space.kind} space "
                                     f"(0 <= {axis} <= {limit})", prefix + axis)
        at = space.to_screen(x, y)
        if not space.on_screen(*at):  # a window reaching off the screen: that part cannot be clicked
            axis = "x" if not 0 <= at[0] < space.screen_width else "y"
            raise invalid_action(f"{prefix}{axis} is on a part of the window that is off the screen "
                                 f"(screen point {at[0]},{at[1]})", prefix + axis)
        return at

    def where(self, action: Any, prefix: str) -> steps.Where | None:
        """A pointer action's point, its element (docs/accessibility.md), or None for the pointer's position."""
        if action.element is None:
            return self.optional_point(action.x, action.y, prefix)
        if action.x is not None or action.y is not None:
            raise invalid_action(f"give {prefix}x and {prefix}y or {prefix}element, not both",
                                 prefix + ("x" if action.x is not None else "y"))
        return steps.ElementAt(target_of(action.element, prefix + "element"))

    def optional_point(self, x: int | None, y: int | None, prefix: str) -> tuple[int, int] | None:
        if x is None and y is None:
            return None
        if x is None or y is None:
            missing = prefix + ("x" if x is None else "y")
            raise invalid_action(f"give {prefix}x and {prefix}y together, or neither for the pointer's position",
                                 missing)
        return self.point(x, y, prefix)

    @staticmethod
    def modifiers(names: list[str], prefix: str) -> tuple[int, ...]:
        keysyms = []
        for j, name in enumerate(names):
            keysym = keysym_for_name(name.strip())
            if keysym is None:
                raise invalid_action(f"unknown key {name!r}; use ctrl, shift, alt, super or an X keysym name",
                                     f"{prefix}modifiers[{j}]")
            keysyms.append(keysym)
        return tuple(keysyms)

    def zoom(self, action: ZoomAction, prefix: str) -> ShotOptions:
        r, space = action.region, self.space
        for edge, size, limit in (("x", "width", space.max_x + 1), ("y", "height", space.max_y + 1)):
            start, extent = getattr(r, edge), getattr(r, size)
            if start < 0 or start + extent > limit:
                raise invalid_action(f"the region must lie in the {space.kind} space: 0 <= {edge} and "
                                     f"{edge}+{size} <= {limit}", f"{prefix}region.{edge if start < 0 else size}")
        x, y, w, h = space.rect_to_screen(r.x, r.y, r.width, r.height)
        fit = _fit(action, w, h)
        return dataclasses.replace(self.shot, scale=fit.scale, region=Region(x, y, w, h))

    def wait(self, action: WaitAction, prefix: str) -> steps.Wait:
        """`durationMs` alone sleeps (as the reference's batches do); a condition is waited for up to `timeoutMs`."""
        if all(getattr(action, name) is None for name in CONDITIONS):
            if action.duration_ms is None:
                raise FieldError([{"location": "body", "field": prefix + "durationMs", "message": "field required "
                                   "(or a condition: window, screen, clipboard)", "type": "missing"}], wrong_shape=True)
            return steps.Wait(action.duration_ms)
        if action.duration_ms is not None:
            raise invalid_action("give durationMs or a condition with timeoutMs, not both", prefix + "durationMs")
        if action.timeout_ms is None:
            raise FieldError([{"location": "body", "field": prefix + "timeoutMs", "message": "field required with "
                               "a condition", "type": "missing"}], wrong_shape=True)
        return steps.Wait(action.timeout_ms, condition_of(action, self.session, self.accessibility, prefix))

    def step(self, i: int, action: Any) -> steps.Step:
        p = f"actions[{i}]."
        match action:
            case MoveAction():
                at = self.where(action, p)
                if at is None:
                    raise invalid_action(f"give {p}x and {p}y, or {p}element", p + "x")
                return steps.Hover(at) if isinstance(at, steps.ElementAt) else steps.Move(*at)
            case ClickAction():
                return steps.Click(self.where(action, p), action.button, action.count,
                                   self.modifiers(action.modifiers, p))
            case DownAction() | UpAction():
                return steps.Button(self.where(action, p), action.button, isinstance(action, DownAction))
            case DragAction():
                path = tuple(self.point(pt.x, pt.y, f"{p}path[{j}].") for j, pt in enumerate(action.path))
                return steps.Drag(path, action.button, self.modifiers(action.modifiers, p), action.duration_ms)
            case ScrollAction():
                if action.delta_x == 0 and action.delta_y == 0:
                    raise invalid_action("deltaX or deltaY must be non-zero", p + "deltaY")
                return steps.Scroll(self.where(action, p), action.delta_x, action.delta_y,
                                    self.modifiers(action.modifiers, p))
            case TypeAction():
                return steps.Type(tuple(text_keysyms(action.text, p + "text")), action.delay_ms)
            case KeyAction():
                return steps.Key(tuple(tuple(chord) for chord in parse_keys(action.keys, p + "keys")))
            case HoldKeyAction():
                return steps.HoldKey(tuple(parse_chord(action.keys, p + "keys")), action.duration_ms)
            case WaitAction():
                return self.wait(action, p)
            case CursorPositionAction():
                return steps.CursorPosition()
            case ScreenshotAction():
                return steps.Capture(self.shot)
            case ZoomAction():
                return steps.Capture(self.zoom(action, p))
        raise AssertionError(f"unhandled action {action!r}")


def image_model(shot: Screenshot, space: CoordinateSpace) -> Image:
    r = shot.region
    frame = ImageFrame(screen_width=shot.screen_width, screen_height=shot.screen_height, image_width=shot.width,
                       image_height=shot.height, scale=shot.scale, region=Rect(x=r.x, y=r.y, width=r.width,
                                                                                 height=r.height),
                       space=space.kind)
    return Image(media_type=shot.media_type, data=base64.b64encode(shot.data).decode(), frame=frame)


def result_model(index: int, action: Any, result: steps.StepResult, space: CoordinateSpace) -> ActionResult:
    model = ActionResult(index=index, type=action.type)
    if result.pointer is not None:
        model.x, model.y = space.from_screen(result.pointer.x, result.pointer.y)
        model.window = str(result.pointer.window) if result.pointer.window is not None else None
    if result.shot is not None:
        model.image = image_model(result.shot, space)
    model.element = result.element
    if result.waited is not None:
        for name, value in result_fields(result.waited).items():
            setattr(model, name, value)
    return model


def problem_of(exc: DomainError) -> dict[str, Any]:
    return problem_document(exc)


@dataclasses.dataclass(frozen=True)
class BatchPlan:
    """A batch turned into screen-pixel steps, with the space its answer speaks and its screenshots' options."""

    space: CoordinateSpace
    shot: ShotOptions
    steps: list[steps.Step]


async def plan_batch(body: ActionsRequest, session: Session, accessibility: Accessibility) -> BatchPlan:
    """The steps a batch runs, planned once for running it and for showing it to a person first
    (api/approvals/gate.py): the same mapping, the same 400s naming `actions[i].field`."""
    shot_options = body.screenshot
    final = _fit(shot_options, session.width, session.height) if shot_options else ImageFit(1.0, session.width,
                                                                                             session.height)
    space = coordinate_space(body, session, final, await window_of(body, session))
    shot = ShotOptions(scale=final.scale)
    if shot_options is not None:
        shot = ShotOptions(format=shot_options.format, quality=shot_options.quality, scale=final.scale,
                           show_cursor=shot_options.show_cursor)
    planner = Planner(space, shot, session, accessibility)
    return BatchPlan(space, shot, [planner.step(i, action) for i, action in enumerate(body.actions)])
