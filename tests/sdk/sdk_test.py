"""Every call of the third-party Python SDK `omnivoice-server-api` (written for the Python
omnivoice-server), unchanged, against this server: tests/sdk.rs starts the real binary with the
small committed OmniVoice checkpoint and runs this with the venv of scripts/sdk-venv.sh.

The SDK's `update_profile` without a clip sends an urlencoded PATCH (httpx does when a form has
no file); with a text-only `files` entry it sends the same fields as multipart. Both must work.
Exits non-zero with the failing call named on the first failure.

Left out: `stream=True` of `create_speech` and `create_speech_clone`. In 0.0.2 it passes
`stream=True` to `httpx.AsyncClient.request`, which has no such argument, so the SDK raises a
TypeError before it sends anything, against any server."""

import argparse
import asyncio
import io
import json
import sys
import wave

from omnivoice_server_api import OmniVoiceClient
from omnivoice_server_api.data_models import (
    AudioFormat,
    ScriptOutputFormat,
    ScriptSegment,
)

CALLS = []


def call(function):
    CALLS.append(function)
    return function


def wav_frames(data):
    """The frame count of a WAV answer; fails on anything that is not one."""
    with wave.open(io.BytesIO(data)) as audio:
        assert audio.getnframes() > 0, "a WAV without samples"
        return audio.getnframes()


@call
async def health(client, args):
    answer = await client.health()
    assert answer.get("status") in ("ok", "ready", "healthy"), answer


@call
async def metrics(client, args):
    text = await client.metrics()
    assert "# TYPE" in text, text[:200]


@call
async def list_models(client, args):
    answer = await client.list_models()
    ids = [model["id"] for model in answer["data"]]
    assert "omnivoice" in ids, ids


@call
async def get_model(client, args):
    answer = await client.get_model("omnivoice")
    assert answer["id"] == "omnivoice", answer


@call
async def list_voices(client, args):
    answer = await client.list_voices()
    assert answer["total"] == len(answer["voices"]), answer
    assert "gender" in answer["design_attributes"], answer["design_attributes"]


@call
async def create_speech(client, args):
    audio = await client.create_speech(
        "Hello there.", voice="female", num_step=4, seed=7, response_format=AudioFormat.WAV
    )
    wav_frames(audio)


@call
async def create_speech_clone(client, args):
    audio = await client.create_speech_clone(
        "Hello there.", args.clip, ref_text=args.clip_text, num_step=4, seed=7
    )
    wav_frames(audio)


@call
async def create_script_audio(client, args):
    script = [
        ScriptSegment(speaker="host", text="Welcome.", voice="alloy"),
        ScriptSegment(speaker="guest", text="Thanks.", voice="female"),
    ]
    single = await client.create_script_audio(script, pause_between_speakers=0.2)
    wav_frames(single)
    tracks = await client.create_script_audio(
        script, output_format=ScriptOutputFormat.MULTI_TRACK
    )
    assert set(tracks["tracks"]) == {"host", "guest"}, list(tracks)


@call
async def profiles(client, args):
    created = await client.create_profile("sdk-anna", args.clip, ref_text=args.clip_text)
    assert created["profile_id"] == "sdk-anna", created
    fetched = await client.get_profile("sdk-anna")
    assert fetched["ref_text"] == args.clip_text, fetched

    # No clip: httpx sends the form urlencoded.
    urlencoded = await client.update_profile("sdk-anna", ref_text="Changed & urlencoded.")
    assert urlencoded["ref_text"] == "Changed & urlencoded.", urlencoded
    # No clip, as multipart: a text-only part forces httpx to build a multipart body.
    multipart = await client.update_profile(
        "sdk-anna", ref_text="Changed as multipart.", files={"name": (None, "Anna")}
    )
    assert multipart["ref_text"] == "Changed as multipart.", multipart
    assert multipart["name"] == "Anna", multipart
    # A new clip (multipart with a file).
    with open(args.clip, "rb") as clip:
        reclipped = await client.update_profile("sdk-anna", ref_audio=clip.read(), ref_text="New.")
    assert reclipped["ref_text"] == "New.", reclipped
    assert (await client.get_profile("sdk-anna"))["name"] == "Anna"

    audio = await client.create_speech("Hi.", voice="clone:sdk-anna", num_step=4, seed=7)
    wav_frames(audio)
    await client.delete_profile("sdk-anna")
    voices = await client.list_voices()
    assert "clone:sdk-anna" not in [v["id"] for v in voices["voices"]], voices


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--clip", required=True)
    parser.add_argument("--clip-text", required=True)
    args = parser.parse_args()
    async with OmniVoiceClient(base_url=args.url, timeout=120) as client:
        for function in CALLS:
            try:
                await function(client, args)
            except Exception as error:  # noqa: BLE001 - any failure names its call
                print(f"sdk call {function.__name__} failed: {error!r}", file=sys.stderr)
                return 1
            print(f"sdk call {function.__name__}: ok")
    print(json.dumps({"calls": len(CALLS)}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
