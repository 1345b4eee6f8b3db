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


P = ProblemSpec
C = ProblemCode
PROBLEMS: Mapping[ProblemCode, ProblemSpec] = {
    C.INVALID_REQUEST: P(400, "Invalid Request", "malformed JSON, a bad query parameter, a value out of range "
                         "off the desktop routes (400); a body of the wrong shape: a wrong type, a missing "
                         "field, a bad enum value, not an object (422)", also={422: "Unprocessable Entity"}),
    C.UNSUPPORTED_MEDIA_TYPE: P(415, "Unsupported Media Type", "a body that is not JSON"),
    C.PAYLOAD_TOO_LARGE: P(413, "Payload Too Large", "a JSON body over 64 MiB, a text to type over its limit, "
                           "a file over the file system's limit", type_suffix="invalid_request"),
    C.NOT_FOUND: P(404, "Not Found", "an unknown route (`type` ends in `invalid_request`), or a named resource "
                   "that does not exist (adds `details: {resource, id}`)"),
    C.METHOD_NOT_ALLOWED: P(405, "Method Not Allowed", "a wrong method on a route (with `Allow`)"),
    C.UPGRADE_REQUIRED: P(426, "Upgrade Required", "a plain HTTP request to a WebSocket endpoint "
                          "(with `Upgrade: websocket`)", type_suffix="invalid_request"),
    C.RANGE_NOT_SATISFIABLE: P(416, "Range Not Satisfiable", "a recording download's `Range` starts past the "
                               "end of the file"),
    C.TOKEN_INVALID: P(401, "Token Invalid", "a missing or wrong token (with `WWW-Authenticate: Bearer`)"),
    C.TOKEN_SCOPE: P(403, "Token Scope", "a scoped token used beyond its desktop or role"),
    C.HOST_NOT_ALLOWED: P(421, "Host Not Allowed", "a `Host` the server does not answer to"),
    C.ORIGIN_NOT_ALLOWED: P(403, "Origin Not Allowed", "a browser page on an origin the server does not serve"),
    C.API_DISABLED: P(403, "Permission Denied", "a route of an API the server was started without "
                      "(`--no-process-api`, `--no-file-api`)", type_suffix="permission_denied"),
    C.MCP_UNAVAILABLE: P(501, "MCP Unavailable", "`/v1/mcp` on a server without the `mcp` package (501), or while "
                         "it starts or shuts down (503)", also={503: "MCP Unavailable"}),
    C.CONFLICT: P(409, "Conflict", "the request conflicts with the current state (a running process, an "
                  "existing path, an active recording)"),
    C.STREAM_ERROR: P(502, "Stream Error", "the machine failed: a process cannot be started (no memory or "
                      "process slots), an I/O error"),
    C.TIMEOUT: P(504, "Timeout", "an X client did not answer in time (504); a process did not read its input "
                 "within 5 s (409)", also={409: "Conflict"}),
    C.PERMISSION_DENIED: P(403, "Permission Denied", "the server's user may not do this to the file system"),
    C.INTERNAL_ERROR: P(500, "Internal Server Error", "a bug in the server"),
    C.DESKTOP_UNSUPPORTED_PLATFORM: P(501, "Desktop Unsupported", "the server is not on Linux"),
    C.DESKTOP_DEPENDENCIES_MISSING: P(503, "Desktop Dependencies Missing", "adds `missingDependencies` and "
                                      "`installCommand`"),
    C.DESKTOP_RUNTIME_INACTIVE: P(409, "Desktop Runtime Inactive", "an action before `start`"),
    C.DESKTOP_RUNTIME_STARTING: P(409, "Desktop Runtime Starting", "start/stop while starting or stopping"),
    C.DESKTOP_RUNTIME_FAILED: P(503, "Desktop Runtime Failed", "the desktop failed, or is restarting a crashed "
                                "child (with `Retry-After: 1`)"),
    C.DESKTOP_NOT_READY: P(503, "Desktop Not Ready", "`GET /v1/health/ready` when a check fails (with "
                           "`Retry-After: 1` and the `checks`)"),
    C.DESKTOP_INVALID_ACTION: P(400, "Desktop Invalid Action", "a value out of range on a desktop route"),
    C.DESKTOP_ALREADY_ACTIVE: P(409, "Conflict", "a start asking for another size or state directory than the "
                                "running desktop's", type_suffix="conflict"),
    C.DESKTOP_SCREENSHOT_FAILED: P(502, "Desktop Screenshot Failed", "the X server did not give the screen"),
    C.DESKTOP_INPUT_FAILED: P(502, "Desktop Input Failed", "the X server did not take the input (the keymap "
                              "keeps changing)"),
    C.DESKTOP_NOT_FOUND: P(404, "Desktop Not Found", "no desktop with that id, or it was deleted"),
    C.DESKTOP_PAUSED: P(409, "Desktop Paused", "an action on a paused desktop"),
    C.DESKTOP_IS_DEFAULT: P(409, "Desktop Is Default", "deleting the default desktop"),
    C.TOO_MANY_DESKTOPS: P(429, "Too Many Desktops", "over `--max-desktops`, or no free display number"),
    C.WINDOW_NOT_FOUND: P(404, "Window Not Found", "no visible application window with that id"),
    C.NO_FOCUSED_WINDOW: P(404, "No Focused Window", "no window has the focus"),
    C.WINDOW_NOT_VIEWABLE: P(409, "Window Not Viewable", "a minimised or unmapped window has no pixels to capture or "
                             "click in; `windowState` says which"),
    C.ELEMENT_NOT_FOUND: P(404, "Element Not Found", "no accessible element with that id (it is gone), or none "
                           "matches the query"),
    C.ELEMENT_AMBIGUOUS: P(409, "Element Ambiguous", "an action's query matches more than one element; "
                           "`candidates` lists them"),
    C.ELEMENT_ACTION_UNSUPPORTED: P(409, "Element Action Unsupported", "the element cannot do that action "
                                    "(its `actions` lists what it can), or its application refused it"),
    C.ACCESSIBILITY_UNAVAILABLE: P(503, "Accessibility Unavailable", "the desktop has no accessibility bus "
                                   "(at-spi2-core missing or failed to start)"),
    C.CLIPBOARD_FAILED: P(500, "Clipboard Failed", "another X client took the selection at the same moment"),
    C.CLIPBOARD_NO_IMAGE: P(404, "Clipboard No Image", "a read with `format=image` when the selection offers no "
                            "`image/png` (nothing copied, text only, or its owner refused)"),
    C.PATH_NOT_FOUND: P(422, "Path Not Found", "a path a drop (`paths[i]`) or a file dialog (`path`) names does "
                        "not exist on the desktop's machine"),
    C.NO_DROP_TARGET: P(409, "No Drop Target", "no window at the drop's point takes drops (none is `XdndAware`)"),
    C.DROP_REFUSED: P(409, "Drop Refused", "the window at the point refused the drop, or reported that it failed"),
    C.FILE_DIALOG_NOT_FOUND: P(404, "File Dialog Not Found", "no open file chooser (or `windowId` is not one)"),
    C.FILE_DIALOG_NOT_CLOSED: P(409, "File Dialog Not Closed", "the file chooser stayed open after the path was "
                                "entered (it showed an error or asks to confirm)"),
    C.STREAM_ALREADY_ACTIVE: P(409, "Stream Already Active", "kept from the reference; this server does not "
                               "answer it"),
    C.STREAM_NOT_ACTIVE: P(409, "Conflict", "the live view's signalling before `stream/start`",
                           type_suffix="conflict"),
    C.DESKTOP_CONTROLLED_BY_VIEWER: P(409, "Desktop Controlled By Viewer", "agent input while a person holds "
                                      "control through the live view (`--takeover refuse`); `controller` names them"),
    C.ACTION_DENIED: P(403, "Action Denied", "a person denied the action; `message` is theirs"),
    C.APPROVAL_EXPIRED: P(403, "Approval Expired", "nobody decided on the action within the approval timeout; it "
                          "did not run"),
    C.APPROVAL_NOT_FOUND: P(404, "Approval Not Found", "no approval with that id"),
    C.APPROVAL_ALREADY_DECIDED: P(409, "Approval Already Decided", "a decision on an approval that is no longer "
                                  "pending"),
    C.AUDIO_UNAVAILABLE: P(503, "Audio Unavailable", "the desktop has no sound server (pulseaudio missing or "
                           "failed to start)"),
    C.APP_NOT_FOUND: P(404, "App Not Found", "`app` is not on PATH"),
    C.APP_EXITED: P(422, "App Exited", "the app (or xdg-open) exits non-zero at once"),
    C.APP_NOT_EXECUTABLE: P(422, "App Not Executable", "`app` is no program or its `#!` interpreter is missing"),
    C.TARGET_NOT_FOUND: P(422, "Target Not Found", "`target` does not exist (xdg-open's exit code 2)"),
    C.COMMAND_NOT_FOUND: P(422, "Command Not Found", "`command` not on PATH, or a path that does not exist"),
    C.COMMAND_NOT_EXECUTABLE: P(422, "Command Not Executable", "`command` is a directory, lacks the execute "
                                "permission, is no program, or its `#!` interpreter is missing"),
    C.COMMAND_BUSY: P(409, "Command Busy", "`command` (`app`) is open for writing (text file busy)"),
    C.CWD_NOT_FOUND: P(422, "Cwd Not Found", "`cwd` does not exist"),
    C.CWD_NOT_DIRECTORY: P(422, "Cwd Not Directory", "`cwd` (or one of its parents) is a file"),
    C.CWD_NOT_ACCESSIBLE: P(422, "Cwd Not Accessible", "`cwd` cannot be entered by the server's user"),
    C.ARGUMENTS_TOO_LONG: P(422, "Arguments Too Long", "`args` and `env` over the kernel's limit (128 KiB per "
                            "argument)"),
}
del P, C


def problem_type(code: ProblemCode) -> str:
    """The problem's `type` urn."""
    return TYPE_PREFIX + (PROBLEMS[code].type_suffix or code.value)
