"""Writes tests/fixtures/python_profiles/ with the Python omnivoice-server's OWN ProfileService.

The Rust store must read the profiles that server left behind, unchanged. Its
services/profiles.py is stdlib-only, so it is imported by path (no FastAPI, no torch):

    /work/main/.venv-omnivoice-ref/bin/python scripts/python_profiles_fixture.py \
        /work/ref/omnivoice_server_src/omnivoice_server

Three profiles: a WAV with a transcript (non-ASCII on purpose: the server writes
ensure_ascii=False), a WAV without one (ref_text null), and one whose "ref_audio.wav" holds
FLAC bytes, as the Python server stores whatever bytes were uploaded under that name.
The clips are tiny (0.6 s at 8 kHz) so the fixture stays a few tens of kilobytes.
"""

from __future__ import annotations

import importlib.util
import io
import math
import shutil
import struct
import sys
import wave
from pathlib import Path

RATE = 8000
SECONDS = 0.6


def load_profile_service(server_src: Path):
    spec = importlib.util.spec_from_file_location(
        "omnivoice_profiles", server_src / "services" / "profiles.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ProfileService


def tone_wav(frequency: float) -> bytes:
    frames = int(RATE * SECONDS)
    samples = [
        int(round(0.4 * 32767 * math.sin(2 * math.pi * frequency * i / RATE)))
        for i in range(frames)
    ]
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(struct.pack(f"<{frames}h", *samples))
    return buffer.getvalue()


def tone_flac(frequency: float) -> bytes:
    # soundfile is in the reference venv (the Python server uses it to read uploads).
    import numpy as np
    import soundfile as sf

    t = np.arange(int(RATE * SECONDS)) / RATE
    buffer = io.BytesIO()
    sf.write(buffer, 0.4 * np.sin(2 * np.pi * frequency * t), RATE, format="FLAC", subtype="PCM_16")
    return buffer.getvalue()


def main() -> None:
    server_src = Path(sys.argv[1])
    out = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "python_profiles"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    service = load_profile_service(server_src)(profile_dir=out)
    service.save_profile("narrator", tone_wav(220.0), ref_text="Grüße — 你好, this is the narrator.")
    service.save_profile("no_text", tone_wav(330.0), ref_text=None)
    service.save_profile("flac-inside", tone_flac(440.0), ref_text="A FLAC file under a WAV name.")
    for profile in service.list_profiles():
        print(profile)


if __name__ == "__main__":
    main()
