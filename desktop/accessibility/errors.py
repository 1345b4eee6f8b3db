"""What goes wrong with elements, as typed domain errors (their statuses: the wire's problem table)."""

from __future__ import annotations

from desktop.core.errors import DesktopError
from sandbox_desktop_wire.problems import ProblemCode


class ElementNotFound(DesktopError):
    """No element has that id any more, or none matches the query."""

    code = ProblemCode.ELEMENT_NOT_FOUND


class ElementAmbiguous(DesktopError):
    """An action's query matched several elements; the error carries them as `candidates`."""

    code = ProblemCode.ELEMENT_AMBIGUOUS


class ElementActionUnsupported(DesktopError):
    """The element has no way to do the action asked, or its application refused it."""

    code = ProblemCode.ELEMENT_ACTION_UNSUPPORTED


class AccessibilityUnavailable(DesktopError):
    """The desktop runs without an accessibility bus."""

    code = ProblemCode.ACCESSIBILITY_UNAVAILABLE
