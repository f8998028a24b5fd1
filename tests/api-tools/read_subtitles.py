"""Reads a subtitle file with a reference parser and prints its cues as JSON.

Usage: read_subtitles.py FILE.vtt|FILE.srt

WebVTT files are read by webvtt-py, SubRip files by srt (both pinned in requirements.txt), so
tests/subtitles.rs can check the server's files against parsers it did not write. Prints
[{"start": seconds, "end": seconds, "lines": [...]}, ...]; exits non-zero when the parser
rejects the file.
"""

import json
import sys

import srt
import webvtt


def seconds(stamp):
    """HH:MM:SS.mmm as webvtt-py keeps it (its own seconds are truncated to whole ones)."""
    hours, minutes, rest = stamp.split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(rest)


def main(path):
    if path.endswith(".vtt"):
        cues = [{"start": seconds(c.start), "end": seconds(c.end), "lines": c.lines}
                for c in webvtt.read(path)]
    else:
        with open(path, encoding="utf-8") as f:
            # srt.parse raises on anything between cues that is not a cue.
            cues = [{"start": s.start.total_seconds(), "end": s.end.total_seconds(),
                     "lines": s.content.split("\n"), "index": s.index}
                    for s in srt.parse(f.read())]
    json.dump(cues, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
