"""A desktop's status and start options between the wire and the domain."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from api.convert.sandbox import usage_model
from api.convert.windows import window_model
from desktop.lifecycle.options import StartOptions, parse_codec, parse_port_range
from desktop.lifecycle.snapshot import DesktopSnapshot
from desktop.sandbox.layers import SandboxReport
from sandbox_desktop_wire.desktop import (
    DesktopErrorInfo,
    DesktopExitInfo,
    DesktopProcessInfo,
    DesktopResolution,
    DesktopStartRequest,
    DesktopStatusResponse,
    SandboxInfo,
)
from sandbox_desktop_wire.enums import AudioCodec, VideoCodec


def resolution(options: StartOptions) -> DesktopResolution:
    """The screen now and the largest it may take at runtime (docs/display.md)."""
    max_width, max_height = options.framebuffer()
    return DesktopResolution(width=options.width, height=options.height, dpi=options.dpi, max_width=max_width,
                             max_height=max_height)


def status_model(s: DesktopSnapshot, options: StartOptions | None = None) -> DesktopStatusResponse:
    """The status document; `options`, the running desktop's, add its maximum screen size."""
    max_width, max_height = options.framebuffer() if options is not None else (None, None)
    exit_info = None
    if s.last_exit is not None:
        e = s.last_exit
        exit_info = DesktopExitInfo(process=e.name, pid=e.pid, exit_code=e.exit_code, signal=e.signal,
                                    at=datetime.fromtimestamp(e.at, UTC).isoformat())
    return DesktopStatusResponse(
        state=s.state,
        display=s.display,
        resolution=DesktopResolution(width=s.width, height=s.height, dpi=s.dpi, max_width=max_width,
                                     max_height=max_height)
        if s.width is not None and s.height is not None else None,
        started_at=s.started_at,
        last_error=DesktopErrorInfo(code=s.last_error[0], message=s.last_error[1]) if s.last_error else None,
        missing_dependencies=list(s.missing_dependencies),
        missing_optional_dependencies=list(s.missing_optional) or None,
        install_command=s.install_command,
        processes=[DesktopProcessInfo(name=c.name, pid=c.pid if c.running else None,
                                      host_pid=c.host_pid if c.running and c.host_pid != c.pid else None,
                                      running=c.running, log_path=c.log_path, process_id=c.process_id)
                   for c in s.processes],
        runtime_log_path=s.runtime_log_path,
        state_dir=s.state_dir,
        windows=[window_model(w) for w in s.windows] or None,
        restart_count=s.restart_count if s.display else None,
        last_exit=exit_info,
        sandbox=sandbox_model(s.sandbox) if s.sandbox is not None else None,
        usage=usage_model(s.usage) if s.usage is not None else None,
        pointer_grabbed=True if s.pointer_grabbed else None,
    )


def start_options(body: DesktopStartRequest) -> StartOptions:
    """Request fields over defaults; unset and null fields keep the default."""
    fields = {name: value for name, value in body.model_dump().items() if value is not None}
    if "state_dir" in fields:
        fields["state_dir"] = Path(fields["state_dir"]).expanduser()
    if "webrtc_port_range" in fields:
        fields["webrtc_port_range"] = parse_port_range(fields["webrtc_port_range"])
    # Plain strings on the wire (a wrong name is a 400 naming the field, docs/errors.md), members from here on.
    if "stream_video_codec" in fields:
        fields["stream_video_codec"] = parse_codec(VideoCodec, fields["stream_video_codec"], "streamVideoCodec")
    if "stream_audio_codec" in fields:
        fields["stream_audio_codec"] = parse_codec(AudioCodec, fields["stream_audio_codec"], "streamAudioCodec")
    return StartOptions(**fields)


def sandbox_model(report: SandboxReport) -> SandboxInfo:
    return SandboxInfo(isolated=report.isolated, layers=[str(layer) for layer in report.ordered()],
                       missing={str(layer): why for layer, why in report.missing.items()})
