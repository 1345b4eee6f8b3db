"""Every problem `code` the server answers with, its HTTP status and title: the one table of them.

The server renders its errors from it (api/http/problems.py), docs/errors.md lists it (a test keeps the two
equal), and a client can map a code to its status and title too:

    spec = PROBLEMS[ProblemCode(body["code"])]

`type` is `urn:sandbox-agent:error:` plus the code, except where `type_suffix` says otherwise (kept as
the reference has it). A code answered with more than one status lists the others in `also`, each with
its title.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

TYPE_PREFIX = "urn:sandbox-agent:error:"


class ProblemCode(enum.StrEnum):
    # Bad input and the framework (docs/errors.md "Bad input")
    INVALID_REQUEST = "invalid_request"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    UPGRADE_REQUIRED = "upgrade_required"
    RANGE_NOT_SATISFIABLE = "range_not_satisfiable"
    # Who may ask (docs/security.md)
    TOKEN_INVALID = "token_invalid"
    TOKEN_SCOPE = "token_scope"
    HOST_NOT_ALLOWED = "host_not_allowed"
    ORIGIN_NOT_ALLOWED = "origin_not_allowed"
    API_DISABLED = "api_disabled"
    MCP_UNAVAILABLE = "mcp_unavailable"
    # Generic problems, as the reference's clients expect them
    CONFLICT = "conflict"
    STREAM_ERROR = "stream_error"
    TIMEOUT = "timeout"
    PERMISSION_DENIED = "permission_denied"
    INTERNAL_ERROR = "internal_error"
    # The desktop (docs/desktop.md, docs/desktops.md)
    DESKTOP_UNSUPPORTED_PLATFORM = "desktop_unsupported_platform"
    DESKTOP_DEPENDENCIES_MISSING = "desktop_dependencies_missing"
    DESKTOP_RUNTIME_INACTIVE = "desktop_runtime_inactive"
    DESKTOP_RUNTIME_STARTING = "desktop_runtime_starting"
    DESKTOP_RUNTIME_FAILED = "desktop_runtime_failed"
    DESKTOP_NOT_READY = "desktop_not_ready"
    DESKTOP_INVALID_ACTION = "desktop_invalid_action"
    DESKTOP_ALREADY_ACTIVE = "desktop_already_active"
    DESKTOP_SCREENSHOT_FAILED = "desktop_screenshot_failed"
    DESKTOP_INPUT_FAILED = "desktop_input_failed"
    DESKTOP_NOT_FOUND = "desktop_not_found"
    DESKTOP_PAUSED = "desktop_paused"
    DESKTOP_IS_DEFAULT = "desktop_is_default"
    TOO_MANY_DESKTOPS = "too_many_desktops"
    POLICY_REFUSED = "policy_refused"
    WINDOW_NOT_FOUND = "window_not_found"
    NO_FOCUSED_WINDOW = "no_focused_window"
    WINDOW_NOT_VIEWABLE = "window_not_viewable"
    # Accessibility (docs/accessibility.md)
    ELEMENT_NOT_FOUND = "element_not_found"
    ELEMENT_AMBIGUOUS = "element_ambiguous"
    ELEMENT_ACTION_UNSUPPORTED = "element_action_unsupported"
    ACCESSIBILITY_UNAVAILABLE = "accessibility_unavailable"
    CLIPBOARD_FAILED = "clipboard_failed"
    CLIPBOARD_NO_IMAGE = "clipboard_no_image"
    # Files into apps (docs/files-into-apps.md)
    PATH_NOT_FOUND = "path_not_found"
    NO_DROP_TARGET = "no_drop_target"
    DROP_REFUSED = "drop_refused"
    FILE_DIALOG_NOT_FOUND = "file_dialog_not_found"
    FILE_DIALOG_NOT_CLOSED = "file_dialog_not_closed"
    STREAM_ALREADY_ACTIVE = "stream_already_active"
    STREAM_NOT_ACTIVE = "stream_not_active"
    # People in the loop (docs/control.md, docs/approvals.md, docs/audio.md)
    DESKTOP_CONTROLLED_BY_VIEWER = "desktop_controlled_by_viewer"
    ACTION_DENIED = "action_denied"
    APPROVAL_EXPIRED = "approval_expired"
    APPROVAL_NOT_FOUND = "approval_not_found"
    APPROVAL_ALREADY_DECIDED = "approval_already_decided"
    AUDIO_UNAVAILABLE = "audio_unavailable"
    # Apps (docs/apps.md)
    APP_NOT_FOUND = "app_not_found"
    APP_EXITED = "app_exited"
    APP_NOT_EXECUTABLE = "app_not_executable"
    TARGET_NOT_FOUND = "target_not_found"
    # Processes (docs/processes.md "Errors")
    COMMAND_NOT_FOUND = "command_not_found"
    COMMAND_NOT_EXECUTABLE = "command_not_executable"
    COMMAND_BUSY = "command_busy"
    CWD_NOT_FOUND = "cwd_not_found"
    CWD_NOT_DIRECTORY = "cwd_not_directory"
    CWD_NOT_ACCESSIBLE = "cwd_not_accessible"
    ARGUMENTS_TOO_LONG = "arguments_too_long"


@dataclass(frozen=True)
class ProblemSpec:
    status: int
    title: str
    when: str
    type_suffix: str | None = None
    """The `type` urn's suffix when it is not the code."""
    also: Mapping[int, str] = field(default_factory=dict)
    """Other statuses the code is answered with, and the title each has."""

    def title_for(self, status: int) -> str:
        return self.also.get(status, self.title)


PROBLEMS: Mapping[ProblemCode, ProblemSpec] = {
    ProblemCode.INVALID_REQUEST: ProblemSpec(
        400, "Invalid Request", "malformed JSON, a bad query parameter, a value "
        "out of range off the desktop routes (400); a body of the wrong shape: "
        "a wrong type, a missing field, a bad enum value, not an object (422)", also={422: "Unprocessable Entity"}),
    ProblemCode.UNSUPPORTED_MEDIA_TYPE: ProblemSpec(415, "Unsupported Media Type", "a body that is not JSON"),
    ProblemCode.PAYLOAD_TOO_LARGE: ProblemSpec(
        413, "Payload Too Large", "a JSON body over 64 MiB, a text "
        "to type over its limit, a file over the file system's limit", type_suffix="invalid_request"),
    ProblemCode.NOT_FOUND: ProblemSpec(
        404, "Not Found", "an unknown route (`type` ends in `invalid_request`), "
        "or a named resource that does not exist (adds `details: {resource, id}`)"),
    ProblemCode.METHOD_NOT_ALLOWED: ProblemSpec(405, "Method Not Allowed", "a wrong method on a route (with `Allow`)"),
    ProblemCode.UPGRADE_REQUIRED: ProblemSpec(
        426, "Upgrade Required", "a plain HTTP request to "
        "a WebSocket endpoint (with `Upgrade: websocket`)", type_suffix="invalid_request"),
    ProblemCode.RANGE_NOT_SATISFIABLE: ProblemSpec(
        416, "Range Not Satisfiable", "a recording download's `Range` starts past the end of the file"),
    ProblemCode.TOKEN_INVALID: ProblemSpec(
        401, "Token Invalid", "a missing or wrong token (with `WWW-Authenticate: Bearer`)"),
    ProblemCode.TOKEN_SCOPE: ProblemSpec(403, "Token Scope", "a scoped token used beyond its desktop or role"),
    ProblemCode.HOST_NOT_ALLOWED: ProblemSpec(421, "Host Not Allowed", "a `Host` the server does not answer to"),
    ProblemCode.ORIGIN_NOT_ALLOWED: ProblemSpec(
        403, "Origin Not Allowed", "a browser page on an origin the server does not serve"),
    ProblemCode.API_DISABLED: ProblemSpec(
        403, "Permission Denied", "a route of an API the server "
        "was started without (`--no-process-api`, `--no-file-api`)", type_suffix="permission_denied"),
    ProblemCode.MCP_UNAVAILABLE: ProblemSpec(
        501, "MCP Unavailable", "`/v1/mcp` on a server without the "
        "`mcp` package (501), or while it starts or shuts down (503)", also={503: "MCP Unavailable"}),
    ProblemCode.CONFLICT: ProblemSpec(
        409, "Conflict", "the request conflicts with the current state "
        "(a running process, an existing path, an active recording)"),
    ProblemCode.STREAM_ERROR: ProblemSpec(
        502, "Stream Error", "the machine failed: a process cannot "
        "be started (no memory or process slots), an I/O error"),
    ProblemCode.TIMEOUT: ProblemSpec(
        504, "Timeout", "an X client did not answer in time "
        "(504); a process did not read its input within 5 s (409)", also={409: "Conflict"}),
    ProblemCode.PERMISSION_DENIED: ProblemSpec(
        403, "Permission Denied", "the server's user may not do this to the file system"),
    ProblemCode.INTERNAL_ERROR: ProblemSpec(500, "Internal Server Error", "a bug in the server"),
    ProblemCode.DESKTOP_UNSUPPORTED_PLATFORM: ProblemSpec(501, "Desktop Unsupported", "the server is not on Linux"),
    ProblemCode.DESKTOP_DEPENDENCIES_MISSING: ProblemSpec(
        503, "Desktop Dependencies Missing", "adds `missingDependencies` and `installCommand`"),
    ProblemCode.DESKTOP_RUNTIME_INACTIVE: ProblemSpec(409, "Desktop Runtime Inactive", "an action before `start`"),
    ProblemCode.DESKTOP_RUNTIME_STARTING: ProblemSpec(
        409, "Desktop Runtime Starting", "start/stop while starting or stopping"),
    ProblemCode.DESKTOP_RUNTIME_FAILED: ProblemSpec(
        503, "Desktop Runtime Failed", "the desktop failed, or is restarting a crashed child (with `Retry-After: 1`)"),
    ProblemCode.DESKTOP_NOT_READY: ProblemSpec(
        503, "Desktop Not Ready", "`GET /v1/health/ready` when a check fails (with `Retry-After: 1` and the `checks`)"),
    ProblemCode.DESKTOP_INVALID_ACTION: ProblemSpec(
        400, "Desktop Invalid Action", "a value out of range on a desktop route"),
    ProblemCode.DESKTOP_ALREADY_ACTIVE: ProblemSpec(
        409, "Conflict", "a start asking for another size "
        "or state directory than the running desktop's", type_suffix="conflict"),
    ProblemCode.DESKTOP_SCREENSHOT_FAILED: ProblemSpec(
        502, "Desktop Screenshot Failed", "the X server did not give the screen"),
    ProblemCode.DESKTOP_INPUT_FAILED: ProblemSpec(
        502, "Desktop Input Failed", "the X server did not take the input (the keymap keeps changing)"),
    ProblemCode.DESKTOP_NOT_FOUND: ProblemSpec(404, "Desktop Not Found", "no desktop with that id, or it was deleted"),
    ProblemCode.DESKTOP_PAUSED: ProblemSpec(409, "Desktop Paused", "an action on a paused desktop"),
    ProblemCode.DESKTOP_IS_DEFAULT: ProblemSpec(409, "Desktop Is Default", "deleting the default desktop"),
    ProblemCode.TOO_MANY_DESKTOPS: ProblemSpec(
        429, "Too Many Desktops", "over `--max-desktops`, or no free display number"),
    ProblemCode.POLICY_REFUSED: ProblemSpec(
        403, "Policy Refused", "a desktop's tags, timers, network rules or limits beyond what the server imposes on "
        "every desktop (`--desktop-policy`); `errors` names the field"),
    ProblemCode.WINDOW_NOT_FOUND: ProblemSpec(404, "Window Not Found", "no visible application window with that id"),
    ProblemCode.NO_FOCUSED_WINDOW: ProblemSpec(404, "No Focused Window", "no window has the focus"),
    ProblemCode.WINDOW_NOT_VIEWABLE: ProblemSpec(
        409, "Window Not Viewable", "a minimised or unmapped window "
        "has no pixels to capture or click in; `windowState` says which"),
    ProblemCode.ELEMENT_NOT_FOUND: ProblemSpec(
        404, "Element Not Found", "no accessible element with that id (it is gone), or none matches the query"),
    ProblemCode.ELEMENT_AMBIGUOUS: ProblemSpec(
        409, "Element Ambiguous", "an action's query matches more than one element; `candidates` lists them"),
    ProblemCode.ELEMENT_ACTION_UNSUPPORTED: ProblemSpec(
        409, "Element Action Unsupported", "the element cannot do that action "
        "(its `actions` lists what it can), or its application refused it"),
    ProblemCode.ACCESSIBILITY_UNAVAILABLE: ProblemSpec(
        503, "Accessibility Unavailable", "the desktop has no "
        "accessibility bus (at-spi2-core missing or failed to start)"),
    ProblemCode.CLIPBOARD_FAILED: ProblemSpec(
        500, "Clipboard Failed", "another X client took the selection at the same moment"),
    ProblemCode.CLIPBOARD_NO_IMAGE: ProblemSpec(
        404, "Clipboard No Image", "a read with `format=image` when the selection "
        "offers no `image/png` (nothing copied, text only, or its owner refused)"),
    ProblemCode.PATH_NOT_FOUND: ProblemSpec(
        422, "Path Not Found", "a path a drop (`paths[i]`) or a file "
        "dialog (`path`) names does not exist on the desktop's machine"),
    ProblemCode.NO_DROP_TARGET: ProblemSpec(
        409, "No Drop Target", "no window at the drop's point takes drops (none is `XdndAware`)"),
    ProblemCode.DROP_REFUSED: ProblemSpec(
        409, "Drop Refused", "the window at the point refused the drop, or reported that it failed"),
    ProblemCode.FILE_DIALOG_NOT_FOUND: ProblemSpec(
        404, "File Dialog Not Found", "no open file chooser (or `windowId` is not one)"),
    ProblemCode.FILE_DIALOG_NOT_CLOSED: ProblemSpec(
        409, "File Dialog Not Closed", "the file chooser stayed open after "
        "the path was entered (it showed an error or asks to confirm)"),
    ProblemCode.STREAM_ALREADY_ACTIVE: ProblemSpec(
        409, "Stream Already Active", "kept from the reference; this server does not answer it"),
    ProblemCode.STREAM_NOT_ACTIVE: ProblemSpec(
        409, "Conflict", "the live view's signalling before `stream/start`", type_suffix="conflict"),
    ProblemCode.DESKTOP_CONTROLLED_BY_VIEWER: ProblemSpec(
        409, "Desktop Controlled By Viewer", "agent input while a person holds "
        "control through the live view (`--takeover refuse`); `controller` names them"),
    ProblemCode.ACTION_DENIED: ProblemSpec(403, "Action Denied", "a person denied the action; `message` is theirs"),
    ProblemCode.APPROVAL_EXPIRED: ProblemSpec(
        403, "Approval Expired", "nobody decided on the action within the approval timeout; it did not run"),
    ProblemCode.APPROVAL_NOT_FOUND: ProblemSpec(404, "Approval Not Found", "no approval with that id"),
    ProblemCode.APPROVAL_ALREADY_DECIDED: ProblemSpec(
        409, "Approval Already Decided", "a decision on an approval that is no longer pending"),
    ProblemCode.AUDIO_UNAVAILABLE: ProblemSpec(
        503, "Audio Unavailable", "the desktop has no sound server (pulseaudio missing or failed to start)"),
    ProblemCode.APP_NOT_FOUND: ProblemSpec(404, "App Not Found", "`app` is not on PATH"),
    ProblemCode.APP_EXITED: ProblemSpec(422, "App Exited", "the app (or xdg-open) exits non-zero at once"),
    ProblemCode.APP_NOT_EXECUTABLE: ProblemSpec(
        422, "App Not Executable", "`app` is no program or its `#!` interpreter is missing"),
    ProblemCode.TARGET_NOT_FOUND: ProblemSpec(
        422, "Target Not Found", "`target` does not exist (xdg-open's exit code 2)"),
    ProblemCode.COMMAND_NOT_FOUND: ProblemSpec(
        422, "Command Not Found", "`command` not on PATH, or a path that does not exist"),
    ProblemCode.COMMAND_NOT_EXECUTABLE: ProblemSpec(
        422, "Command Not Executable", "`command` is a directory, lacks the "
        "execute permission, is no program, or its `#!` interpreter is missing"),
    ProblemCode.COMMAND_BUSY: ProblemSpec(
        409, "Command Busy", "`command` (`app`) is open for writing (text file busy)"),
    ProblemCode.CWD_NOT_FOUND: ProblemSpec(422, "Cwd Not Found", "`cwd` does not exist"),
    ProblemCode.CWD_NOT_DIRECTORY: ProblemSpec(422, "Cwd Not Directory", "`cwd` (or one of its parents) is a file"),
    ProblemCode.CWD_NOT_ACCESSIBLE: ProblemSpec(
        422, "Cwd Not Accessible", "`cwd` cannot be entered by the server's user"),
    ProblemCode.ARGUMENTS_TOO_LONG: ProblemSpec(
        422, "Arguments Too Long", "`args` and `env` over the kernel's limit (128 KiB per argument)"),
}


def problem_type(code: ProblemCode) -> str:
    """The problem's `type` urn."""
    return TYPE_PREFIX + (PROBLEMS[code].type_suffix or code.value)
