"""`POST /v1/desktop/actions`: validate a whole batch, map its coordinates to the screen, run it, observe.

Everything is checked before anything runs: a bad value is a 400 naming `actions[i].field`. Errors
while running are not HTTP errors: the answer is a 200 with the results so far and `error.index`.
"""

from __future__ import annotations

import base64
import dataclasses
import re
import weakref
from typing import Any, get_args

from starlette.requests import Request
from starlette.responses import Response
from Xlib.display import Display

from api.context import desktop_of
from api.elements import target_of
from api.operations import Operation
from api.problems import problem_document
from api.routes.events import CONDITIONS, condition_of, result_fields
from desktop import actions as steps
from desktop.accessibility.service import Accessibility
from desktop.action_log import acting_as
from desktop.coordinates import Area, CoordinateSpace, ImageFit, fit_image
from desktop.errors import FieldError, ServiceError, invalid_action
from desktop.keys import keysym_for_name, parse_chord, parse_keys, text_keysyms
from desktop.runtime import Desktop
from desktop.screen import Region, Screenshot, ShotOptions
from desktop.session import Session
from desktop.window_control import managed, parse_window_id
from desktop.windows import WindowInfo, WindowNotViewable
from sandbox_desktop_wire.actions import (
    Action,
    ActionError,
    ActionLogQuery,
    ActionLogResponse,
    ActionResult,
    ActionsRequest,
    ActionsResponse,
    ClickAction,
    CoordinateFrame,
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
from sandbox_desktop_wire.problems import ProblemCode

INVALID = ProblemCode.DESKTOP_INVALID_ACTION
ERRORS = (404, 409, 502, 503)
"""404: a window the batch names (its `window` coordinate space, a window action) does not exist."""
ACTION_TYPES = frozenset(get_args(model.model_fields["type"].annotation)[0] for model in get_args(get_args(Action)[0]))

# One coordinator per Desktop, created on first use, so runtime.py need not know about batches.
_coordinators: weakref.WeakKeyDictionary[Desktop, steps.Actions] = weakref.WeakKeyDictionary()


def coordinator(desktop: Desktop) -> steps.Actions:
    found = _coordinators.get(desktop)
    if found is None:
        found = _coordinators[desktop] = steps.Actions(desktop.mouse, desktop.keyboard, desktop.screen,
                                                       desktop.frames, desktop.events, desktop.accessibility.locate)
    return found


# -- validation and mapping -------------------------------------------------------------------

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


# -- responses ----------------------------------------------------------------------------------

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


def problem_of(exc: ServiceError) -> dict[str, Any]:
    return problem_document(exc)


# -- the endpoint -------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class BatchPlan:
    """A batch turned into screen-pixel steps, with the space its answer speaks and its screenshots' options."""

    space: CoordinateSpace
    shot: ShotOptions
    steps: list[steps.Step]


async def plan_batch(body: ActionsRequest, session: Session, accessibility: Accessibility) -> BatchPlan:
    """The steps a batch runs, planned once for running it and for showing it to a person first
    (api/approval_policy.py): the same mapping, the same 400s naming `actions[i].field`."""
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


async def run_actions(request: Request, body: ActionsRequest) -> ActionsResponse:
    desktop = desktop_of(request)
    session = desktop.session()
    planned = await plan_batch(body, session, desktop.accessibility)
    space, shot, plan = planned.space, planned.shot, planned.steps
    settle = steps.Settle(body.settle.quiet_ms, body.settle.timeout_ms) if body.settle else None
    observe = shot if body.screenshot is not None or settle is not None else None
    with acting_as("batch"):
        outcome = await coordinator(desktop).run(session, plan, settle, observe)

    response = ActionsResponse(
        results=[result_model(i, body.actions[i], r, space) for i, r in enumerate(outcome.results)],
        coordinates=CoordinateFrame(space=space.kind, width=space.width, height=space.height,
                                    screen_width=session.width, screen_height=session.height,
                                    window_id=body.coordinates.window_id if body.coordinates else None,
                                    area=Rect(x=space.area.x, y=space.area.y, width=space.area.width,
                                              height=space.area.height) if space.area else None),
    )
    if outcome.error is not None:
        index, exc = outcome.error
        kind = body.actions[index].type if index < len(body.actions) else "observe"
        response.error = ActionError(index=index, type=kind, problem=problem_of(exc))
    if outcome.settle is not None:
        response.settled = outcome.settle.settled
        response.settle_ms = round(outcome.settle.elapsed_s * 1000)
    if outcome.shot is not None:
        response.screenshot = image_model(outcome.shot, space)
    return response


_INDEX = re.compile(r"^(actions)\.(\d+)(?:\.([a-z_]+))?")


def wire_field(field: str) -> str:
    """`actions.3.click.x` (pydantic's location) as `actions[3].x`; `path.1.x` as `path[1].x`."""
    match = _INDEX.match(field)
    if match is not None:
        tag = match.group(3)
        rest = field[match.end():]
        if tag is not None and tag not in ACTION_TYPES:
            rest = "." + tag + rest
        field = f"actions[{match.group(2)}]{rest}"
    return re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", field)


class BatchOperation(Operation):
    """An Operation whose body errors name fields the way the batch documentation does."""

    async def endpoint(self, request: Request) -> Response:
        try:
            return await super().endpoint(request)
        except FieldError as exc:
            errors = [{**e, "field": wire_field(e["field"])} for e in exc.extensions.get("errors", [])]
            if not errors:
                raise
            raise FieldError(errors, wrong_shape=exc.wrong_shape, code=exc.code) from None


async def action_log(request: Request, *, query: ActionLogQuery) -> ActionLogResponse:
    return ActionLogResponse(entries=desktop_of(request).action_log.entries(query.since, query.limit))


OPERATIONS = [
    BatchOperation("POST", "/v1/desktop/actions", run_actions,
                   "Run a batch of input actions in order, then optionally wait for the screen to settle "
                   "and take a screenshot", body=ActionsRequest, response=ActionsResponse, body_required=True,
                   invalid_code=INVALID, errors=ERRORS, tags=("actions",)),
    Operation("GET", "/v1/desktop/actions/log", action_log,
              "Every input action executed (REST, batch, vendor, live view), oldest first; `since` pages on",
              query=ActionLogQuery, response=ActionLogResponse, tags=("actions",)),
]
