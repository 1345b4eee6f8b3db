"""An interpreter with OSWorld's real harness, `desktop-env` 1.0.2, without its gigabytes: made once in a cache
folder and reused (docs/osworld.md "Testing with the real harness").

`pip install desktop-env` whole pins torch~=2.5 (PyPI's wheels bring the CUDA libraries), transformers and a dozen
cloud SDKs, which neither the setup controller nor the checkers these tests and bench/osworld_tasks.py run use. So
the venv gets `desktop-env` with `--no-deps` and then only what its modules import when `desktop_env.desktop_env`
is imported (every checker module is imported by it), pinned to versions that were run together. One of them is
left out: `easyocr` (torch again), imported at module level by the docs domain's OCR metric only; an empty
module stands in for it in the venv, so the import succeeds and a task that would call it fails loudly."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

DESKTOP_ENV = "desktop-env==1.0.2"
IMPORTED = (
    # what `import desktop_env.desktop_env` imports, by distribution (PIL, cv2, fitz, skimage; lxml.cssselect's)
    "pillow==11.0.0", "PyPDF2==3.0.1", "pyacoustid==1.3.1", "borb==3.0.9", "beautifulsoup4==4.15.0",
    "cssselect==1.6.0", "opencv-python-headless==5.1.0.95", "python-docx==1.2.0", "python-dotenv==1.2.4",
    "fastdtw==0.3.4", "pymupdf==2.0", "formulas==1.3.4", "gymnasium==0.28.1", "ImageHash==4.3.2",
    "librosa==0.11.0", "lxml==6.2.0", "mutagen==1.48.1", "numpy==2.4.6", "odfpy==1.4.1", "openpyxl==3.1.5",
    "pandas==2.2.3", "pdfplumber==0.11.9", "playwright==1.65.2", "python-pptx==1.0.2", "PyDrive==1.3.1",
    "pypdf==7.1.1", "pytz==2026.6", "RapidFuzz==3.14.6", "requests==2.34.2", "requests-toolbelt==1.0.0",
    "scipy==1.17.1", "scikit-image==0.26.0", "tldextract==5.4.0", "xmltodict==1.0.4", "PyYAML==6.0.4",
)
CLIENT = ("httpx==0.29.0", "pydantic==2.14.4")  # the light client's own (client/pyproject.toml): the provider
STAND_INS = {"easyocr": "# stands in for easyocr (torch): imported by desktop_env's OCR metric, never called here\n"}
VENV = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sandbox-desktop" / "desktop-env-1.0.2"
READY = "ready"  # written last: a build cut short is made again, not half-used


def desktop_env_python(venv: Path = VENV) -> Path:
    """The venv's interpreter, building the venv first where it is not there yet (1.5 to 2.5 minutes with no pip
    cache on a busy 2-core machine, mostly downloads; docs/osworld.md)."""
    python = venv / "bin" / "python"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # test workers that start together build it once
        if not (venv / READY).exists():
            build(venv, python)
    return python


def build(venv: Path, python: Path) -> None:
    shutil.rmtree(venv, ignore_errors=True)
    base = getattr(sys, "_base_executable", sys.executable)  # not the tests' venv: its packages stay out
    run(base, "-m", "venv", str(venv))
    pip = (str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile")
    run(*pip, "--no-deps", DESKTOP_ENV)
    run(*pip, *IMPORTED, *CLIENT)
    site = Path(run(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    for module, text in STAND_INS.items():
        (site / f"{module}.py").write_text(text)
    run(str(python), "-c", "import desktop_env.desktop_env")
    (venv / READY).write_text(DESKTOP_ENV + "\n")


def run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"building the desktop-env venv: {' '.join(argv[:6])} ... failed ({done.returncode}):\n"
                           f"{done.stderr[-4000:]}")
    return done.stdout
